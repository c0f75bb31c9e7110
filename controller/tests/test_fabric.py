"""Routing and marking plans: every host pair reachable, up/down without a down-then-up turn, dimension
order minimal, and every packet's marks traced back to its true ingress whatever path it took."""

from __future__ import annotations

import random
from typing import Any

import pytest
from ibsec.marking import DdpmLayout, FatTreeLayout, TopologyTooLarge
from ibsm.fabric import FabricError, FabricPlan, dst_id, plan_fabric, trace
from ibsm.topology import Host, Topology, parse_topology

from . import builders


def _walk(topo: Topology, plan: FabricPlan, src: Host, dst: Host, rng: random.Random
          ) -> tuple[list[str], int]:
    """Send one packet from ``src`` to ``dst`` through the plans, picking among equal next hops at random
    and marking as the P4 program does; returns the switches visited and the MF at arrival."""
    switch, in_port, path = src.switch, src.port, [src.switch]
    mf = 0xFFFF_FFFF  # whatever the host wrote: the first switch must overwrite it
    target = dst_id(dst.gid)
    for _ in range(64):
        sp = plan.switches[switch]
        role = sp.roles[in_port]
        if role.kind == "seed":
            mf = role.value
        elif role.kind == "mark":
            mf = (mf & ~role.mask) | role.value
        ports = sp.routes.get(target) or sp.default_up
        assert ports, f"{switch} has no route to {dst.name}"
        out = rng.choice(ports)
        if out in sp.deltas:
            delta = sp.deltas[out]
            assert plan.ddpm is not None
            mf = plan.ddpm.apply(mf, delta.entry)
        if out == dst.port and switch == dst.switch:
            return path, mf
        peer = next((p, s, q) for p, s, q in topo.neighbours(switch) if p == out)
        switch, in_port = peer[1], peer[2]
        path.append(switch)
    raise AssertionError(f"{src.name} -> {dst.name} loops: {path}")


def _check_all_pairs(topo: Topology, plan: FabricPlan, rounds: int = 3) -> list[tuple[Host, Host, list[str]]]:
    rng = random.Random(7)
    walks = []
    for src in topo.hosts:
        for dst in topo.hosts:
            if src is dst:
                continue
            for _ in range(rounds):
                path, mf = _walk(topo, plan, src, dst, rng)
                found = trace(topo, plan, dst, mf)
                assert (found.switch, found.port, found.host) == (src.switch, src.port, src.name)
                walks.append((src, dst, path))
    return walks


@pytest.mark.parametrize("k", [2, 4])
def test_fat_tree_up_down(k: int) -> None:
    topo = parse_topology(builders.fat_tree(k))
    plan = plan_fabric(topo)
    assert isinstance(plan.fat_tree, FatTreeLayout) and plan.fat_tree.levels == 3
    level = {s.name: s.level for s in topo.switches}
    for _, _, path in _check_all_pairs(topo, plan):
        levels = [level[s] for s in path]
        turn = levels.index(max(levels))
        assert levels[:turn + 1] == sorted(levels[:turn + 1]), f"goes down before up: {path}"
        assert levels[turn:] == sorted(levels[turn:], reverse=True), f"down-then-up turn: {path}"
        assert len(path) <= 5


def test_fat_tree_ecmp_and_digits(fat_tree: Topology) -> None:
    plan = plan_fabric(fat_tree)
    assert plan.switches["s1"].default_up == (3, 4)  # ECMP over both spines
    assert plan.switches["s3"].default_up == ()
    assert plan.addresses == {"h1": (0, 0), "h2": (0, 1), "h3": (1, 0), "h4": (1, 1)}
    # both spines see leaf s2 on the same digit: the mark does not depend on the ECMP choice
    assert plan.switches["s3"].roles[2] == plan.switches["s4"].roles[2]
    _check_all_pairs(fat_tree, plan)


@pytest.mark.parametrize(("kind", "dims"), [("mesh", (3, 3)), ("torus", (4, 4)), ("torus", (3, 2, 2)),
                                             ("hypercube", (2, 2, 2)), ("mesh", (2, 2))])
def test_dimension_order_is_minimal(kind: str, dims: tuple[int, ...]) -> None:
    topo = parse_topology(builders.grid(kind, dims, hosts_per_switch=2))
    plan = plan_fabric(topo)
    coord = {s.name: s.coord for s in topo.switches}
    for src, dst, path in _check_all_pairs(topo, plan, rounds=1):
        assert len(path) - 1 == _distance(kind, dims, coord[src.switch], coord[dst.switch])
        for a, b in zip(path, path[1:], strict=False):  # dimension order: dimensions never go back down
            moved = [d for d in range(len(dims)) if coord[a][d] != coord[b][d]]  # type: ignore[index]
            assert len(moved) == 1
        order = [next(d for d in range(len(dims)) if coord[a][d] != coord[b][d])  # type: ignore[index]
                 for a, b in zip(path, path[1:], strict=False)]
        assert order == sorted(order)


