"""Scenarios on the default fat tree (k=2, three levels, 8 hosts) with the SM under SIF: traceback of every
host, SIF against a flood with legitimate traffic alongside, marks in captured packets, forged traps and a
trap flood, and the other filter policies (switched at run time)."""

from __future__ import annotations

import shutil
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from ibsec import names
from ibsec import wireshark as ws
from ibsec.polling import poll_until
from ibsm.fabric import plan_fabric, trace
from ibsm.topology import load_topology
from scapy.utils import rdpcap, wrpcap

from topologies import counters, demo, run, topofile

from . import scenario
from .conftest import launched, needs_root

pytestmark = needs_root
QUIET = 3.0


@pytest.fixture(scope="module")
def fat_tree() -> Iterator[run.FabricRun]:
    with launched(run.RunOptions(fabric="fat-tree", policy="sif", quiet_period=QUIET)) as fabric_run:
        yield fabric_run


def test_traceback_names_every_host_of_the_fat_tree_from_one_packet(fat_tree: run.FabricRun) -> None:
    traced = scenario.traceback_of_every_host(fat_tree, ("h0", "h7"))
    for host, event in traced.items():
        info = fat_tree.hosts[host]
        assert (event["traced_host"], event["traced_switch"], event["traced_port"]) == \
            (host, info.switch, info.port)
        assert event["claimed_host"] != host  # the source GID lied; the marking field did not
        assert event["packets_needed"] == 1
    wait_flushed(fat_tree, {(fat_tree.hosts[h].switch, fat_tree.hosts[h].port) for h in traced})


def wait_flushed(fabric_run: run.FabricRun, ports: set[tuple[str, int]], since: int = 0,
                 timeout: float = 120) -> None:
    """Until SIF has flushed the filters of ``ports`` (events from number ``since`` on) and the SM lists no
    filter anywhere."""

    def flushed() -> bool:
        done = {(e["switch"], e["port"]) for e in fabric_run.events()[since:]
                if e["event"] == "filter-flushed"}
        return ports <= done and not fabric_run.sm_call("status")["filters"]

    if not poll_until(flushed, timeout, interval=0.3):
        raise AssertionError(f"filters not flushed: {fabric_run.sm_call('status')['filters']}")


def test_sif_stops_a_flood_at_the_attackers_port_while_legitimate_traffic_flows(
        fat_tree: run.FabricRun) -> None:
    """What the filter guarantees, from the switches' pcaps and counters and the SM's events, on any machine:
    it goes up on the attacker's port, every frame that arrives after it is dropped there and counted, none
    of those reaches the victim, and it is flushed after the flood; the legitimate connection loses
    nothing. How fast it goes up, and latency meanwhile, are for `make eval`."""
    attacker, victim, peer, claimed = "h5", "h0", "h6", "h3"
    part = next(p for p in fat_tree.partitions if victim in p.members)
    fat_tree.wait_provisioned([victim, peer])
    qpn, _ = scenario.rc_pair(fat_tree, peer, victim, part)
    port = (fat_tree.hosts[attacker].switch, fat_tree.hosts[attacker].port)
    violations = counters.SwitchReads(fat_tree).violations()
    started, wall = len(fat_tree.events()), time.time()
    flood = scenario.flood(fat_tree, attacker, victim, 0x7A5A, claimed=claimed, count=3000, rate=1000,
                           seconds=3)
    legit = fat_tree.agents[peer].call("perf", control_timeout=60, test="send_lat", qpn=qpn, size=64,
                                       iterations=1_000_000, duration=3.0)
    scenario.wait_all([flood])
    new = fat_tree.events()[started:]
    installed = [e for e in new if e["event"] == "filter-installed"]
    assert [(e["switch"], e["port"], e["mode"], e["pkey"]) for e in installed] == \
        [(*port, "invalid-list", "0x7a5a")]
    wait_flushed(fat_tree, {port}, since=started)
    (flushed,) = [e for e in fat_tree.events()[started:] if e["event"] == "filter-flushed"]
    got = demo.flood_capture(fat_tree.fabric, fat_tree.run_dir, attacker, victim).account(
        0x7A5A, installed[0]["wall"], (wall, float("inf")))
    assert 0 < got.received <= scenario.flood_summary(fat_tree, attacker)["sent"]
    assert got.received_after_filter > 0  # the filter had frames to stop ...
    assert got.passed_after_filter == got.reached_after_filter == 0  # ... and let none of them on
    assert flushed["count"] - violations.get(port, 0) == got.received - got.forwarded  # dropped and counted
    assert fat_tree.wait_delivered(peer, victim, qpn) == (0, "RTS")  # every legitimate message delivered
    assert legit["iterations"] > 0  # and the ping-pong went on during the flood


