"""The P4Runtime entities of one switch, as pure functions of the plans (finsy entity objects).

Every table, action, counter and meter is named here by its P4Info name once; finsy turns
names into ids with the P4Info the SM loaded, so the same code drives the software target and BMv2.
Nothing here talks to a switch: the core writes what these functions return, and tests read it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import finsy as fy

from .fabric import SwitchPlan
from .sif import INVALID_LIST, VALID_LIST, PortFilter, PortId

PORT_ROLES = "IbsecIngress.port_roles.port_roles_table"
PARTITION_MODE = "IbsecIngress.partition.partition_mode_table"
INVALID_PKEYS = "IbsecIngress.partition.invalid_pkeys"
VALID_PKEYS = "IbsecIngress.partition.valid_pkeys"
SM_PUNT = "IbsecIngress.sm_punt.sm_punt_table"
SPREAD_MODE = "IbsecIngress.routing.spread_mode_table"
ROUTES = "IbsecIngress.routing.routes_table"
ROUTE_GROUPS = "IbsecIngress.routing.route_groups_table"
DDPM_DELTAS = "IbsecIngress.marking.ddpm_delta_table"
PKEY_VIOLATIONS = "IbsecIngress.partition.pkey_violations"
PARTITION_LOOKUPS = "IbsecIngress.partition.partition_lookups"
DROPS = "IbsecIngress.drops"
PUNT_METER = "IbsecIngress.sm_punt.sm_punt_meter"

FILTER_VALID_LIST = "IbsecIngress.partition.filter_valid_list"
FILTER_INVALID_LIST = "IbsecIngress.partition.filter_invalid_list"

INGRESS_PORT = "standard_metadata.ingress_port"
EGRESS_SPEC = "standard_metadata.egress_spec"
DST_ID = "meta.dst_id"
ROUTE_GROUP = "meta.route_group"
ROUTE_MEMBER = "meta.route_member"
P_KEY = "hdr.bth.p_key"
DST_ID_BITS = 80

OWNED_TABLES = (PORT_ROLES, PARTITION_MODE, INVALID_PKEYS, VALID_PKEYS, SM_PUNT, ROUTES, ROUTE_GROUPS,
                DDPM_DELTAS)
"""Tables whose whole content the SM decides: anything else found in them is removed on reconcile."""

POLICIES = ("none", "dt", "if", "sif")

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
    return fy.P4TableAction("IbsecIngress.routing.forward", port=port)


def _next_hop(ports: tuple[int, ...], groups: Mapping[tuple[int, ...], int]) -> fy.P4TableAction:
    if len(ports) == 1:
        return _forward(ports[0])
    return fy.P4TableAction("IbsecIngress.routing.forward_to_group", group=groups[ports], members=len(ports))


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
            action = fy.P4TableAction("IbsecIngress.port_roles.seed_host_mark", mf_seed=role.value)
        elif role.kind == "mark":
            action = fy.P4TableAction("IbsecIngress.port_roles.mark_down_port", mark_mask=role.mask,
                                      mark_value=role.value)
        else:
            action = fy.P4TableAction("IbsecIngress.port_roles.keep_mark")
        out.append(_port_entry(PORT_ROLES, port, action))
    for port, delta in sorted(plan.deltas.items()):
        if delta.kind == "add":
            action = fy.P4TableAction("IbsecIngress.marking.add_distance", addend=delta.entry.addend,
                                      field_mask=delta.entry.mask)
        else:
            action = fy.P4TableAction("IbsecIngress.marking.flip_distance", dimension_bit=delta.entry.addend)
        out.append(_port_entry(DDPM_DELTAS, port, action, EGRESS_SPEC))
    out.append(fy.P4TableEntry(SM_PUNT, match=fy.P4TableMatch({DST_ID: sm_dst_id}),
                               action=fy.P4TableAction("IbsecIngress.sm_punt.punt_to_sm")))
    return out


def spread_default(adaptive: bool) -> fy.P4TableEntry:
    """The default action of the spread mode table: per packet for adaptive routing, per flow otherwise."""
    action = "IbsecIngress.routing.spread_per_packet" if adaptive else "IbsecIngress.routing.spread_per_flow"
    return fy.P4TableEntry(SPREAD_MODE, action=fy.P4TableAction(action), is_default_action=True)


def punt_meters(plan: SwitchPlan, rate: int, burst: int) -> list[fy.P4MeterEntry]:
    """Packets/s each host-facing port may punt to the SM: a trap flood from one port is cut there."""
    config = fy.P4MeterConfig(cir=rate, cburst=burst, pir=rate, pburst=burst)
    return [fy.P4MeterEntry(PUNT_METER, index=port, config=config) for port in plan.host_ports]


def _mode(port: int, mode: str) -> fy.P4TableEntry:
    action = FILTER_VALID_LIST if mode == VALID_LIST else FILTER_INVALID_LIST
    return _port_entry(PARTITION_MODE, port, fy.P4TableAction(action))


def _pkey_entries(table: str, port: int, pkeys: Iterable[int]) -> list[fy.P4TableEntry]:
    action = "IbsecIngress.partition.reject_pkey" if table == INVALID_PKEYS else "NoAction"
    return [fy.P4TableEntry(table, match=fy.P4TableMatch({INGRESS_PORT: port, P_KEY: pkey}),
                            action=fy.P4TableAction(action)) for pkey in sorted(pkeys)]


def policy_entities(policy: str, switch: str, ports: Iterable[int], host_ports: Iterable[int],
                    valid: Mapping[PortId, frozenset[int]]) -> list[fy.P4TableEntry]:
    """The filter policy's standing entries: DT valid-list on every port, IF on host-facing ports;
    none and SIF have none (SIF's come and go with attacks, :func:`sif_entities`)."""
    if policy == "dt":
        chosen = list(ports)
    elif policy == "if":
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


def sif_action_entities(kind: str, port: int, pkeys: Iterable[int], mode: str
                        ) -> list[fy.P4TableEntry]:
    """The entries one SIF action touches (the core inserts, modifies or deletes them)."""
    if kind in ("install-invalid", "remove-invalid"):
        return _pkey_entries(INVALID_PKEYS, port, pkeys)
    if kind in ("install-valid", "remove-valid"):
        return _pkey_entries(VALID_PKEYS, port, pkeys)
    if kind == "set-mode":
        return [_mode(port, mode if mode != "off" else INVALID_LIST)]
    return []
