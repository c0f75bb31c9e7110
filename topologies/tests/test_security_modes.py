"""Secure transport across the fabric (DESIGN 3, 8): five partitions, one per security mode, on a fat tree
with k=4 and two levels (16 hosts). RC traffic round-trips in every mode; a sniffer on the receiver's
link reads the payload in modes 0, 3 and 4 only; forged, replayed and modified frames are rejected and
counted; brute-forcing a 32-bit tag raises the security trap at the SM."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from functools import partial

import pytest
from ibsec import names

from topologies import network, run, topofile

from . import scenario
from .conftest import launched, needs_root

pytestmark = needs_root
MODES = names.SECURITY_MODES  # partition p<n+1> has mode n
ATTACKER = "h15"
AGENTS = tuple(f"h{i}" for i in range(10))
PAYLOAD_OFFSET = 14 + 40 + 8 + 12 + 16 + 2  # Ethernet, IPv6, UDP, BTH, STH (mode 2), into the ciphertext


@pytest.fixture(scope="module")
def fabric() -> Iterator[run.FabricRun]:
    options = run.RunOptions(fabric="fat-tree", k=4, levels=2, partitions=len(MODES),
                             security=",".join(MODES), agents=AGENTS)
    with launched(options) as fabric_run:
        fabric_run.wait_provisioned(AGENTS)
        yield fabric_run


def pair(fabric: run.FabricRun, mode: int) -> tuple[str, str, topofile.PartitionSpec]:
    part = fabric.partitions[mode]
    assert part.security == MODES[mode]
    return part.members[0], part.members[1], part


def sniffed_text(fabric: run.FabricRun, host: str) -> str:
    return (fabric.run_dir / "logs" / f"sniff-{host}.log").read_text()


def sniffed_send(fabric: run.FabricRun, host: str, qpn: int) -> bool:
    """Whether the sniffer on ``host``'s link has logged a SEND to ``qpn`` (what it learnt from it, or not,
    is then in its output)."""
    for line in sniffed_text(fabric, host).splitlines():
        try:
            frame = json.loads(line)
        except ValueError:  # not a frame's line, or one still being written
            continue
        if frame.get("dqpn") == qpn and "SEND" in str(frame.get("opcode")):
            return True
    return False


def test_traffic_round_trips_in_every_mode_and_a_sniffer_reads_only_the_clear_ones(fabric: run.FabricRun
                                                                                    ) -> None:
    assert fabric.net is not None
    receivers = [pair(fabric, mode)[1] for mode in range(len(MODES))]
    sniffers = [fabric.spawn(b, scenario.tool("eavesdrop", "--iface", fabric.net.host_iface(b), "--count",
                                              "100000", "--duration", "120"), f"sniff-{b}.log")
                for b in receivers]
    for sniffer in sniffers:
        scenario.wait_packet_socket(sniffer)
    secrets = {}
    for mode in range(len(MODES)):
        a, b, part = pair(fabric, mode)
        qpn, remote = scenario.rc_pair(fabric, a, b, part, echo=False)
        secrets[mode] = f"secret-{MODES[mode]}-{os.urandom(4).hex()}"
        fabric.agents[a].call("send", qpn=qpn, data=secrets[mode])
        got = fabric.agents[b].call("recv", qpn=remote, timeout=10)
        assert got is not None and bytes.fromhex(got["data_hex"]).decode() == secrets[mode], MODES[mode]
        scenario.until(partial(sniffed_send, fabric, b, remote), f"the sniffer on {b}'s link at the SEND")
    network.stop_processes(sniffers)  # each frame it learnt is already a line of its output
    for mode, b in enumerate(receivers):
        seen = secrets[mode] in sniffed_text(fabric, b)
        assert seen == (MODES[mode] in ("none", "sth-auth", "sth-hdr")), MODES[mode]
        assert f"{fabric.partitions[mode].full_pkey:#06x}" in sniffed_text(fabric, b)  # keys travel in clear


def forge_argv(fabric: run.FabricRun, a: str, b: str, part: topofile.PartitionSpec, remote_qpn: int,
               region: dict[str, int], psn: int, mode: int) -> list[str]:
    assert fabric.net is not None
    return scenario.tool("forge", "--iface", fabric.net.host_iface(ATTACKER), "--dst-gid", fabric.gid(b),
                         "--src-gid", fabric.gid(a), "--pkey", hex(part.full_pkey), "--qpn", hex(remote_qpn),
                         "--rkey", hex(region["rkey"]), "--va", hex(region["addr"]), "--psn", str(psn),
                         "--mode", str(mode), "--data", "FORGED", "--count", "1")


def drops_of(fabric: run.FabricRun, host: str) -> dict[str, int]:
    drops: dict[str, int] = fabric.agents[host].counters()["drops"]
    return drops


def next_psn(fabric: run.FabricRun, host: str, qpn: int) -> int:
    return int(next(q for q in fabric.agents[host].call("qps") if q["qpn"] == qpn)["next_psn"])


def test_forged_replayed_and_modified_frames_are_rejected_and_counted(fabric: run.FabricRun) -> None:
    assert fabric.net is not None
    a, b, part = pair(fabric, MODES.index("sth-aead"))
    qpn, remote = scenario.rc_pair(fabric, a, b, part, echo=False)
    for i in range(3):
        fabric.agents[a].call("send", qpn=qpn, data=f"message {i}")
        assert fabric.agents[b].call("recv", qpn=remote, timeout=10) is not None
    region = fabric.agents[b].call("reg_mr", length=4096, pkey=part.full_pkey)
    drops = fabric.agents[b].counters()["drops"]
    fabric.run_tool(ATTACKER, forge_argv(fabric, a, b, part, remote, region, next_psn(fabric, a, qpn), 2))
    scenario.until(lambda: drops_of(fabric, b)["mac_failure"] == drops["mac_failure"] + 1,
                   "the forged write counted as a MAC failure")
    after_forge = drops_of(fabric, b)
    memory = fabric.agents[b].call("read_mr", rkey=region["rkey"], length=6)["data_hex"]
    assert bytes.fromhex(memory) == bytes(6)  # the forged write changed nothing

    sent_by_a = fabric.hosts[a]
    capture = fabric.run_dir / "pcaps" / f"{sent_by_a.switch}-{sent_by_a.port}_in.pcap"
    replay = scenario.tool("replay", "--iface", fabric.net.host_iface(ATTACKER), "--dst-gid", fabric.gid(b),
                           "--pcap", str(capture), "--capture", "3", "--count", "3")
    summary = fabric.run_tool(ATTACKER, replay)[-1]
    modified = fabric.run_tool(ATTACKER, [*replay, "--flip", str(PAYLOAD_OFFSET)])[-1]
    assert summary["sent"] == 3 and modified["sent"] == 3
    scenario.until(lambda: sum(drops_of(fabric, b).values()) - sum(after_forge.values()) >= 6,
                   "six copies dropped")
    final = drops_of(fabric, b)
    assert final["replay"] - after_forge["replay"] >= 3  # the unmodified copies: replays, counted
    assert sum(final.values()) - sum(after_forge.values()) == 6  # every copy dropped, each counted once
    assert fabric.agents[b].call("recv", qpn=remote, timeout=0.5) is None  # nothing delivered twice


def test_a_forged_write_lands_when_security_is_off(fabric: run.FabricRun) -> None:
    a, b, part = pair(fabric, MODES.index("none"))
    qpn, remote = scenario.rc_pair(fabric, a, b, part, echo=False)
    fabric.agents[a].call("send", qpn=qpn, data="hello")
    assert fabric.agents[b].call("recv", qpn=remote, timeout=10) is not None
    region = fabric.agents[b].call("reg_mr", length=4096, pkey=part.full_pkey)
    fabric.run_tool(ATTACKER, forge_argv(fabric, a, b, part, remote, region, next_psn(fabric, a, qpn), 0))

    def landed() -> bytes:
        return bytes.fromhex(fabric.agents[b].call("read_mr", rkey=region["rkey"], length=6)["data_hex"])

    scenario.until(lambda: landed() == b"FORGED", "the forged bytes in memory")  # mode 0 stops nothing


def test_tag_brute_force_raises_the_security_trap(fabric: run.FabricRun) -> None:
    assert fabric.net is not None
    a, b, part = pair(fabric, MODES.index("icrc-mac"))
    qpn, remote = scenario.rc_pair(fabric, a, b, part, echo=False)
    fabric.agents[a].call("send", qpn=qpn, data="before")
    assert fabric.agents[b].call("recv", qpn=remote, timeout=10) is not None
    before = fabric.agents[b].counters()["drops"]["mac_failure"]
    started = len(fabric.events())
    argv = scenario.tool("tag_brute", "--iface", fabric.net.host_iface(ATTACKER), "--dst-gid", fabric.gid(b),
                         "--src-gid", fabric.gid(a), "--pkey", hex(part.full_pkey), "--qpn", hex(remote),
                         "--psn", str(next_psn(fabric, a, qpn)), "--count", "48",
                         "--rate", "400")  # paced: BMv2 took in 33 of 48 sent back to back
    assert fabric.run_tool(ATTACKER, argv)[-1]["tags_tried"] == 48

    def security_traps() -> list[dict[str, object]]:
        return [e for e in fabric.events()[started:] if e["event"] == "trap" and e.get("kind") == "security"]

    scenario.until(lambda: bool(security_traps()), "a security trap at the SM")
    assert security_traps()[0]["status"] == "accepted" and security_traps()[0]["victim"] == b
    scenario.until(lambda: drops_of(fabric, b)["mac_failure"] - before == 48, "48 MAC failures counted")
    fabric.agents[a].call("send", qpn=qpn, data="after")  # the real peer still gets through
    got = fabric.agents[b].call("recv", qpn=remote, timeout=10)
    assert got is not None and bytes.fromhex(got["data_hex"]) == b"after", json.dumps(got)