def test_switches_mark_packets_so_one_captured_frame_names_its_source(fat_tree: run.FabricRun) -> None:
    topo = load_topology(fat_tree.topology_file)
    plan = plan_fabric(topo)
    part = next(p for p in fat_tree.partitions if "h2" in p.members)
    fat_tree.wait_provisioned(["h2", "h4"])
    qpn, _ = scenario.rc_pair(fat_tree, "h4", "h2", part)
    fat_tree.agents["h4"].call("perf", test="send_lat", qpn=qpn, size=32, iterations=20, duration=5.0)
    receiver = fat_tree.hosts["h2"]
    capture = fat_tree.run_dir / "pcaps" / f"{receiver.switch}-{receiver.port}_out.pcap"

    def from_h4() -> list[bytes]:
        return [f for _, f in scenario.roce_frames(capture) if scenario.src_gid(f) == fat_tree.gid("h4")]

    scenario.until(lambda: len(from_h4()) >= 20, "h4's frames in the capture of h2's port")
    frames = from_h4()
    host = next(h for h in topo.hosts if h.name == "h2")
    for frame in frames:
        assert scenario.dst_mf(frame) != 0
        assert trace(topo, plan, host, scenario.dst_mf(frame)).host == "h4"


def test_a_forged_trap_changes_no_filter(fat_tree: run.FabricRun) -> None:
    assert fat_tree.net is not None
    started = len(fat_tree.events())

    def forged() -> int:
        return int(fat_tree.sm_call("status")["traps"].get("forged", 0))

    before = forged()
    argv = scenario.tool("forge_trap", "--iface", fat_tree.net.host_iface("h3"),
                         "--sm-gid", topofile.sm_gid(),
                         "--victim-gid", fat_tree.gid("h0"), "--accused-gid", fat_tree.gid("h1"),
                         "--count", "5")
    fat_tree.run_tool("h3", argv)
    scenario.until(lambda: forged() >= before + 5, "five forged traps counted by the SM")
    new = fat_tree.events()[started:]
    assert [e for e in new if e["event"] in ("traceback", "filter-installed")] == []


def test_a_trap_flood_leaves_the_sm_responsive(fat_tree: run.FabricRun) -> None:
    assert fat_tree.net is not None
    argv = scenario.tool("trap_flood", "--iface", fat_tree.net.host_iface("h2"),
                         "--sm-gid", topofile.sm_gid(),
                         "--count", "3000", "--rate", "0", "--duration", "5")
    proc = fat_tree.spawn("h2", argv, "trap-flood.log")
    deadline = time.monotonic() + 10
    answers = 0
    while proc.poll() is None and time.monotonic() < deadline:
        assert fat_tree.sm_call("status")["policy"] == "sif"
        answers += 1
        time.sleep(0.2)
    scenario.wait_all([proc])
    assert answers >= 1
    # and it still traces a real attack right after
    started = len(fat_tree.events())
    scenario.wait_all([scenario.flood(fat_tree, "h6", "h0", 0x7C01, claimed="h1")])
    event = scenario.wait_events(fat_tree, "traceback", {"0x7c01"}, "bad_key", 60)["0x7c01"]
    assert event["traced_host"] == "h6" and len(fat_tree.events()) > started