@pytest.mark.parametrize(("kind", "dims"), [("mesh", (3, 3)), ("torus", (4, 4)), ("hypercube", (2, 2, 2, 2))])
def test_adaptive_is_minimal_and_spreads(kind: str, dims: tuple[int, ...]) -> None:
    topo = parse_topology(builders.grid(kind, dims, routing="adaptive"))
    plan = plan_fabric(topo)
    assert plan.adaptive
    coord = {s.name: s.coord for s in topo.switches}
    paths = set()
    for src, dst, path in _check_all_pairs(topo, plan, rounds=4):
        assert len(path) - 1 == _distance(kind, dims, coord[src.switch], coord[dst.switch])
        paths.add(tuple(path))
    assert any(len(g) > 1 for sp in plan.switches.values() for g in sp.routes.values())
    assert len(paths) > len(topo.hosts) ** 2 - len(topo.hosts)  # more than one path for some pairs


def _distance(kind: str, dims: tuple[int, ...], a: Any, b: Any) -> int:
    if kind == "torus":
        return sum(min((x - y) % k, (y - x) % k) for x, y, k in zip(a, b, dims, strict=True))
    return sum(abs(x - y) for x, y in zip(a, b, strict=True))


def test_mesh_example(mesh: Topology) -> None:
    plan = plan_fabric(mesh)
    assert isinstance(plan.ddpm, DdpmLayout)
    s1 = plan.switches["s1"]
    assert s1.roles[1].kind == "seed" and s1.roles[1].value == 0
    assert s1.deltas[2].entry == plan.ddpm.port_entry(0, 1)  # s1 (0,0) -> s2 (1,0): +1 in x
    _check_all_pairs(mesh, plan)


def test_marks_that_do_not_fit_are_refused() -> None:
    with pytest.raises(TopologyTooLarge, match="4 hosts and the MF's host port field has 1 bits"):
        plan_fabric(parse_topology(builders.grid("mesh", (2, 2), hosts_per_switch=4, host_bits=1)))
    with pytest.raises(TopologyTooLarge, match="largest 2-D mesh is 2 per dimension"):
        plan_fabric(parse_topology(builders.grid("mesh", (3, 2), host_bits=34)))
    # a 4-level chain whose leaf has 300 hosts: 9-bit digits, 4 levels need 36 bits, the MF has 35
    doc = builders.fat_tree(2)
    doc["switches"] = [{"name": f"l{i}", "address": "127.0.0.1:1", "level": i,
                        "ports": list(range(1, 303)), "cpu_port": 500}
                       for i in range(4)]
    doc["links"] = [{"a": [f"l{i}", 301], "b": [f"l{i + 1}", 302]} for i in range(3)]
    doc["hosts"] = [{"name": f"x{i}", "switch": "l0", "port": i + 1, "guid": f"{0x100 + i:#x}",
                     "lid": 1 + i, "gid": f"fec0:0:0:1:0:0:0:{0x100 + i:x}"} for i in range(300)]
    with pytest.raises(TopologyTooLarge, match="the largest that fits has 3 levels"):
        plan_fabric(parse_topology(doc))


def test_bad_fabrics_are_refused() -> None:
    doc = builders.grid("mesh", (2, 2))
    doc["links"][0]["b"] = ["s1_1", 5]  # s0_0 linked to s1_1: not neighbours
    with pytest.raises(FabricError, match="not neighbours"):
        plan_fabric(parse_topology(doc))
    tree = builders.fat_tree(2)
    tree["links"] = [link for link in tree["links"] if not link["a"][0].startswith("c0")]
    with pytest.raises(FabricError, match="top switch c0 does not reach every host"):
        plan_fabric(parse_topology(tree))


def test_forged_marks_are_refused(mesh: Topology, fat_tree: Topology) -> None:
    plan = plan_fabric(mesh)
    receiver = mesh.hosts[0]
    with pytest.raises(FabricError, match="points outside the mesh"):
        trace(mesh, plan, receiver, plan.ddpm.pack((1, 0), 0) if plan.ddpm else 0)
    with pytest.raises(FabricError, match="host index 3"):
        trace(mesh, plan, receiver, 3)
    tree = plan_fabric(fat_tree)
    with pytest.raises(FabricError, match="level field 5"):
        trace(fat_tree, tree, fat_tree.hosts[0], 5 << 35)
