"""Routing and marking set-up (DESIGN 2.1, 2.2, 6 step 3): pure functions of the topology.

:func:`plan_fabric` computes, for every switch, the routes (one or several equal next-hop ports per
destination host), the role of every port (host-facing seed, fat-tree down-port digit, plain fabric
port) and the DDPM delta of every fabric egress port. The marking arithmetic is ``ibsec.marking``'s; this
module only decides which digit, level, coordinate or host index each port gets, and refuses a topology
whose marks do not fit the 38-bit MF (:class:`ibsec.marking.TopologyTooLarge`, with the largest that fits).
:func:`trace` is the inverse: the true ingress (switch, port, host) of a marked packet.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from ibsec import addressing
from ibsec.marking import DdpmLayout, FatTreeLayout, Kind, PortEntry, TopologyTooLarge

from .topology import Host, Topology

SCHEME_PORT_MARKING = "port-marking"
SCHEME_DDPM = "ddpm"


class FabricError(ValueError):
    """The topology cannot be routed or marked as described (the message says where)."""


@dataclass(frozen=True)
class PortRole:
    """What a port does to the MF on ingress: ``seed`` (host-facing), ``mark`` (fat-tree down-port) or
    ``keep`` (any other fabric port)."""

    kind: str
    value: int = 0  # seed: the MF written; mark: the slot and level value
    mask: int = 0  # mark: the bits replaced


@dataclass(frozen=True)
class Delta:
    """DDPM on egress: ``add`` a signed step to a field, or ``flip`` a hypercube bit."""

    kind: str
    entry: PortEntry


@dataclass
class SwitchPlan:
    """Everything routing and marking writes into one switch."""

    name: str
    routes: dict[int, tuple[int, ...]] = field(default_factory=dict)  # dst_id (subnet|GUID) -> ports
    default_up: tuple[int, ...] = ()  # fat tree: ECMP over the up-ports for everything not below
    roles: dict[int, PortRole] = field(default_factory=dict)
    deltas: dict[int, Delta] = field(default_factory=dict)
    host_ports: tuple[int, ...] = ()


@dataclass
class FabricPlan:
    """The plan of every switch plus what traceback needs to decode an MF."""

    scheme: str
    switches: dict[str, SwitchPlan]
    adaptive: bool
    fat_tree: FatTreeLayout | None = None
    ddpm: DdpmLayout | None = None
    addresses: dict[str, tuple[int, ...]] = field(default_factory=dict)  # fat tree: host -> digits
    host_index: dict[str, int] = field(default_factory=dict)  # DDPM: host -> index on its switch


def dst_id(gid: str) -> int:
    """What routing matches: the 80 bits of subnet id and GUID (``dst_addr[79:0]``)."""
    parsed = addressing.parse_gid(gid)
    return (parsed.subnet << addressing.GUID_BITS) | parsed.guid


def plan_fabric(topo: Topology) -> FabricPlan:
    """The routing and marking plan of ``topo``; raises FabricError or TopologyTooLarge."""
    if topo.kind == "fat-tree":
        return _plan_fat_tree(topo)
    return _plan_ddpm(topo)


# ---------------------------------------------------------------------------------------------------------
# fat trees: up/down routing with ECMP, port marking digits
# ---------------------------------------------------------------------------------------------------------


def _plan_fat_tree(topo: Topology) -> FabricPlan:
    level = {sw.name: sw.level or 0 for sw in topo.switches}
    up: dict[str, list[tuple[int, str]]] = defaultdict(list)
    down: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for sw in topo.switches:
        for port, peer, _ in topo.neighbours(sw.name):
            if level[peer] == level[sw.name] + 1:
                up[sw.name].append((port, peer))
            elif level[peer] == level[sw.name] - 1:
                down[sw.name].append((port, peer))
            else:
                raise FabricError(f"fat tree: link {sw.name}:{port} - {peer} joins levels "
                                  f"{level[sw.name]} and {level[peer]} (only adjacent levels may be linked)")
    below = _hosts_below(topo, level, down)
    top = max(level.values())
    everyone = frozenset(h.name for h in topo.hosts)
    for sw in topo.switches:
        if level[sw.name] == top and below[sw.name] != everyone:
            raise FabricError(f"fat tree: top switch {sw.name} does not reach every host (missing "
                              f"{', '.join(sorted(everyone - below[sw.name]))})")
        if level[sw.name] > 0 and topo.hosts_on(sw.name):
            raise FabricError(f"fat tree: hosts hang off {sw.name}, which is not a leaf (level 0)")
    digits, fanout = _number_subtrees(topo, level, below)
    layout = FatTreeLayout(max(2, fanout), top + 1)
    addresses = {h.name: _address(h, level, digits, below, topo) for h in topo.hosts}
    plans = {}
    for sw in topo.switches:
        plan = SwitchPlan(sw.name, default_up=tuple(sorted(p for p, _ in up[sw.name])))
        for host in topo.hosts_on(sw.name):
            plan.roles[host.port] = PortRole("seed", layout.mark(0, 0, digits[host.name]))
            plan.routes[dst_id(host.gid)] = (host.port,)
        for port, child in down[sw.name]:
            entry = layout.down_port_entry(level[sw.name], digits[child])
            plan.roles[port] = PortRole("mark", entry.addend, entry.mask)
        for port, _ in up[sw.name]:
            plan.roles[port] = PortRole("keep")
        by_host: dict[str, list[int]] = defaultdict(list)
        for port, child in down[sw.name]:
            for name in below[child]:
                by_host[name].append(port)
        for host in topo.hosts:
            if host.name in by_host:
                plan.routes[dst_id(host.gid)] = tuple(sorted(by_host[host.name]))
        plan.host_ports = tuple(h.port for h in topo.hosts_on(sw.name))
        plans[sw.name] = plan
    return FabricPlan(SCHEME_PORT_MARKING, plans, adaptive=False, fat_tree=layout, addresses=addresses)


def _hosts_below(topo: Topology, level: dict[str, int], down: dict[str, list[tuple[int, str]]]
                 ) -> dict[str, frozenset[str]]:
    below: dict[str, frozenset[str]] = {}
    for sw in sorted(topo.switches, key=lambda s: level[s.name]):
        names = {h.name for h in topo.hosts_on(sw.name)}
        for _, child in down[sw.name]:
            names |= below[child]
        below[sw.name] = frozenset(names)
    return below


def _number_subtrees(topo: Topology, level: dict[str, int], below: dict[str, frozenset[str]]
                     ) -> tuple[dict[str, int], int]:
    """Digits of hosts (on their leaf) and of switches (the subtree they head, within their parent's).

    Switches with the same hosts below them head the same subtree, so every parent of that subtree
    sees it on the same digit whichever path ECMP picked (seed 000 Fig. 5b).
    """
    digits: dict[str, int] = {}
    fanout = 1
    for sw in topo.switches:
        hosts = topo.hosts_on(sw.name)
        for i, host in enumerate(hosts):
            digits[host.name] = i
        fanout = max(fanout, len(hosts))
    top = max(level.values())
    order = {h.name: i for i, h in enumerate(topo.hosts)}
    for lvl in range(1, top + 1):
        parents = {below[s.name] for s in topo.switches if level[s.name] == lvl}
        children = {below[s.name] for s in topo.switches if level[s.name] == lvl - 1}
        block_digit: dict[frozenset[str], int] = {}
        for parent in parents:
            mine = sorted((c for c in children if c <= parent), key=lambda c: min(order[h] for h in c))
            fanout = max(fanout, len(mine))
            for i, child in enumerate(mine):
                if block_digit.setdefault(child, i) != i:
                    raise FabricError(f"fat tree: the subtree of {sorted(child)} has two parents at level "
                                      f"{lvl} that number it differently")
        for s in topo.switches:
            if level[s.name] == lvl - 1:
                digits[s.name] = block_digit[below[s.name]]
    return digits, fanout


def _address(host: Host, level: dict[str, int], digits: dict[str, int],
             below: dict[str, frozenset[str]], topo: Topology) -> tuple[int, ...]:
    """The host's digit string, top level first."""
    top = max(level.values())
    path = [digits[host.name]]
    for lvl in range(1, top + 1):
        child = next(s.name for s in topo.switches if level[s.name] == lvl - 1 and host.name in below[s.name])
        path.append(digits[child])
    return tuple(reversed(path))


# ---------------------------------------------------------------------------------------------------------
# mesh, torus, hypercube: dimension-order / e-cube or adaptive minimal routing, DDPM deltas
# ---------------------------------------------------------------------------------------------------------


def _plan_ddpm(topo: Topology) -> FabricPlan:
    kind = Kind(topo.kind)
    layout = DdpmLayout(kind, topo.dimensions, topo.host_bits)
    coord = {sw.name: sw.coord or () for sw in topo.switches}
    if len(coord) != _count(topo.dimensions):
        raise FabricError(f"{topo.kind} {list(topo.dimensions)} needs {_count(topo.dimensions)} switches, "
                          f"the topology has {len(coord)}")
    steps: dict[str, dict[tuple[int, int], list[int]]] = {}
    plans: dict[str, SwitchPlan] = {}
    host_index: dict[str, int] = {}
    for sw in topo.switches:
        plan = SwitchPlan(sw.name)
        steps[sw.name] = defaultdict(list)
        for port, peer, _ in topo.neighbours(sw.name):
            try:
                delta = layout.delta(coord[sw.name], coord[peer])
            except ValueError:
                raise FabricError(f"{topo.kind}: link {sw.name}:{port} joins {coord[sw.name]} and "
                                  f"{coord[peer]}, which are not neighbours") from None
            dim = next(d for d, v in enumerate(delta) if v)
            step = delta[dim] if kind is not Kind.HYPERCUBE else 1
            steps[sw.name][(dim, step)].append(port)
            plan.roles[port] = PortRole("keep")
            plan.deltas[port] = Delta("flip" if kind is Kind.HYPERCUBE else "add",
                                      layout.port_entry(dim, delta[dim]))
        hosts = topo.hosts_on(sw.name)
        if len(hosts) > 1 << topo.host_bits:
            raise TopologyTooLarge(f"{sw.name} has {len(hosts)} hosts and the MF's host port field has "
                                   f"{topo.host_bits} bits (at most {1 << topo.host_bits} hosts per switch)")
        for i, host in enumerate(hosts):
            host_index[host.name] = i
            plan.roles[host.port] = PortRole("seed", layout.init(i))
        plan.host_ports = tuple(h.port for h in hosts)
        plans[sw.name] = plan
    adaptive = topo.routing == "adaptive"
    for sw in topo.switches:
        plan = plans[sw.name]
        for host in topo.hosts:
            if host.switch == sw.name:
                plan.routes[dst_id(host.gid)] = (host.port,)
                continue
            wanted = _minimal_steps(kind, layout.sizes, coord[sw.name], coord[host.switch], adaptive)
            ports = sorted(p for s in wanted for p in steps[sw.name].get(s, []))
            if not ports:
                raise FabricError(f"{topo.kind}: {sw.name} at {coord[sw.name]} has no link toward "
                                  f"{coord[host.switch]} (wanted steps {wanted})")
            plan.routes[dst_id(host.gid)] = tuple(ports)
    return FabricPlan(SCHEME_DDPM, plans, adaptive=adaptive, ddpm=layout, host_index=host_index)


def _count(dims: tuple[int, ...]) -> int:
    total = 1
    for k in dims:
        total *= k
    return total


def _minimal_steps(kind: Kind, sizes: tuple[int, ...], here: tuple[int, ...], there: tuple[int, ...],
                   adaptive: bool) -> list[tuple[int, int]]:
    """(dimension, step) moves that bring ``here`` closer to ``there``: the lowest differing dimension
    only (dimension order, e-cube), or every one of them (adaptive minimal)."""
    moves: list[tuple[int, int]] = []
    for dim, (x, y, k) in enumerate(zip(here, there, sizes, strict=True)):
        if x == y:
            continue
        if kind is Kind.HYPERCUBE:
            moves.append((dim, 1))
        elif kind is Kind.MESH or k == 2:  # a 2-ring has one link per dimension, no wrap
            moves.append((dim, 1 if y > x else -1))
        else:
            forward = (y - x) % k
            if forward * 2 < k:
                moves.append((dim, 1))
            elif forward * 2 > k:
                moves.append((dim, -1))
            else:  # both ways are minimal: deterministic takes +1, adaptive both
                moves.extend([(dim, 1), (dim, -1)] if adaptive else [(dim, 1)])
        if not adaptive:
            break
    return moves


# ---------------------------------------------------------------------------------------------------------
# traceback: MF -> true ingress
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trace:
    """Where a marked packet entered the fabric (true source), as decoded from one packet's MF."""

    switch: str
    port: int
    host: str | None
    scheme: str
    packets_needed: int = 1


def trace(topo: Topology, plan: FabricPlan, receiver: Host, mf: int) -> Trace:
    """The true ingress of a packet that ``receiver`` got with marking field ``mf``.

    Raises FabricError when the MF names no port of this fabric (a forged or corrupted mark).
    """
    try:
        if plan.fat_tree is not None:
            source = plan.fat_tree.decode(mf, plan.addresses[receiver.name])
            name = next((h for h, a in plan.addresses.items() if a == source), None)
            if name is None:
                raise FabricError(f"MF {mf:#x} decodes to address {source}, which no host has")
            host = next(h for h in topo.hosts if h.name == name)
            return Trace(host.switch, host.port, host.name, plan.scheme)
        assert plan.ddpm is not None
        dest = topo.switch(receiver.switch).coord or ()
        coord, index = plan.ddpm.decode(dest, mf)
    except ValueError as err:
        if isinstance(err, FabricError):
            raise
        raise FabricError(f"MF {mf:#x} at {receiver.name}: {err}") from None
    switch = next((s for s in topo.switches if s.coord == coord), None)
    if switch is None:
        raise FabricError(f"MF {mf:#x} decodes to coordinate {coord}, which no switch has")
    hosts = topo.hosts_on(switch.name)
    if index >= len(hosts):
        raise FabricError(f"MF {mf:#x} names host index {index} on {switch.name}, which has {len(hosts)}")
    return Trace(switch.name, hosts[index].port, hosts[index].name, plan.scheme)