@pytest.mark.parametrize("policy", ["dt", "if"])
def test_dt_and_if_block_the_flood_at_the_first_switch(fat_tree: run.FabricRun, policy: str) -> None:
    """Every flood frame is dropped at the attacker's own port and counted there (its violation counter
    and nowhere else); none leaves that switch, none reaches the victim."""
    attacker, victim, pkey = "h3", "h4", 0x7D00
    port = (fat_tree.hosts[attacker].switch, fat_tree.hosts[attacker].port)
    reads = counters.SwitchReads(fat_tree)
    capture = demo.flood_capture(fat_tree.fabric, fat_tree.run_dir, attacker, victim)
    fat_tree.sm_call("policy", policy=policy)
    try:
        violations = reads.violations()
        before = fat_tree.agents[victim].counters()["drops"]["bad_pkey"]
        wall = time.time()
        scenario.wait_all([scenario.flood(fat_tree, attacker, victim, pkey, count=300, rate=500)])

        def dropped() -> dict[tuple[str, int], int]:
            return counters.moved(violations, reads.violations())

        def all_counted() -> bool:  # every frame the switch received, dropped and counted (none in work)
            received = capture.account(pkey, None, (wall, float("inf"))).received
            return received > 0 and dropped() == {port: received}

        scenario.until(all_counted, "every flood frame dropped and counted at the attacker's port only")
        assert fat_tree.agents[victim].counters()["drops"]["bad_pkey"] == before
    finally:
        fat_tree.sm_call("policy", policy="sif")
    got = capture.account(pkey, None, (wall, float("inf")))
    assert got.received > 0 and got.forwarded == got.reached == 0  # nothing left the attacker's switch


def test_with_policy_none_the_flood_reaches_the_victim_and_no_switch_drops_it(
        fat_tree: run.FabricRun) -> None:
    """Policy none: no partition check anywhere (every switch's violation counter stays put), the attacker's
    switch sends on every flood frame it receives and the victim's adapter gets them. What the flood does
    to latency and throughput is measured by `make eval` (experiments 1 and 3), not asserted here."""
    attacker, victim, pkey = "h1", "h2", 0x7D01
    reads = counters.SwitchReads(fat_tree)
    capture = demo.flood_capture(fat_tree.fabric, fat_tree.run_dir, attacker, victim)
    fat_tree.sm_call("policy", policy="none")
    try:
        violations = reads.violations()
        before = fat_tree.agents[victim].counters()["drops"]["bad_pkey"]
        wall = time.time()
        scenario.wait_all([scenario.flood(fat_tree, attacker, victim, pkey, count=900, rate=1000)])

        def all_on() -> bool:  # the attacker's switch has sent on every frame it received (none in work)
            got = capture.account(pkey, None, (wall, float("inf")))
            return got.received == got.forwarded > 0

        scenario.until(all_on, "every flood frame sent on by the attacker's switch")
        scenario.until(lambda: fat_tree.agents[victim].counters()["drops"]["bad_pkey"] > before,
                       "flood frames at the victim's adapter")
        assert counters.moved(violations, reads.violations()) == {}  # nothing dropped for its P_Key
    finally:
        fat_tree.sm_call("policy", policy="sif")
    got = capture.account(pkey, None, (wall, float("inf")))
    assert 0 < got.reached <= got.forwarded  # its last switch delivered them to the victim
    assert scenario.events_of(fat_tree, "filter-installed", pkey=f"{pkey:#06x}") == []


WIRESHARK_FIELDS = [
    "ibsec.mode", "ibsec.sth.tag", "ibsec.direction_from", "ibsec.nonce", "ibsec.icrc.good",
    "ibsec.vendor.attribute", "ibsec.vendor.ack", "ibsec.keybatch.count", "ibsec.keybatch.nonce",
    "ibsec.keybatch.wrapped",
    "ibsec.pkeytable.pkey", "ibsec.pkeytable.secmode", "ibsec.mad_auth.tag", "ibsec.notice.ext_version",
    "ibsec.traced_host", "ibsec.claimed_host", "_ws.malformed", "_ws.expert.message",
]


def merged(first: Path, second: Path, out: Path) -> Path:
    """One capture of both files' frames in time order (a port's _in and _out pcaps)."""
    wrpcap(str(out), sorted([*rdpcap(str(first)), *rdpcap(str(second))], key=lambda p: float(p.time)))
    return out


