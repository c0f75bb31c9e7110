"""Trap authentication (forged and replayed traps dropped and counted), suppression, MF decoding."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from ibsec import addressing, keys
from ibsec.builder import Builder
from ibsm.fabric import plan_fabric
from ibsm.topology import Topology
from ibsm.traps import MadSource, NotAMad, TrapHandler, TrapOptions, parse_frame

from labs.sm_fabric import ca_keys, trap_257

from .test_fabric import _walk


class Clock:
    now = 10.0

    def __call__(self) -> float:
        return self.now


def _handler(topo: Topology) -> tuple[TrapHandler, keys.KeyStore, Clock]:
    store = ca_keys(topo)
    clock = Clock()
    return TrapHandler(topo, plan_fabric(topo), MadSource(topo, store), TrapOptions(2.0), clock), store, clock


def _spoofed_trap(topo: Topology, store: keys.KeyStore, attacker: str, victim: str, spoofed: str) -> bytes:
    """h``attacker`` floods ``victim`` claiming to be ``spoofed``: the marks say who really sent it."""
    hosts = {h.name: h for h in topo.hosts}
    _, mf = _walk(topo, plan_fabric(topo), hosts[attacker], hosts[victim], random.Random(1))
    return trap_257(topo, hosts[victim], store.ca_key(hosts[victim].guid), bad_pkey=0x1234,
                    claimed_gid=hosts[spoofed].gid, mf=mf)


def test_trap_traced_to_true_source_despite_spoofing(fat_tree: Topology, mesh: Topology) -> None:
    for topo in (fat_tree, mesh):
        handler, store, _ = _handler(topo)
        frame = _spoofed_trap(topo, store, attacker="h2", victim="h3", spoofed="h4")
        report = handler.handle(parse_frame(frame), "s2", 1)
        assert report.status == "accepted", report.reason
        assert (report.victim, report.bad_key, report.claimed_host) == ("h3", 0x1234, "h4")
        assert report.trace is not None
        assert (report.trace.host, report.trace.switch, report.trace.port) == ("h2", "s1" if topo is fat_tree
                                                                              else "s2", 2 if topo is fat_tree
                                                                              else 1)
        assert report.trace.packets_needed == 1
        event = report.as_event()
        assert event["bad_key"] == "0x1234" and event["claimed_host"] == "h4"


def test_forged_traps_are_dropped_and_counted(fat_tree: Topology) -> None:
    handler, store, _ = _handler(fat_tree)
    victim = fat_tree.hosts[2]
    wrong = keys.Key.generate(keys.KeyType.CA_SK, (victim.guid,))
    forged = trap_257(fat_tree, victim, wrong, bad_pkey=0x1234, claimed_gid=fat_tree.hosts[0].gid, mf=0)
    report = handler.handle(parse_frame(forged), "s2", 1)
    assert (report.status, report.trace) == ("forged", None)
    assert "does not verify" in report.reason
    # signed with another host's own key: the tag binds the sender GID, so it fails too
    other = trap_257(fat_tree, victim, store.ca_key(fat_tree.hosts[1].guid), bad_pkey=1,
                     claimed_gid=victim.gid, mf=0)
    assert handler.handle(parse_frame(other), "s2", 1).status == "forged"
    assert handler.counters["forged"] == 2 and handler.counters["accepted"] == 0


def test_replay_and_suppression(fat_tree: Topology) -> None:
    handler, store, clock = _handler(fat_tree)
    frame = _spoofed_trap(fat_tree, store, "h1", "h3", "h1")
    assert handler.handle(parse_frame(frame), "s2", 1).status == "accepted"
    assert handler.handle(parse_frame(frame), "s2", 1).status == "replay"  # same TID again
    again = _spoofed_trap(fat_tree, store, "h1", "h3", "h1")  # a new TID, same trap
    assert handler.handle(parse_frame(again), "s2", 1).status == "suppressed"
    other_key = trap_257(fat_tree, fat_tree.hosts[2], store.ca_key(fat_tree.hosts[2].guid), bad_pkey=0x999,
                         claimed_gid=fat_tree.hosts[0].gid, mf=0)
    assert handler.handle(parse_frame(other_key), "s2", 1).status == "accepted"  # another key: not a repeat
    clock.now += 2.5
    later = _spoofed_trap(fat_tree, store, "h1", "h3", "h1")
    assert handler.handle(parse_frame(later), "s2", 1).status == "accepted"
    assert handler.counters == {"accepted": 3, "replay": 1, "suppressed": 1}


def test_not_a_mad_is_ignored_with_its_reason(fat_tree: Topology) -> None:
    with pytest.raises(NotAMad, match="not-rocev2"):
        parse_frame(b"\x00" * 60)
    store = ca_keys(fat_tree)
    frame = trap_257(fat_tree, fat_tree.hosts[0], store.ca_key(fat_tree.hosts[0].guid), bad_pkey=1,
                     claimed_gid=fat_tree.hosts[1].gid, mf=0)
    host = fat_tree.hosts[0]
    builder = Builder(bytes.fromhex(addressing.guid_to_mac(host.guid).replace(":", "")),
                      addressing.parse_gid(host.gid).to_bytes())
    with pytest.raises(NotAMad, match="shorter-than-a-mad"):
        parse_frame(builder.mad_frame(fat_tree.sm_gid, 0xFFFF, bytes(200)))
    not_qp1 = bytearray(frame)
    not_qp1[62 + 7] = 2  # BTH destination QP 2
    with pytest.raises(NotAMad, match="not-ud-send-to-qp1"):
        parse_frame(bytes(not_qp1))


def test_trap_claiming_the_sms_gid_is_traced_by_its_mark(fat_tree: Topology, mesh: Topology) -> None:
    """Issue 14, defect 8: a source GID is a claim, the SM's included; the mark says who sent it."""
    for topo in (fat_tree, mesh):
        handler, store, _ = _handler(topo)
        hosts = {h.name: h for h in topo.hosts}
        _, mf = _walk(topo, plan_fabric(topo), hosts["h2"], hosts["h3"], random.Random(1))
        frame = trap_257(topo, hosts["h3"], store.ca_key(hosts["h3"].guid), bad_pkey=0x1234,
                         claimed_gid=topo.sm_gid, mf=mf)
        report = handler.handle(parse_frame(frame), "s2", 1)
        assert (report.status, report.reason, report.claimed_source) == ("accepted", "", topo.sm_gid)
        assert report.trace is not None and report.trace.host == "h2"


