"""The `sm` command against real `p4switch` processes on veths, with real host agents (root only).

One fat tree for the whole module, in order: pipeline pushed and entries readable over P4Runtime, keys
acknowledged, a spoofed flood marked by the switches, trapped by the victim's agent, filtered at the true
port and flushed after the quiet period, a forged trap ignored, a killed switch reprogrammed once it
answers again (how soon is measured by `make bench`: labs.sm_bench's reconnect), a killed SM reconciling
without duplicates, SIGTERM stopping it cleanly.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import finsy as fy
import pytest
from ibsec import keys, names
from ibsec.control import ControlClient
from ibsec.polling import poll_until
from ibsm.topology import load_topology
from ibsm.traps import RawMad, parse_frame

from labs.sm_fabric import flood_frame, trap_257

from .conftest import DATA
from .processes import ROOT, ProcessFabric, process_fabric

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="veth interfaces need root")

READY_TIMEOUT = 180.0  # seconds for the SM to program the four switches (the whole fixture took 50 s, loaded)
IPV6_SRC, IPV6_DST = slice(22, 38), slice(38, 54)
SM_ARGS = ("--quiet-period", "2", "--poll-interval", "0.2", "--suppress-window", "0.5", "--key-timeout", "1",
           "--max-trap-age", "3600")  # the replay test's captures are refused as replays, never by age


@pytest.fixture(scope="module")
def fabric(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessFabric]:
    with process_fabric(DATA / "fattree-2x2.json", tmp_path_factory.mktemp("fabric"), SM_ARGS) as fab:
        for host in fab.host_ifaces:
            fab.start_agent(host)
        fab.start_capture()  # every MAD from the start: what an attacker on a cable could replay later
        fab.start_sm()
        fab.wait_event("fabric-ready", timeout=READY_TIMEOUT)
        yield fab


async def _read(address: str, table: str) -> list[fy.P4TableEntry]:
    """Read ``table`` over P4Runtime as a backup client (the SM stays primary)."""
    options = fy.SwitchOptions(p4info=ROOT / "build" / "main.p4info.txtpb", initial_election_id=1)
    async with fy.Switch("reader", address, options) as sw:
        return [e async for e in sw.read(fy.P4TableEntry(table))]  # type: ignore[attr-defined]


def test_pipeline_pushed_and_entries_readable(fabric: ProcessFabric) -> None:
    ready = fabric.events("switch-ready")
    assert sorted(e["switch"] for e in ready) == ["s1", "s2", "s3", "s4"]
    routes = asyncio.run(_read(fabric.doc["switches"][0]["address"], names.ROUTES))
    assert len(routes) == 3  # h1, h2, and the ECMP default route up
    roles = asyncio.run(_read(fabric.doc["switches"][2]["address"], names.PORT_ROLES))
    assert len(roles) == 2


def test_keys_acknowledged_by_agents(fabric: ProcessFabric) -> None:
    # per host: SM_SK, the P_SK of each partition it is in, a CA_SK_ij per host it shares one with, the
    # P_Key table: h1 and h3 (Default, compute) 1+2+3+1, h2 and h4 (Default) 1+1+3+1
    delivered = fabric.wait_event("key-delivered", count=26)
    assert len({(e["host"], e["key"]) for e in delivered}) == 26
    got = {(e["host"], e["key"]) for e in delivered}
    assert {(e["host"], e["key"]) for e in fabric.events("key-sent")} == got
    assert ("h1", "P_SK 0x0001") in got and ("h3", "P_SK 0x0001") in got
    assert not [e for e in fabric.events("key-sent") if e["host"] in ("h2", "h4") and "0x0001" in e["key"]]
    assert not fabric.events("key-delivery-failed")


def test_spoofed_flood_filtered_at_true_port_and_flushed(fabric: ProcessFabric) -> None:
    topo = load_topology(fabric.topology)
    start = time.time()
    flood = flood_frame(topo, claimed="h4", victim="h3", pkey=0x1234)
    fabric.send("h1", [flood])  # h1 attacks h3 pretending to be h4; the switches mark the packet
    (trace,) = fabric.wait_event("traceback", since=start)
    assert (trace["victim"], trace["claimed_host"], trace["traced_host"], trace["traced_switch"],
            trace["traced_port"]) == ("h3", "h4", "h1", "s1", 1)
    (installed,) = fabric.wait_event("filter-installed", since=start)
    assert (installed["switch"], installed["port"], installed["mode"]) == ("s1", 1, "invalid-list")
    fabric.send("h1", [flood] * 20)  # dropped at s1 port 1 and counted
    (flushed,) = fabric.wait_event("filter-flushed", since=start)
    assert flushed["count"] == 20 and flushed["active_s"] >= 2.0
    assert not asyncio.run(_read(fabric.doc["switches"][0]["address"], names.INVALID_PKEYS))


def test_forged_trap_installs_nothing(fabric: ProcessFabric) -> None:
    topo = load_topology(fabric.topology)
    start = time.time()
    victim = topo.hosts[2]
    wrong = keys.Key.generate(keys.KeyType.CA_SK, (victim.guid,))
    frame = trap_257(topo, victim, wrong, bad_pkey=0x4242, claimed_gid=topo.hosts[1].gid, mf=0x1)
    fabric.send(victim.name, [frame])
    tid = _tid(parse_frame(frame))
    traps = poll_until(lambda: [e for e in fabric.events("trap", start) if e.get("transaction_id") == tid],
                       60)
    assert traps, "the forged trap did not reach the SM"
    (trap,) = traps  # found by its TransactionID: any other trap of the fabric meanwhile is not this one
    assert (trap["status"], trap["sender"]) == ("forged", victim.gid)
    time.sleep(0.5)
    assert not fabric.events("filter-installed", since=start)


def test_killed_switch_is_reprogrammed(fabric: ProcessFabric) -> None:
    start = time.time()
    fabric.kill_switch("s1")
    fabric.wait_event("switch-lost", since=start)
    answering = fabric.start_switch("s1")
    (back,) = fabric.wait_event("switch-back", since=start)
    assert back["switch"] == "s1" and back["inserted"] == 10 and back["wall"] >= answering
    assert len(asyncio.run(_read(fabric.doc["switches"][0]["address"], names.ROUTES))) == 3


def test_killed_sm_reconciles_without_duplicates(fabric: ProcessFabric) -> None:
    topo = load_topology(fabric.topology)
    start = time.time()
    fabric.send("h2", [flood_frame(topo, claimed="h1", victim="h4", pkey=0x4444)])
    fabric.wait_event("filter-installed", since=start)
    assert fabric.stop_sm(signal.SIGKILL) == -signal.SIGKILL
    restart = time.time()
    fabric.start_sm("--no-keys")
    fabric.wait_event("fabric-ready", since=restart, timeout=READY_TIMEOUT)
    ready = fabric.events("switch-ready", since=restart)
    assert len(ready) == 4
    assert all((e["inserted"], e["modified"], e["deleted"]) == (0, 0, 0) for e in ready), ready
    (adopted,) = fabric.events("filter-adopted", since=restart)
    assert (adopted["switch"], adopted["port"], adopted["pkeys"]) == ("s1", 2, ["0x4444"])
    fabric.wait_event("filter-flushed", since=restart)  # watched, then flushed when quiet


def _agent_counters(fabric: ProcessFabric, host: str) -> dict[str, Any]:
    with ControlClient(fabric.workdir / f"{host}.sock") as client:
        counters: dict[str, Any] = client.call("counters")
        return counters


def _tid(raw: RawMad) -> str:
    """A MAD's TransactionID as the SM's events write it."""
    return f"{raw.transaction_id:#018x}"


def _replay_everything(fabric: ProcessFabric, since: float) -> None:
    """Replay every MAD captured (until the capture was closed) between a host and the SM: each agent's
    traps and key ACKs toward the SM, each SM MAD toward its agent. Nothing of it is accepted by anyone.

    Every replayed MAD is followed by its sender and TransactionID, not by counters the running fabric
    may move meanwhile (a key sent again after a late ACK is answered and counted too): the SM's ``trap``
    event of each replayed trap says replay (or forged: the forged test's trap is among the captures), its
    ``key-ack-unexpected`` events are the replayed ACKs, one each, and no answer of an agent to a replayed
    SM MAD; each agent drops every SM MAD replayed to it as a replay."""
    assert fabric.capture is not None
    sm_gid = ipaddress.IPv6Address(fabric.doc["sm"]["gid"]).packed
    to_sm = [(h, f) for h, f in fabric.capture.to_sm if f[IPV6_DST][8:] == sm_gid[8:]]
    to_hosts = [(h, f) for h, f in fabric.capture.to_host if f[IPV6_SRC] == sm_gid]
    # at least the traps so far and every key MAD of the start: a key batch and a P_Key table per host
    assert to_sm and len(to_hosts) >= 2 * len(fabric.host_ifaces)
    mads = [parse_frame(f) for _, f in to_sm]
    traps = {(raw.sender_text, _tid(raw)) for raw in mads if not raw.is_response}
    acks = Counter(_tid(raw) for raw in mads if raw.is_response)
    assert len(traps) + sum(acks.values()) == len(to_sm)  # each replayed trap has its own event
    old_sm_tids = {_tid(parse_frame(f)) for _, f in to_hosts}  # what a replayed ACK, or an answer, echoes
    agents = {h: _agent_counters(fabric, h) for h in fabric.host_ifaces}
    replayed_at = time.time()
    for host, frame in to_sm:
        fabric.send(host, [frame])
        time.sleep(0.01)  # under the punt meter's 200/s per port: every replay reaches the SM
    for host, frame in to_hosts:
        fabric.send_to_host(host, [frame])
    deadline = time.monotonic() + 60
    while True:
        outcome = {(e["sender"], e["transaction_id"]): e["status"] for e in fabric.events("trap", replayed_at)
                   if (e.get("sender"), e.get("transaction_id")) in traps}
        unexpected = Counter(e["transaction_id"] for e in fabric.events("key-ack-unexpected", replayed_at)
                             if e["transaction_id"] in old_sm_tids | set(acks))
        if len(outcome) == len(traps) and unexpected.total() >= acks.total():
            break
        assert time.monotonic() < deadline, "the replayed MADs did not all reach the SM"
        time.sleep(0.1)
    assert not {key: status for key, status in outcome.items() if status not in ("replay", "forged")}
    assert Counter(outcome.values())["forged"] == 1  # the forged test's trap
    assert unexpected == acks
    assert not fabric.events("traceback", since) and not fabric.events("filter-installed", since)
    for host in fabric.host_ifaces:
        replayed = sum(1 for h, _ in to_hosts if h == host)
        counters = _agent_counters(fabric, host)
        assert counters["drops"].get("replay", 0) - agents[host]["drops"].get("replay", 0) == replayed


def test_captured_mads_replayed_after_sm_and_switch_restarts_are_refused(fabric: ProcessFabric) -> None:
    """Issue 14: traps, key ACKs and key MADs captured on the cables since the fabric started, replayed
    after the SM restarted (killed) and again after a switch restarted: 0 accepted by the SM or agents.
    Among them a trap the killed SM never recorded (h3's, sent while no SM ran) and port-up notices sent
    before the first SM could hear them: newer than anything recorded for their hosts, both are refused
    only because they were sent before the SM that receives them started."""
    topo = load_topology(fabric.topology)
    start = time.time()
    fabric.send("h1", [flood_frame(topo, claimed="h4", victim="h3", pkey=0x3456)])
    fabric.wait_event("traceback", since=start)  # so a trap is among what gets replayed
    assert fabric.capture is not None
    assert fabric.stop_sm(signal.SIGKILL) == -signal.SIGKILL
    from_h3 = sum(1 for h, _ in fabric.capture.to_sm if h == "h3")
    fabric.send("h1", [flood_frame(topo, claimed="h4", victim="h3", pkey=0x3457)])
    capture = fabric.capture
    assert poll_until(lambda: sum(1 for h, _ in capture.to_sm if h == "h3") != from_h3, 30), \
        "h3 sent no trap about the flood"  # its trap 257, to no SM
    fabric.capture.close()
    restart = time.time()
    fabric.start_sm()  # it sends every key again, under fresh TransactionIDs
    fabric.wait_event("key-delivered", since=restart, timeout=READY_TIMEOUT, count=26)
    _replay_everything(fabric, restart)
    restart = time.time()
    fabric.kill_switch("s2")
    fabric.start_switch("s2")
    fabric.wait_event("switch-back", since=restart)
    _replay_everything(fabric, restart)


def test_restarted_agent_gets_its_keys_back_and_its_partition_works(fabric: ProcessFabric) -> None:
    """Issue 14, defect 10: h3's agent killed and started again holds only its CA key; its port-up
    notice makes the SM send it everything again, and h1 connects to it in 0x8001 (sth-aead)."""
    start = time.time()
    fabric.agents["h3"].kill()
    fabric.agents["h3"].wait(10)
    fabric.start_agent("h3")
    # until its P_Key table arrives the agent repeats its notice (0, 1, 3 s): the first one provisions it,
    # any later one of the same start finds it in progress or rate-limited
    hello, *repeats = fabric.wait_event("agent-hello", since=start)
    assert (hello["host"], hello["action"]) == ("h3", "provision")
    assert all((e["host"], e["boot_id"]) == ("h3", hello["boot_id"]) for e in repeats), repeats
    again, *later = fabric.wait_event("host-reprovision", since=start)
    assert (again["host"], again["action"], again["keys"]) == ("h3", "re-provisioning", 7)
    assert all(e["host"] == "h3" for e in later), later
    delivered = fabric.wait_event("key-delivered", since=start, count=7)
    assert {e["host"] for e in delivered} == {"h3"} and "P_Key table" in {e["key"] for e in delivered}
    h3_gid = fabric.host("h3")["gid"]
    with ControlClient(fabric.workdir / "h1.sock") as h1, ControlClient(fabric.workdir / "h3.sock") as h3:
        qp = h1.call("connect", remote_gid=h3_gid, service="RC", pkey=0x8001, timeout=10)
        assert qp["mode"] == 2
        h1.call("send", qpn=qp["qpn"], data="after the restart")
        got = h3.call("recv", qpn=qp["remote_qpn"], timeout=10)
    assert bytes.fromhex(got["data_hex"]) == b"after the restart"
    assert not fabric.events("filter-installed", since=start)


def test_status_and_policy_commands(fabric: ProcessFabric) -> None:
    status = json.loads(_sm("status", str(fabric.workdir), "--json"))
    assert status["switches"] == {"s1": "up", "s2": "up", "s3": "up", "s4": "up"}
    assert status["policy"] == "sif" and status["filters"] == []
    parts = {p["name"]: p for p in json.loads(_sm("partitions", str(fabric.workdir), "--json"))}
    compute = parts["compute"]
    assert (compute["hosts"], compute["secmode"]) == ({"h1": "full", "h3": "full"}, "sth-aead")
    assert "policy sif -> if" in _sm("policy", "if", str(fabric.workdir))
    modes = asyncio.run(_read(fabric.doc["switches"][0]["address"], names.PARTITION_MODE))
    assert len(modes) == 2  # s1's two host ports now check their valid P_Keys
    assert "policy if -> sif" in _sm("policy", "sif", str(fabric.workdir))
    assert not asyncio.run(_read(fabric.doc["switches"][0]["address"], names.PARTITION_MODE))


def _sm(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "ibsm.cli", *args], capture_output=True, text=True,
                          timeout=180)  # a hang bound: the CLI's imports alone are slow on a loaded machine
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_sigterm_stops_cleanly(fabric: ProcessFabric) -> None:
    assert fabric.stop_sm(signal.SIGTERM) == 0
    assert fabric.events("sm-stop")
    assert "SM stopped" in (fabric.workdir / "logs" / "sm.log").read_text()
    assert not (fabric.workdir / "sm.sock").exists()
