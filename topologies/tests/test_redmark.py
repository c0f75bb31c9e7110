"""ReDMArk's attacks (Rothenberger et al., USENIX Security 2021) on a launched fabric: the smallest fat tree
with an SM (k=2, two levels, 4 hosts; both partitions sth-aead). The tools run from an attacker host that
holds no key (h3, no agent) against h0 and its partition peer h2, and each is stopped by the mechanism the
design names: the admission limits (``cm_limit``), the MAC before the R_Key, the MAC before any QP state,
and random QPNs, PSNs, R_Keys and addresses. Answers come from the agents' counters, QP states and memory
and from the switches' pcaps of h0's port; no duration is asserted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ibsec import addressing
from ibsec.agent.admission import Limits
from ibsec.rocev2 import View, parse

from topologies import run, topofile

from . import scenario
from .conftest import launched, needs_root

pytestmark = needs_root
VICTIM, MEMBER, ATTACKER = "h0", "h2", "h3"  # h0 and h2 share partition p1; h3 is in p2 and runs no agent
FLOOD = 600  # spoofed REQs, paced (software switches lose frames sent back to back)


@pytest.fixture(scope="module")
def fabric() -> Iterator[run.FabricRun]:
    options = run.RunOptions(fabric="fat-tree", k=2, levels=2, agents=(VICTIM, MEMBER))
    with launched(options) as fabric_run:
        fabric_run.wait_provisioned([VICTIM, MEMBER])
        yield fabric_run


def partition(fabric: run.FabricRun) -> topofile.PartitionSpec:
    part = next(p for p in fabric.partitions if {VICTIM, MEMBER} <= set(p.members))
    assert part.security == "sth-aead" and ATTACKER not in part.members
    return part


def counters(fabric: run.FabricRun) -> dict[str, Any]:
    got: dict[str, Any] = fabric.agents[VICTIM].call("counters")
    return got


def moved(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The drop reasons whose counters changed, by how much."""
    return {k: after[k] - before[k] for k in after if after[k] != before[k]}


def qp_state(fabric: run.FabricRun, host: str, qpn: int) -> str:
    return str(next(q for q in fabric.agents[host].call("qps") if q["qpn"] == qpn)["state"])


def received(fabric: run.FabricRun, tmp_path: Path) -> Path:
    """A snapshot of the capture of every frame the fabric delivered to the victim's port."""
    port = fabric.hosts[VICTIM]
    pcap = fabric.run_dir / "pcaps" / f"{port.switch}-{port.port}_out.pcap"
    return scenario.snapshot(pcap, tmp_path / "received.pcap")


def last_request(fabric: run.FabricRun, tmp_path: Path, qpn: int, opcode: str) -> View:
    """The last ``opcode`` request to the victim's QP ``qpn`` on its cable: what a sniffer learns (the
    QPN, P_Key and PSN in the clear, and a WRITE's R_Key and address)."""
    def seen() -> list[View]:
        views = (parse(frame) for _, frame in scenario.roce_frames(received(fabric, tmp_path)))
        return [v for v in views if v is not None and v.dqpn == qpn and v.opcode_name == opcode]

    scenario.until(lambda: bool(seen()), f"{opcode} to QP {qpn:#x} in the capture of {VICTIM}'s port")
    return seen()[-1]


def impersonating(fabric: run.FabricRun, view: View) -> list[str]:
    """Tool arguments that inject into the member's connection: its GID claimed, the sniffed QPN and next
    PSN, mode 2 (the partition's), at a pace the software switches keep up with."""
    assert fabric.net is not None
    return ["--iface", fabric.net.host_iface(ATTACKER), "--dst-gid", fabric.gid(VICTIM), "--src-gid",
            fabric.gid(MEMBER), "--pkey", hex(view.pkey), "--qpn", hex(view.dqpn), "--psn", hex(view.psn + 1),
            "--mode", "2", "--rate", "100", "--duration", "20"]


