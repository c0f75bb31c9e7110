"""The fabrics the project ships, as networkx graphs with explicit port numbers.

Every builder returns a :class:`Fabric`: a graph whose switch nodes carry their place (fat-tree level or
grid coordinate) and whose edges carry the port number at each end, so the topology is data from the
start (like p4lang/tutorials' topology.json) and the Mininet network, the SM's topology file and the
traceback picture are all drawn from the same object.

Port numbers are fixed by role, not by the order links happen to be added, so a port name says where it
leads: hosts first (1..h), then fabric ports in a fixed order per direction. Host ``i`` (counting from 0
over the whole fabric) gets the MAC, GUID, LID and GID of ``ibsec.addressing``'s conventions.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import networkx as nx

KINDS = ("fat-tree", "mesh", "torus", "hypercube")


@dataclass(frozen=True)
class SwitchInfo:
    name: str
    ports: tuple[int, ...]
    level: int | None = None
    coord: tuple[int, ...] | None = None


@dataclass(frozen=True)
class HostInfo:
    name: str
    index: int
    switch: str
    port: int


@dataclass(frozen=True)
class LinkInfo:
    a: tuple[str, int]
    b: tuple[str, int]


@dataclass
class Fabric:
    """A fabric: ``graph`` has switch and host nodes (attribute ``role``); every edge has ``ports``, a dict
    from each switch end to its port number (hosts have one interface and no port number)."""

    name: str
    kind: str
    graph: nx.Graph
    dimensions: tuple[int, ...] = ()
    notes: list[str] = field(default_factory=list)

    def switches(self) -> list[SwitchInfo]:
        out = []
        for name, data in self.graph.nodes(data=True):
            if data["role"] != "switch":
                continue
            ports = sorted(self.graph.edges[name, peer]["ports"][name] for peer in self.graph[name])
            out.append(SwitchInfo(name, tuple(ports), data.get("level"), data.get("coord")))
        return out

    def hosts(self) -> list[HostInfo]:
        out = []
        for name, data in self.graph.nodes(data=True):
            if data["role"] == "host":
                (switch,) = self.graph[name]
                port = self.graph.edges[name, switch]["ports"][switch]
                out.append(HostInfo(name, data["index"], switch, port))
        return sorted(out, key=lambda h: h.index)

    def links(self) -> list[LinkInfo]:
        """Switch-to-switch links, each once, ends in a stable order."""
        out = []
        for a, b, data in self.graph.edges(data=True):
            if self.graph.nodes[a]["role"] == "switch" and self.graph.nodes[b]["role"] == "switch":
                a, b = sorted((a, b), key=self._switch_order)
                out.append(LinkInfo((a, data["ports"][a]), (b, data["ports"][b])))
        return sorted(out, key=lambda link: (self._switch_order(link.a[0]), link.a[1]))

    def _switch_order(self, name: str) -> int:
        return int(self.graph.nodes[name]["order"])


class _Builder:
    """Adds switches, hosts and port-numbered links to a graph in a stable order."""

    def __init__(self) -> None:
        self.graph = nx.Graph()
        self.hosts = 0

    def switch(self, name: str, **place: object) -> None:
        self.graph.add_node(name, role="switch", order=self.graph.number_of_nodes(), **place)

    def link(self, a: str, port_a: int, b: str, port_b: int) -> None:
        self.graph.add_edge(a, b, ports={a: port_a, b: port_b})

    def hosts_on(self, switch: str, count: int) -> None:
        for port in range(1, count + 1):
            name = f"h{self.hosts}"
            self.graph.add_node(name, role="host", index=self.hosts, order=self.graph.number_of_nodes())
            self.graph.add_edge(name, switch, ports={switch: port})
            self.hosts += 1


def fat_tree(k: int = 2, levels: int = 3, hosts_per_leaf: int | None = None) -> Fabric:
    """A k-ary n-tree (Petrini & Vanneschi), the fat tree of InfiniBand clusters and of seed 000 Fig. 5b.

    ``levels`` levels of k^(levels-1) switches; switch (w, l), w a string of levels-1 base-k digits, links
    to (w', l+1) when w and w' differ at most in digit l. Ports 1..k face down (hosts on leaves), ports
    k+1..2k face up, so every switch has 2k ports (the top level k). Leaves carry ``hosts_per_leaf``
    hosts (default k: k^levels hosts). The default, k=2 with three levels, is Fig. 5's three-level tree
    with 8 hosts and 12 four-port switches.
    """
    if k < 2 or levels < 1:
        raise ValueError("a fat tree needs k >= 2 and at least one level")
    per_leaf = k if hosts_per_leaf is None else hosts_per_leaf
    if not 1 <= per_leaf <= k:
        raise ValueError(f"hosts per leaf must be 1..{k}")
    build = _Builder()
    words = list(itertools.product(range(k), repeat=levels - 1))

    def name(level: int, word: Sequence[int]) -> str:
        return f"s{level}_{''.join(map(str, word))}" if word else f"s{level}"

    for level in range(levels):
        for word in words:
            build.switch(name(level, word), level=level)
    for word in words:
        build.hosts_on(name(0, word), per_leaf)
    for level in range(levels - 1):
        for word in words:
            for up in range(k):
                parent = list(word)
                parent[level] = up
                build.link(name(level, word), k + 1 + up, name(level + 1, parent), word[level] + 1)
    return Fabric(f"fattree-k{k}-l{levels}", "fat-tree", build.graph)


def grid(kind: str, dimensions: Sequence[int], hosts_per_switch: int = 1) -> Fabric:
    """A mesh or torus of ``dimensions`` switches (2-D, 3-D, ...), ``hosts_per_switch`` on each.

    Fabric ports after the host ports: dimension d's minus neighbour on h+2d+1, plus neighbour on h+2d+2,
    on every switch (edge switches of a mesh just lack one). A torus ring of two is a single link.
    """
    if kind not in ("mesh", "torus"):
        raise ValueError(f"grid kind must be mesh or torus, not {kind!r}")
    dims = tuple(dimensions)
    if not dims or any(k < 2 for k in dims):
        raise ValueError("every dimension needs at least 2 switches")
    build = _Builder()
    coords = list(itertools.product(*(range(k) for k in dims)))

    def name(c: Sequence[int]) -> str:
        return "s" + "_".join(map(str, c))

    for c in coords:
        build.switch(name(c), coord=tuple(c))
    for c in coords:
        build.hosts_on(name(c), hosts_per_switch)
    h = hosts_per_switch
    for c in coords:
        for d, k in enumerate(dims):
            if c[d] + 1 < k or (kind == "torus" and k > 2):
                peer = list(c)
                peer[d] = (c[d] + 1) % k
                build.link(name(c), h + 2 * d + 2, name(peer), h + 2 * d + 1)
    label = "x".join(map(str, dims))
    return Fabric(f"{kind}-{label}", kind, build.graph, dims)


def hypercube(n: int = 3, hosts_per_switch: int = 1) -> Fabric:
    """The n-cube: switch coordinates are n bits, dimension d's link on port h+d+1 (seed 000 Fig. 6b)."""
    if n < 1:
        raise ValueError("a hypercube needs at least one dimension")
    build = _Builder()
    coords = list(itertools.product(range(2), repeat=n))

    def name(c: Sequence[int]) -> str:
        return "s" + "".join(map(str, c))

    for c in coords:
        build.switch(name(c), coord=tuple(c))
    for c in coords:
        build.hosts_on(name(c), hosts_per_switch)
    for c in coords:
        for d in range(n):
            if c[d] == 0:
                peer = list(c)
                peer[d] = 1
                build.link(name(c), hosts_per_switch + d + 1, name(peer), hosts_per_switch + d + 1)
    return Fabric(f"hypercube-{n}", "hypercube", build.graph, (2,) * n)


def paper16() -> Fabric:
    """Seed 000's evaluation network: 16 nodes on five-port switches.

    The paper does not draw it; a 4x4 torus with one host per switch is the regular 16-node network in
    which every switch has exactly five ports (four neighbours and its host), so that is what we build.
    """
    fabric = grid("torus", (4, 4))
    fabric.name = "paper16"
    fabric.notes.append("seed 000's 16-node network of five-port switches, built as a 4x4 torus")
    return fabric


FABRICS = ("fat-tree", "mesh", "torus", "hypercube", "mesh3d", "paper16")


def build(kind: str, *, k: int = 2, levels: int = 3, hosts_per_leaf: int | None = None,
          dims: Sequence[int] | None = None, cube: int = 3, hosts_per_switch: int = 1) -> Fabric:
    """The named fabric with its defaults (fat tree k=2 with three levels, mesh and torus 4x4, mesh3d
    3x2x2, hypercube 3-cube, paper16)."""
    if kind == "fat-tree":
        return fat_tree(k, levels, hosts_per_leaf)
    if kind in ("mesh", "torus"):
        return grid(kind, dims or (4, 4), hosts_per_switch)
    if kind == "mesh3d":
        return grid("mesh", dims or (3, 2, 2), hosts_per_switch)
    if kind == "hypercube":
        return hypercube(cube, hosts_per_switch)
    if kind == "paper16":
        return paper16()
    raise ValueError(f"unknown fabric {kind!r}; one of {', '.join(FABRICS)}")


def shortest_switch_path(fabric: Fabric, src_host: str, dst_host: str) -> Iterator[str]:
    """The switches on one shortest path between two hosts (for pictures, not for routing)."""
    for node in nx.shortest_path(fabric.graph, src_host, dst_host):
        if fabric.graph.nodes[node]["role"] == "switch":
            yield node