def test_wireshark_reads_our_headers_in_the_runs_captures(fat_tree: run.FabricRun, tmp_path: Path) -> None:
    """h0's port captures of this module's run (with an encrypted ping-pong h6 -> h0 and a flood from h5
    claiming to be h3), read by tshark with our dissector: no malformed frame; every secured frame's STH,
    direction and nonce (no nonce seals two different frames); the key batches and P_Key table the SM sent h0
    and its acks; the floods h0 received and the traps it sent traced as the SM traced them."""
    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed (scripts/setup.sh installs it)")
    part = next(p for p in fat_tree.partitions if {"h0", "h6"} <= set(p.members))
    fat_tree.wait_provisioned(["h0", "h6"])
    qpn, _ = scenario.rc_pair(fat_tree, "h6", "h0", part)
    fat_tree.agents["h6"].call("perf", test="send_lat", qpn=qpn, size=64, iterations=20, duration=5.0)
    scenario.wait_all([scenario.flood(fat_tree, "h5", "h0", 0x7A11, claimed="h3")])
    event = scenario.wait_events(fat_tree, "traceback", {"0x7a11"}, "bad_key", 30)["0x7a11"]
    assert (event["claimed_host"], event["traced_host"]) == ("h3", "h5")
    host, pcaps = fat_tree.hosts["h0"], fat_tree.run_dir / "pcaps"
    prefs = {"ibsec.topology": str(fat_tree.topology_file)}
    received = scenario.snapshot(pcaps / f"{host.switch}-{host.port}_out.pcap", tmp_path / "received.pcap")
    sent = scenario.snapshot(pcaps / f"{host.switch}-{host.port}_in.pcap", tmp_path / "sent.pcap")
    rx = ws.read_fields(received, WIRESHARK_FIELDS, {**prefs, "ibsec.at_receiver": "TRUE"})
    tx = ws.read_fields(sent, WIRESHARK_FIELDS, prefs)
    frames = rx + tx
    assert [f for f in frames if f["_ws.malformed"]] == []
    assert all(f["ibsec.icrc.good"] == ["1"] for f in frames if f["ibsec.icrc.good"])
    # a connection's N0 is both ends' CM contributions xored: nonces show where both directions are read
    both = ws.read_fields(merged(sent, received, tmp_path / "both.pcap"), WIRESHARK_FIELDS, prefs)
    secured = [f for f in both if f["ibsec.mode"] not in ([], ["0"])]
    assert secured and all(len(f["ibsec.sth.tag"][0]) == 32 and f["ibsec.direction_from"] and f["ibsec.nonce"]
                           for f in secured)
    tags = defaultdict(set)
    for f in secured:
        tags[f["ibsec.nonce"][0]].add(f["ibsec.sth.tag"][0])
    assert all(len(t) == 1 for t in tags.values())  # retransmissions repeat a frame; nothing else a nonce
    batches = [f for f in rx if f["ibsec.vendor.attribute"] == ["0x0012"]]
    acks = [f for f in tx if f["ibsec.vendor.attribute"] == ["0x0012"]]
    assert batches and all(f["ibsec.vendor.ack"] == ["0"] for f in batches)
    for batch in batches:  # wrapped (never all zero) under a nonce, authenticated
        assert set(batch["ibsec.keybatch.wrapped"][0]) != {"0"}
        assert set(batch["ibsec.keybatch.nonce"][0]) != {"0"}
        assert batch["ibsec.mad_auth.tag"]
    for ack in acks:  # authenticated, no key byte echoed (the dissector flags any)
        assert ack["ibsec.vendor.ack"] == ["1"] and ack["ibsec.mad_auth.tag"]
        assert not ack["ibsec.keybatch.wrapped"]
        assert not any("echoes key bytes" in m for m in ack["_ws.expert.message"])
    # each batch h0 took is acknowledged once, echoing its count
    counts = sorted(b["ibsec.keybatch.count"][0] for b in batches)
    assert sorted(a["ibsec.keybatch.count"][0] for a in acks) == counts
    tables = [f for f in rx if f["ibsec.vendor.attribute"] == ["0x0011"]]
    modes = {f"{p.full_pkey:#06x}": str(names.SECURITY_MODES.index(p.security))
             for p in fat_tree.partitions if "h0" in p.members}
    for table in tables:
        entries = dict(zip(table["ibsec.pkeytable.pkey"], table["ibsec.pkeytable.secmode"], strict=True))
        assert entries.items() >= modes.items()
    assert tables
    traced = {(e["claimed_host"], e["traced_host"]) for e in fat_tree.events()
              if e["event"] == "traceback" and e["victim"] == "h0"}
    traps = [f for f in tx if f["ibsec.notice.ext_version"] == ["1"]]
    assert traced and traced <= {(t["ibsec.claimed_host"][-1], t["ibsec.traced_host"][0]) for t in traps}
    assert traced <= scenario.spoofs_seen(rx)  # the floods themselves, traced from their marks