def test_a_member_connects_and_carries_a_message_during_a_req_flood(fabric: run.FabricRun) -> None:
    """600 keyless REQs from spoofed GIDs (one attacker MAC) in the default partition, which takes keyless
    requests: the victim holds at most the per-source share half-open and refuses the rest (``cm_limit``);
    once it refuses, the member's sealed mode-2 REQ still gets a QP and its connection carries a message."""
    assert fabric.net is not None
    before = counters(fabric)
    argv = scenario.tool("req_flood", "--iface", fabric.net.host_iface(ATTACKER), "--dst-gid",
                         fabric.gid(VICTIM), "--count", str(FLOOD), "--rate", "200", "--duration", "30")
    flood = fabric.spawn(ATTACKER, argv, f"flood-{ATTACKER}.log")
    scenario.until(lambda: counters(fabric)["drops"]["cm_limit"] > before["drops"]["cm_limit"],
                   "the victim refusing REQs over its limit")
    qpn, remote = scenario.rc_pair(fabric, MEMBER, VICTIM, partition(fabric), echo=False)
    fabric.agents[MEMBER].call("send", qpn=qpn, data="through the flood")
    got = fabric.agents[VICTIM].call("recv", qpn=remote, timeout=10)
    assert got is not None and bytes.fromhex(got["data_hex"]) == b"through the flood"
    scenario.wait_all([flood])
    summary = scenario.flood_summary(fabric, ATTACKER)
    assert summary["sent"] == FLOOD and summary["spoofed"]
    after = counters(fabric)
    refused = after["drops"]["cm_limit"] - before["drops"]["cm_limit"]
    assert 0 < refused <= FLOOD
    assert after["admission"]["keyless"] - before["admission"]["keyless"] <= Limits().half_open_per_source
    assert qp_state(fabric, VICTIM, remote) == "RTS"
    print(f"req_flood: {summary['sent']} sent, {refused} refused cm_limit, "
          f"{after['admission']['keyless'] - before['admission']['keyless']} keyless QPs held")


def test_a_stolen_or_guessed_r_key_writes_nothing_in_a_secured_partition(fabric: run.FabricRun,
                                                                          tmp_path: Path) -> None:
    """The member writes the victim's region; the attacker reads the R_Key and address off the victim's
    cable and writes with them on the member's connection (1 write): it fails the MAC. Then 16 guesses at
    ReDMArk's strides from the stolen R_Key and address: random R_Keys leave each a bad R_Key. Every write
    is counted, the region keeps the member's bytes and the connection stays RTS."""
    part = partition(fabric)
    region = fabric.agents[VICTIM].call("reg_mr", length=64, pkey=part.full_pkey)
    qpn, remote = scenario.rc_pair(fabric, MEMBER, VICTIM, part, echo=False)
    assert fabric.agents[MEMBER].call("write", qpn=qpn, va=region["addr"], rkey=region["rkey"],
                                      data="legit")["acked"]
    assert fabric.wait_delivered(MEMBER, VICTIM, qpn) == (0, "RTS")
    stolen = last_request(fabric, tmp_path, remote, "RC_RDMA_WRITE_ONLY")
    assert stolen.reth is not None and stolen.reth[:2] == (region["addr"], region["rkey"])
    drops = counters(fabric)["drops"]
    common = impersonating(fabric, stolen)
    stolen_write = fabric.run_tool(ATTACKER, scenario.tool(
        "rkey_guess", *common, "--rkey", hex(region["rkey"]), "--va", hex(region["addr"] + 8),
        "--count", "1"))
    guessed = fabric.run_tool(ATTACKER, scenario.tool(
        "rkey_guess", *common, "--rkey", hex(region["rkey"] + 0x100), "--rkey-stride", "0x100",
        "--va", hex(region["addr"] + 4096), "--va-stride", "4096", "--count", "16"))
    assert stolen_write[-1]["sent"] == 1 and guessed[-1]["sent"] == 16
    scenario.until(lambda: sum(counters(fabric)["drops"].values()) >= sum(drops.values()) + 17,
                   "17 forged writes dropped")
    assert moved(drops, counters(fabric)["drops"]) == {"mac_failure": 1, "bad_rkey": 16}
    memory = bytes.fromhex(fabric.agents[VICTIM].call("read_mr", rkey=region["rkey"])["data_hex"])
    assert memory == b"legit" + bytes(59)
    assert qp_state(fabric, VICTIM, remote) == "RTS"


