"""Memory protection against a keyless stranger with sniffed R_Keys (issue 14, defect 3): a region is bound to
its protection domain, and a region registered for authenticated access takes only writes whose MAC covers
them. Three agents on a bridge: a member, its victim peer, and a stranger whose agent holds no key."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from ibsec.builder import gid_bytes

from labs.agent_lab import SECURE_PKEY, Agent, AgentLab, provision, rc_pair, start_agents

from .helpers import Tap, wait_for


@dataclass
class Scene:
    member: Agent
    victim: Agent
    stranger: Agent
    fabric: AgentLab


@pytest.fixture(scope="module")
def scene(module_fabric: Callable[[int], AgentLab]) -> Scene:
    fabric = module_fabric(3)
    h0, h1, h2 = fabric.hosts
    member, victim = start_agents(fabric, [h0, h1], provision(fabric, [h0, h1]), None)
    pkeys = fabric.run_dir / "stranger-pkeys.json"  # claims the secure partition too, without its key
    pkeys.write_text(json.dumps({"partitions": [{"pkey": "0xffff"}, {"pkey": hex(SECURE_PKEY), "mode": 0}]}))
    stranger = fabric.start_agent(h2, "--pkeys", str(pkeys))
    return Scene(member, victim, stranger, fabric)


def sniffed_writes(scene: Scene, regions: list[dict[str, int]]) -> dict[int, int]:
    """The member writes each region once (mode 2) while the stranger's tap on the victim's cable reads
    the RETHs: R_Key -> virtual address, as any sniffer learns them."""
    qpn, _ = rc_pair(scene.member, scene.victim, 2, "session")
    tap = Tap(scene.victim.host)
    try:
        for r in regions:
            assert scene.member.call("write", qpn=qpn, va=r["addr"], rkey=r["rkey"], data="ok!!!")["acked"]
        member = gid_bytes(scene.member.host.gid)  # not the stranger's earlier forged writes, still resent
        seen = {view.reth[1]: view.reth[0] for _, view in tap.frames(0.5)
                if view.reth is not None and view.src_gid == member}
    finally:
        tap.close()
    assert set(seen) == {r["rkey"] for r in regions}
    return seen


def memory(agent: Agent, region: dict[str, int]) -> bytes:
    return bytes.fromhex(agent.call("read_mr", rkey=region["rkey"])["data_hex"])


def stranger_writes(scene: Scene, pkey: int, rkey: int, va: int) -> bool:
    """A keyless mode-0 connection of the stranger in ``pkey`` writes with a sniffed R_Key: acked?"""
    qp = scene.stranger.call("connect", remote_gid=scene.victim.host.gid, pkey=pkey, mode=0)
    return bool(scene.stranger.call("write", qpn=qp["qpn"], va=va + 8, rkey=rkey, data="FORGED",
                                    timeout=0.5)["acked"])


@pytest.mark.parametrize("access", ["authenticated", "any"])
def test_a_sniffed_r_key_writes_nothing_from_another_protection_domain(scene: Scene, access: str) -> None:
    regions = [scene.victim.call("reg_mr", length=64, pkey=SECURE_PKEY, access=access) for _ in range(3)]
    seen = sniffed_writes(scene, regions)
    before = scene.victim.counters()["drops"]["wrong_pd"]
    for rkey, va in seen.items():
        assert not stranger_writes(scene, 0xFFFF, rkey, va)
    assert wait_for(lambda: scene.victim.counters()["drops"]["wrong_pd"] >= before + 3)
    assert all(memory(scene.victim, r)[:14] == b"ok!!!" + bytes(9) for r in regions)


def test_a_region_for_authenticated_access_refuses_keyless_writes_of_its_own_partition(scene: Scene) -> None:
    guarded = scene.victim.call("reg_mr", length=64, pkey=SECURE_PKEY, access="authenticated")
    open_ = scene.victim.call("reg_mr", length=64, pkey=SECURE_PKEY)
    seen = sniffed_writes(scene, [guarded, open_])
    before = scene.victim.counters()["drops"]["unauthenticated_write"]
    assert not stranger_writes(scene, SECURE_PKEY, guarded["rkey"], seen[guarded["rkey"]])
    # and its retransmissions; awaited, as the write is judged unacked after 0.5 s whatever the victim's pace
    assert wait_for(lambda: scene.victim.counters()["drops"]["unauthenticated_write"] >= before + 1)
    assert memory(scene.victim, guarded)[:14] == b"ok!!!" + bytes(9)
    # what access "any" promises in a partition that allows mode 0: the R_Key and the PD, nothing more
    assert stranger_writes(scene, SECURE_PKEY, open_["rkey"], seen[open_["rkey"]])
    assert memory(scene.victim, open_)[8:14] == b"FORGED"


def test_an_application_pd_isolates_its_regions_within_the_partition(scene: Scene) -> None:
    pd = scene.victim.call("alloc_pd")["pd"]
    region = scene.victim.call("reg_mr", length=64, pd=pd)
    qpn, _ = rc_pair(scene.member, scene.victim, 2, "session")  # accepted into the partition's own PD
    assert not scene.member.call("write", qpn=qpn, va=region["addr"], rkey=region["rkey"], data="x",
                                 timeout=0.5)["acked"]
    scene.victim.call("listen", pkey=SECURE_PKEY, pd=pd)
    try:
        qpn, remote = rc_pair(scene.member, scene.victim, 2, "session")
        assert next(q for q in scene.victim.call("qps") if q["qpn"] == remote)["pd"] == pd
        written = scene.member.call("write", qpn=qpn, va=region["addr"], rkey=region["rkey"], data="mine")
        assert written["acked"]
    finally:
        scene.victim.call("listen", pkey=SECURE_PKEY, pd=SECURE_PKEY & 0x7FFF)
    assert memory(scene.victim, region)[:4] == b"mine"
