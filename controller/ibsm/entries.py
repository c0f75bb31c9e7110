"""The P4Runtime entities of one switch, as pure functions of the plans (finsy entity objects).

Every table, action, counter and meter is named by its P4Info name (ibsec.names, checked against the
committed P4Info); finsy turns names into ids with the P4Info the SM loaded, so the same code drives the
software target and BMv2.
Nothing here talks to a switch: the core writes what these functions return, and tests read it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import finsy as fy
from ibsec.names import (
    ADD_DISTANCE,
    DDPM_DELTAS,
    DST_ID,
    DST_ID_BITS,
    EGRESS_SPEC,
    FILTER_INVALID_LIST,
    FILTER_VALID_LIST,
    FLIP_DISTANCE,
    FORWARD,
    FORWARD_TO_GROUP,
    INGRESS_PORT,
    INVALID_PKEYS,
    KEEP_MARK,
    MARK_DOWN_PORT,
    NO_ACTION,
    P_KEY,
    PARTITION_MODE,
    PKEY_VIOLATIONS,
    PORT_ROLES,
    PUNT_METER,
    PUNT_TO_SM,
    REJECT_PKEY,
    ROUTE_GROUP,
    ROUTE_GROUPS,
    ROUTE_MEMBER,
    ROUTES,
    SEED_HOST_MARK,
    SM_PUNT,
    SPREAD_MODE,
    SPREAD_PER_FLOW,
    SPREAD_PER_PACKET,
    VALID_PKEYS,
    Policy,
)

from .fabric import SwitchPlan
from .sif import INVALID_LIST, OFF, VALID_LIST, Action, ActionKind, PortFilter, PortId

OWNED_TABLES = (PORT_ROLES, PARTITION_MODE, INVALID_PKEYS, VALID_PKEYS, SM_PUNT, ROUTES, ROUTE_GROUPS,
                DDPM_DELTAS)
"""Tables whose whole content the SM decides: anything else found in them is removed on reconcile."""

Entity = fy.P4TableEntry


def _port_entry(table: str, port: int, action: fy.P4TableAction, field: str = INGRESS_PORT
                ) -> fy.P4TableEntry:
    return fy.P4TableEntry(table, match=fy.P4TableMatch({field: port}), action=action)


def group_ids(plan: SwitchPlan) -> dict[tuple[int, ...], int]:
    """A stable id per set of equal next hops (the same topology always gives the same ids)."""
    sets = {ports for ports in plan.routes.values() if len(ports) > 1}
    if len(plan.default_up) > 1:
        sets.add(plan.default_up)
    return {ports: i for i, ports in enumerate(sorted(sets), start=1)}


def _forward(port: int) -> fy.P4TableAction:
    return fy.P4TableAction(FORWARD, port=port)


def _next_hop(ports: tuple[int, ...], groups: Mapping[tuple[int, ...], int]) -> fy.P4TableAction:
    if len(ports) == 1:
        return _forward(ports[0])
    return fy.P4TableAction(FORWARD_TO_GROUP, group=groups[ports], members=len(ports))


def fabric_entities(plan: SwitchPlan, sm_dst_id: int) -> list[Entity]:
    """Routes (one next hop: forward to it; several, an ECMP or adaptive set: forward to their group,
    whose members are route group entries (group, member index) in front of the routes that use them),
    port roles, DDPM deltas and the SM punt entry of one switch, in a safe insertion order."""
    groups = group_ids(plan)
    out = [fy.P4TableEntry(ROUTE_GROUPS, match=fy.P4TableMatch({ROUTE_GROUP: gid, ROUTE_MEMBER: member}),
                           action=_forward(port))
           for ports, gid in groups.items() for member, port in enumerate(ports)]
    for dst, ports in sorted(plan.routes.items()):
        out.append(fy.P4TableEntry(ROUTES, match=fy.P4TableMatch({DST_ID: (dst, DST_ID_BITS)}),
                                   action=_next_hop(ports, groups)))
    if plan.default_up:
        out.append(fy.P4TableEntry(ROUTES, match=fy.P4TableMatch({DST_ID: (0, 0)}),
                                   action=_next_hop(plan.default_up, groups)))
    for port, role in sorted(plan.roles.items()):
        if role.kind == "seed":
            action = fy.P4TableAction(SEED_HOST_MARK, mf_seed=role.value)
        elif role.kind == "mark":
            action = fy.P4TableAction(MARK_DOWN_PORT, mark_mask=role.mask,
                                      mark_value=role.value)
        else:
            action = fy.P4TableAction(KEEP_MARK)
        out.append(_port_entry(PORT_ROLES, port, action))
    for port, delta in sorted(plan.deltas.items()):
        if delta.kind == "add":
            action = fy.P4TableAction(ADD_DISTANCE, addend=delta.entry.addend,
                                      field_mask=delta.entry.mask)
        else:
            action = fy.P4TableAction(FLIP_DISTANCE, dimension_bit=delta.entry.addend)
        out.append(_port_entry(DDPM_DELTAS, port, action, EGRESS_SPEC))
    out.append(fy.P4TableEntry(SM_PUNT, match=fy.P4TableMatch({DST_ID: sm_dst_id}),
                               action=fy.P4TableAction(PUNT_TO_SM)))
    return out


def spread_default(adaptive: bool) -> fy.P4TableEntry:
    """The default action of the spread mode table: per packet for adaptive routing, per flow otherwise."""
    action = SPREAD_PER_PACKET if adaptive else SPREAD_PER_FLOW
    return fy.P4TableEntry(SPREAD_MODE, action=fy.P4TableAction(action), is_default_action=True)


def punt_meters(plan: SwitchPlan, rate: int, burst: int) -> list[fy.P4MeterEntry]:
    """Packets/s each host-facing port may punt to the SM: a trap flood from one port is cut there."""
    config = fy.P4MeterConfig(cir=rate, cburst=burst, pir=rate, pburst=burst)
    return [fy.P4MeterEntry(PUNT_METER, index=port, config=config) for port in plan.host_ports]


def _mode(port: int, mode: str) -> fy.P4TableEntry:
    action = FILTER_VALID_LIST if mode == VALID_LIST else FILTER_INVALID_LIST
    return _port_entry(PARTITION_MODE, port, fy.P4TableAction(action))


def _pkey_entries(table: str, port: int, pkeys: Iterable[int]) -> list[fy.P4TableEntry]:
    action = REJECT_PKEY if table == INVALID_PKEYS else NO_ACTION
    return [fy.P4TableEntry(table, match=fy.P4TableMatch({INGRESS_PORT: port, P_KEY: pkey}),
                            action=fy.P4TableAction(action)) for pkey in sorted(pkeys)]


def policy_entities(policy: str, switch: str, ports: Iterable[int], host_ports: Iterable[int],
                    valid: Mapping[PortId, frozenset[int]]) -> list[fy.P4TableEntry]:
    """The filter policy's standing entries: DT valid-list on every port, IF on host-facing ports;
    none and SIF have none (SIF's come and go with attacks, :func:`sif_entities`)."""
    if policy == Policy.DT:
        chosen = list(ports)
    elif policy == Policy.IF:
        chosen = list(host_ports)
    else:
        return []
    out = []
    for port in sorted(chosen):
        out += _pkey_entries(VALID_PKEYS, port, valid[(switch, port)])
        out.append(_mode(port, VALID_LIST))
    return out


def sif_entities(switch: str, filters: Mapping[PortId, PortFilter]) -> list[fy.P4TableEntry]:
    """What SIF has in place on ``switch`` (re-installed as is after a switch restart)."""
    out = []
    for (name, port), state in sorted(filters.items()):
        if name != switch:
            continue
        if state.mode == INVALID_LIST:
            out += _pkey_entries(INVALID_PKEYS, port, state.invalid)
        else:
            out += _pkey_entries(VALID_PKEYS, port, state.valid)
        out.append(_mode(port, state.mode))
    return out


Update = fy.P4TableEntry | fy.P4CounterEntry
"""An entity marked for insert (+), modify (~) or delete (-): what a switch write takes."""


@dataclass(frozen=True)
class SifWrite:
    """The writes of one SIF action, and what to write instead when the switch refuses them: setting a
    port's mode inserts its mode entry, which is already there when a filter the SM adopted after a
    restart (or one it set before) changes mode, so the fallback modifies it."""

    updates: list[Update]
    if_refused: list[Update] = field(default_factory=list)


def sif_writes(action: Action) -> SifWrite:
    """What one SIF action writes on its port's switch: the P4Runtime side of :mod:`ibsm.sif`'s steps
    (a port turned off loses its mode entry; a deduplicated trap writes nothing)."""
    port = action.port[1]
    match action.kind:
        case ActionKind.INSTALL_INVALID:
            return SifWrite([+e for e in _pkey_entries(INVALID_PKEYS, port, action.pkeys)])
        case ActionKind.REMOVE_INVALID:
            return SifWrite([-e for e in _pkey_entries(INVALID_PKEYS, port, action.pkeys)])
        case ActionKind.INSTALL_VALID:
            return SifWrite([+e for e in _pkey_entries(VALID_PKEYS, port, action.pkeys)])
        case ActionKind.REMOVE_VALID:
            return SifWrite([-e for e in _pkey_entries(VALID_PKEYS, port, action.pkeys)])
        case ActionKind.SET_MODE if action.mode == OFF:
            return SifWrite([-_mode(port, INVALID_LIST)])  # a delete matches the key only
        case ActionKind.SET_MODE:
            return SifWrite([+_mode(port, action.mode)], if_refused=[~_mode(port, action.mode)])
        case ActionKind.RESET_COUNTER:
            zero = fy.P4CounterData(packet_count=0, byte_count=0)
            return SifWrite([~fy.P4CounterEntry(PKEY_VIOLATIONS, index=port, data=zero)])
        case ActionKind.DEDUPLICATED:
            return SifWrite([])