def test_forged_packets_leave_the_connection_running(fabric: run.FabricRun, tmp_path: Path) -> None:
    """qp_error's six kinds (three fatal NAKs, a bad PSN, an opcode out of sequence, a bad R_Key) into the
    member's live connection, as a sniffer of the victim's cable learns it: all six dropped and counted,
    neither QP leaves RTS, and the next real message is delivered."""
    qpn, remote = scenario.rc_pair(fabric, MEMBER, VICTIM, partition(fabric), echo=False)
    fabric.agents[MEMBER].call("send", qpn=qpn, data="before")
    assert fabric.agents[VICTIM].call("recv", qpn=remote, timeout=10) is not None
    assert fabric.wait_delivered(MEMBER, VICTIM, qpn) == (0, "RTS")  # nothing left to retransmit
    view = last_request(fabric, tmp_path, remote, "RC_SEND_ONLY")
    drops = counters(fabric)["drops"]
    result = fabric.run_tool(ATTACKER, scenario.tool("qp_error", *impersonating(fabric, view)))[-1]
    assert result["sent"] == len(result["kinds"]) == 6
    scenario.until(lambda: sum(counters(fabric)["drops"].values()) == sum(drops.values()) + 6,
                   "six forged packets dropped")
    assert (qp_state(fabric, VICTIM, remote), qp_state(fabric, MEMBER, qpn)) == ("RTS", "RTS")
    fabric.agents[MEMBER].call("send", qpn=qpn, data="after")
    got = fabric.agents[VICTIM].call("recv", qpn=remote, timeout=10)
    assert got is not None and bytes.fromhex(got["data_hex"]) == b"after"
    print("qp_error drops:", moved(drops, counters(fabric)["drops"]))


CONNECTIONS = 8
FIELDS = ("qpn", "psn", "rkey", "va")


def test_predict_guesses_nothing_from_the_victims_capture(fabric: run.FabricRun, tmp_path: Path) -> None:
    """Eight more connections of the member to the victim, a region and an RDMA WRITE each, then the
    predict tool (16 guesses a value) on the capture of the victim's port: it sees every connection's QPN,
    starting PSN, R_Key and address, and guesses none of them."""
    part = partition(fabric)
    for i in range(CONNECTIONS):
        region = fabric.agents[VICTIM].call("reg_mr", length=64, pkey=part.full_pkey)
        qpn, _ = scenario.rc_pair(fabric, MEMBER, VICTIM, part, echo=False)
        assert fabric.agents[MEMBER].call("write", qpn=qpn, va=region["addr"], rkey=region["rkey"],
                                          data=f"w{i}")["acked"]
    scenario.until(lambda: observed(fabric, tmp_path)["qpn"]["observed"] >= CONNECTIONS,
                   "every connection in the capture")
    fields = observed(fabric, tmp_path)
    for name in FIELDS:
        assert fields[name]["observed"] >= CONNECTIONS and fields[name]["tries"] >= CONNECTIONS - 2, name
        assert fields[name]["hits"] == 0, name
    print("predict (observed, tries, hits):",
          {name: (fields[name]["observed"], fields[name]["tries"], fields[name]["hits"]) for name in FIELDS})


def observed(fabric: run.FabricRun, tmp_path: Path) -> dict[str, dict[str, Any]]:
    """predict's verdict, from the attacker host, on the member's requests in the victim's capture. The
    tool tells targets apart by destination GID, which carries the switches' mark of the path: the
    member's requests are the victim's target with the most QPNs; the attacker's forgeries (the earlier
    tests' strided guesses among them) came by another path and are a target of their own."""
    argv = scenario.tool("predict", "--pcap", str(received(fabric, tmp_path)), "--window", "16")
    lines = fabric.run_tool(ATTACKER, argv)
    mine = [line for line in lines if addressing.mf_clear(line["target"]) == fabric.gid(VICTIM)]
    assert mine
    best: dict[str, dict[str, Any]] = max(mine, key=lambda line: line["qpn"]["observed"])
    return best