def test_a_mad_older_than_the_max_age_is_stale(fat_tree: Topology) -> None:
    """A trap that never reached the SM (sent while it was down) but was captured: its TransactionID
    says when it was sent, so replaying it later than max_age is refused, and it advances nothing."""
    store = ca_keys(fat_tree)
    wall = Clock()
    wall.now = time.time() - 100  # this SM started 100 s ago: the MADs below were sent while it ran
    handler = TrapHandler(fat_tree, plan_fabric(fat_tree), MadSource(fat_tree, store), TrapOptions(2.0),
                          Clock(), wall)
    wall.now = time.time()
    victim = fat_tree.hosts[2]
    sent = time.time_ns() - 61 * 10**9
    old = trap_257(fat_tree, victim, store.ca_key(victim.guid), bad_pkey=0x1234,
                   claimed_gid=fat_tree.hosts[0].gid, mf=0, tid=sent)
    report = handler.handle(parse_frame(old), "s2", 1)
    assert (report.status, report.reason) == ("stale", "sent 61 s ago by its TransactionID (at most 60 s)")
    fresh = trap_257(fat_tree, victim, store.ca_key(victim.guid), bad_pkey=0x1234,
                     claimed_gid=fat_tree.hosts[0].gid, mf=0, tid=sent + 2 * 10**9)
    assert handler.handle(parse_frame(fresh), "s2", 1).status == "accepted"  # 59 s old: still news
    # found by ibsec.fuzz.sm: a TransactionID far in the future, accepted, made every later trap a replay
    ahead = trap_257(fat_tree, victim, store.ca_key(victim.guid), bad_pkey=0x1234,
                     claimed_gid=fat_tree.hosts[0].gid, mf=0, tid=(1 << 64) - 1)
    report = handler.handle(parse_frame(ahead), "s2", 1)
    assert report.status == "stale" and "s ahead of the SM's clock by its TransactionID" in report.reason
    later = _spoofed_trap(fat_tree, store, "h2", "h3", "h4")
    assert handler.handle(parse_frame(later), "s2", 1).status == "accepted"
    assert handler.counters == {"stale": 2, "accepted": 2}


def test_a_capture_sent_before_the_sm_started_is_a_replay(fat_tree: Topology, tmp_path: Path) -> None:
    """Issue 14, defect 9: a trap the SM that was killed never recorded (it died before it handled it,
    or it was down when the trap was sent), captured and replayed within the max age after a restart,
    is refused as a replay; it advances nothing, and the host's next trap is accepted."""
    store = ca_keys(fat_tree)
    options = TrapOptions(2.0, replay_state=tmp_path / "sm-replay.state")
    victim = fat_tree.hosts[2]
    captured = trap_257(fat_tree, victim, store.ca_key(victim.guid), bad_pkey=0x1234,
                        claimed_gid=fat_tree.hosts[0].gid, mf=0)  # never reaches the first SM
    TrapHandler(fat_tree, plan_fabric(fat_tree), MadSource(fat_tree, store), options, Clock())  # killed
    restarted = TrapHandler(fat_tree, plan_fabric(fat_tree), MadSource(fat_tree, store), options, Clock())
    report = restarted.handle(parse_frame(captured), "s2", 1)
    assert report.status == "replay" and report.reason.endswith("before this SM started by its TransactionID")
    assert report.as_event()["transaction_id"] == f"{parse_frame(captured).transaction_id:#018x}"
    later = _spoofed_trap(fat_tree, store, "h2", "h3", "h4")
    assert restarted.handle(parse_frame(later), "s2", 1).status == "accepted"
    assert restarted.counters == {"replay": 1, "accepted": 1}


def test_trap_257_with_a_p_key_wider_than_16_bits_is_malformed(fat_tree: Topology) -> None:
    """Found by ibsec.fuzz.sm: the 32-bit key field of an authentic trap 257 reached SIF, which could not
    write a 16-bit match with it (an internal error). Such a trap is malformed and acted on by nobody."""
    handler, store, _ = _handler(fat_tree)
    victim = fat_tree.hosts[2]
    frame = trap_257(fat_tree, victim, store.ca_key(victim.guid), bad_pkey=0xFFFFFFFE,
                     claimed_gid=fat_tree.hosts[0].gid, mf=0)
    report = handler.handle(parse_frame(frame), "s2", 1)
    assert (report.status, report.reason, report.trace) == (
        "malformed", "trap 257 with a P_Key of more than 16 bits (0xfffffffe)", None)
