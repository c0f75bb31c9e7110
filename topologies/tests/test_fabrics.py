"""The fabric builders: shapes, explicit port numbers, and a topology file the SM accepts and can route."""

from __future__ import annotations

import itertools

import pytest
from ibsm.fabric import dst_id, plan_fabric
from ibsm.topology import parse_topology

from topologies import fabrics, topofile


def document(fabric: fabrics.Fabric, routing: str = "deterministic") -> dict[str, object]:
    addresses = {sw.name: f"127.0.0.1:{50000 + i}" for i, sw in enumerate(fabric.switches())}
    parts = topofile.partitions_round_robin(fabric.hosts(), 2, "sth-aead")
    return topofile.topology_document(fabric, addresses, parts, routing)


@pytest.mark.parametrize("kind", fabrics.FABRICS)
def test_every_fabric_is_a_topology_the_sm_routes(kind: str) -> None:
    fabric = fabrics.build(kind)
    topo = parse_topology(document(fabric, "adaptive" if kind != "fat-tree" else "deterministic"))
    plan = plan_fabric(topo)
    assert len(topo.hosts) == len(fabric.hosts())
    every_host = {dst_id(h.gid) for h in topo.hosts}
    for sw in topo.switches:  # every switch has a route to every host (a fat tree's leaves go up by default)
        routes = set(plan.switches[sw.name].routes)
        assert routes == every_host or (plan.switches[sw.name].default_up and routes < every_host), sw.name


@pytest.mark.parametrize(("k", "levels"), [(2, 3), (4, 2), (2, 1), (3, 3)])
def test_fat_tree_is_a_k_ary_n_tree(k: int, levels: int) -> None:
    fabric = fabrics.fat_tree(k, levels)
    switches = fabric.switches()
    assert len(switches) == levels * k ** (levels - 1)
    assert len(fabric.hosts()) == k**levels
    for sw in switches:
        wanted = range(1, k + 1) if sw.level == levels - 1 else range(1, 2 * k + 1)
        assert sw.ports == tuple(wanted), sw
    for link in fabric.links():  # down-ports 1..k below, up-ports k+1..2k above
        (lo, lo_port), (hi, hi_port) = sorted((link.a, link.b),
                                              key=lambda end: fabric.graph.nodes[end[0]]["level"])
        assert fabric.graph.nodes[hi]["level"] == fabric.graph.nodes[lo]["level"] + 1
        assert lo_port > k >= hi_port


def test_fat_tree_hosts_per_leaf() -> None:
    fabric = fabrics.fat_tree(4, 2, hosts_per_leaf=1)
    assert [(h.switch, h.port) for h in fabric.hosts()] == [(f"s0_{i}", 1) for i in range(4)]


@pytest.mark.parametrize(("kind", "dims"), [("mesh", (4, 4)), ("torus", (4, 4)), ("mesh", (3, 2, 2)),
                                            ("torus", (3, 2))])
def test_grid_ports_name_their_direction(kind: str, dims: tuple[int, ...]) -> None:
    fabric = fabrics.grid(kind, dims, hosts_per_switch=2)
    for link in fabric.links():
        (a, pa), (b, pb) = link.a, link.b
        ca, cb = fabric.graph.nodes[a]["coord"], fabric.graph.nodes[b]["coord"]
        (dim,) = [d for d in range(len(dims)) if ca[d] != cb[d]]
        step = (cb[dim] - ca[dim]) % dims[dim]
        plus, minus = 2 + 2 * dim + 2, 2 + 2 * dim + 1
        assert (pa, pb) == ((plus, minus) if step == 1 else (minus, plus)), link
    wraps = [link for link in fabric.links()
             if any(abs(x - y) > 1 for x, y in zip(fabric.graph.nodes[link.a[0]]["coord"],
                                                    fabric.graph.nodes[link.b[0]]["coord"], strict=True))]
    assert bool(wraps) == (kind == "torus")


def test_hypercube_dimension_ports() -> None:
    fabric = fabrics.hypercube(3)
    assert len(fabric.switches()) == 8 and len(fabric.links()) == 12
    for link in fabric.links():
        ca, cb = fabric.graph.nodes[link.a[0]]["coord"], fabric.graph.nodes[link.b[0]]["coord"]
        (dim,) = [d for d in range(3) if ca[d] != cb[d]]
        assert link.a[1] == link.b[1] == dim + 2


def test_paper16_has_sixteen_nodes_on_five_port_switches() -> None:
    fabric = fabrics.paper16()
    assert len(fabric.hosts()) == 16
    assert {sw.ports for sw in fabric.switches()} == {(1, 2, 3, 4, 5)}


def test_partitions_round_robin_span_the_fabric() -> None:
    hosts = fabrics.fat_tree(2, 3).hosts()
    parts = topofile.partitions_round_robin(hosts, 2, "icrc-mac")
    assert [p.members for p in parts] == [("h0", "h2", "h4", "h6"), ("h1", "h3", "h5", "h7")]
    assert [p.full_pkey for p in parts] == [0x8001, 0x8002]
    members = list(itertools.chain.from_iterable(p.members for p in parts))
    assert sorted(members) == sorted(h.name for h in hosts)
    with pytest.raises(ValueError):
        topofile.partitions_round_robin(hosts, 2, "rot13")
