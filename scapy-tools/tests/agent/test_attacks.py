"""The attack tools against two agents, with a stand-in SM and an attacker host (a Linux bridge joins them).

Sniffing tools tap the victim's cable (they run in its namespace, on its interface, and see both
directions); injecting tools run on the attacker host and spoof GIDs, not MACs (the bridge would otherwise
re-learn the victim's MAC on the attacker's port). Each test asserts on what the victim delivered, its
drop counters, and the traps the stand-in SM received and could (or could not) verify.
"""

from __future__ import annotations

import ipaddress
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from ibsec import layers
from ibsec.agent.admission import Limits
from ibsec.rocev2 import View
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from labs.agent_lab import SECURE_PKEY, Agent, AgentLab, Host, provision, rc_pair, start_agents

from .helpers import EFFECT_TIMEOUT, STOP_MARGIN, StandInSM, Tap, Trap, attack, wait_for

TRAP_WINDOW = "60"
THRESHOLD = 16


@dataclass
class Scene:
    fabric: AgentLab
    a: Agent  # the victim of most attacks
    b: Agent  # its peer; the attacker taps b's cable
    sm: StandInSM
    tap: Host  # b's cable: where the eavesdropper listens
    attacker: Host  # a host of its own: where forged frames come from


@pytest.fixture(scope="module")
def scene(module_fabric: Callable[[int], AgentLab]) -> Scene:
    fabric = module_fabric(4)
    h0, h1, h2, h3 = fabric.hosts
    prov = provision(fabric, [h0, h1])
    a, b = start_agents(
        fabric, [h0, h1], prov, h2, "--trap-window", TRAP_WINDOW, "--mac-failure-threshold", str(THRESHOLD)
    )
    sm = StandInSM(h2, {h0.gid: prov.ca_keys[0], h1.gid: prov.ca_keys[1]})
    return Scene(fabric, a, b, sm, h1, h3)


def drops(agent: Agent, reason: str) -> int:
    return agent.counters()["drops"][reason]


def retransmissions(agent: Agent) -> int:
    return int(agent.counters()["stats"].get("retransmissions", 0))


def generic(number: int) -> Callable[[Trap], bool]:
    """Selects the standard traps with ``number`` (257 bad P_Key, 258 bad Q_Key)."""
    return lambda trap: bool(trap.notice.is_generic) and trap.notice.trap_number == number


def capture(host: Host, opcode: str, during: Callable[[], object]) -> tuple[bytes, View]:
    """The first frame with ``opcode`` that crosses ``host``'s cable while ``during`` runs."""
    tap = Tap(host)
    try:
        during()
        for frame, view in tap.frames(EFFECT_TIMEOUT, until=lambda view: view.opcode_name == opcode):
            if view.opcode_name == opcode:
                return frame, view
    finally:
        tap.close()
    raise AssertionError(f"no {opcode} frame seen")


def impersonating(scene: Scene, view: View) -> list[str]:
    """Tool arguments that copy a captured request of a to b: target, claimed source, P_Key, QPN."""
    return ["--dst-gid", scene.b.host.gid, "--src-gid", scene.a.host.gid, "--pkey", hex(view.pkey),
            "--qpn", hex(view.dqpn)]


def test_eavesdropper_reads_mode_0_payloads_and_nothing_of_modes_1_and_2(scene: Scene) -> None:
    out = scene.fabric.run_dir / "eavesdrop.out"
    argv = [sys.executable, "-m", "ibsec.attacks.eavesdrop", "--iface", scene.tap.iface, "--duration", "10",
            "--count", "100000"]
    sniffer = scene.fabric.spawn(scene.tap, argv, out.name)
    plain_qp, _ = rc_pair(scene.a, scene.b, 0)

    def sniffer_sees(text: str) -> bool:
        scene.a.call("send", qpn=plain_qp, data=text)
        return text in out.read_text()

    assert wait_for(lambda: sniffer_sees("probe"))  # the sniffer is up
    secrets = {mode: f"SECRET-of-mode-{mode}" for mode in (0, 1, 2)}
    for mode, secret in secrets.items():
        qpn, _ = rc_pair(scene.a, scene.b, mode, "session")
        scene.a.call("send", qpn=qpn, data=secret)
    assert wait_for(lambda: sniffer_sees("last"))  # and has seen everything before it
    sniffer.terminate()
    sniffer.wait(timeout=5)
    learnt = [json.loads(line) for line in out.read_text().splitlines() if line.startswith("{")]
    assert secrets[0] in " ".join(entry.get("payload", "") for entry in learnt)
    assert secrets[1] not in out.read_text() and secrets[2] not in out.read_text()
    assert any(e.get("pkey") == f"{SECURE_PKEY:#06x}" for e in learnt)  # the P_Key itself is always visible
    assert any(e.get("wrapped_session_key") for e in learnt)  # the CM shows only a wrapped key


@pytest.mark.parametrize("mode", [0, 2])
def test_forged_rdma_write_with_captured_keys_lands_only_without_a_mac(scene: Scene, mode: int) -> None:
    region = scene.b.call("reg_mr", length=64, pkey=SECURE_PKEY)
    qpn, _ = rc_pair(scene.a, scene.b, mode)
    _, view = capture(scene.tap, "RC_RDMA_WRITE_ONLY", lambda: scene.a.call(
        "write", qpn=qpn, va=region["addr"], rkey=region["rkey"], data="legit"))
    failures = drops(scene.b, "mac_failure")
    attack(scene.fabric, scene.attacker, "forge", *impersonating(scene, view), "--rkey", hex(region["rkey"]),
           "--va", hex(region["addr"] + 8), "--psn", hex(view.psn + 1), "--mode", str(mode),
           "--data", "FORGED")
    wait_for(lambda: drops(scene.b, "mac_failure") > failures or b"FORGED" in _memory(scene.b, region))
    memory = _memory(scene.b, region)
    if mode == 0:
        assert memory[8:14] == b"FORGED"  # ReDMArk's impersonation works where nothing is authenticated
    else:
        assert b"FORGED" not in memory and memory[:5] == b"legit"
        assert drops(scene.b, "mac_failure") == failures + 1


@pytest.mark.parametrize("mode", [0, 2])
def test_replayed_frames_are_rejected_counted_and_never_delivered(scene: Scene, mode: int) -> None:
    qpn, remote = rc_pair(scene.a, scene.b, mode, "session" if mode else "partition")
    replays, resent = drops(scene.b, "replay"), retransmissions(scene.a)
    frame, _ = capture(scene.tap, "RC_SEND_ONLY", lambda: scene.a.call("send", qpn=qpn, data="pay me once"))
    assert scene.b.call("recv", qpn=remote, timeout=5)["data_hex"] == b"pay me once".hex()
    # an ACK late on a loaded machine makes a send the message again, and b drop that copy as a replay
    # too: count those once a has every packet acknowledged (it resends nothing after that)
    assert wait_for(lambda: all(q["unacked"] == 0 for q in scene.a.call("qps")))
    replays += retransmissions(scene.a) - resent
    pcap = scene.fabric.run_dir / f"captured-{mode}.pcap"
    wrpcap(str(pcap), [Ether(frame)])
    replay = ["--dst-gid", scene.b.host.gid, "--pcap", str(pcap)]
    assert attack(scene.fabric, scene.attacker, "replay", *replay, "--count", "5")[-1]["sent"] == 5
    assert wait_for(lambda: drops(scene.b, "replay") == replays + 5)
    attack(scene.fabric, scene.attacker, "replay", *replay, "--count", "1", "--flip", str(len(frame) - 10),
           "--fix-icrc")  # a modified copy: same PSN, so it is still a replay
    assert wait_for(lambda: drops(scene.b, "replay") == replays + 6)
    assert scene.b.call("recv", qpn=remote, timeout=0.5) is None  # no copy reached the application


def test_tag_brute_force_raises_one_authenticated_security_trap(scene: Scene) -> None:
    qpn, remote = rc_pair(scene.a, scene.b, 1)
    _, view = capture(scene.tap, "RC_SEND_ONLY", lambda: scene.a.call("send", qpn=qpn, data="known"))
    failures = drops(scene.b, "mac_failure")
    tries = 3 * THRESHOLD
    result = attack(scene.fabric, scene.attacker, "tag_brute", *impersonating(scene, view), "--psn",
                    hex(view.psn + 1), "--count", str(tries))
    assert result[-1]["tags_tried"] == tries
    assert wait_for(lambda: drops(scene.b, "mac_failure") == failures + tries)
    traps = scene.sm.traps(lambda t: not t.notice.is_generic  # not the agents' port-up notices
                           and t.notice.device_id == layers.IBSEC_TRAP_SECURITY)
    assert len(traps) == 1 and traps[0].authentic and traps[0].sender == scene.b.host.gid
    details = traps[0].notice.data_details
    assert details.qp == remote and details.mac_failures == THRESHOLD and details.peer_gid == scene.a.host.gid
    assert scene.b.call("recv", qpn=remote, timeout=5)["data_hex"] == b"known".hex()  # the real one only
    scene.a.call("send", qpn=qpn, data="still works")
    assert scene.b.call("recv", qpn=remote, timeout=5)["data_hex"] == b"still works".hex()


def test_invalid_pkey_flood_gives_one_authenticated_trap_257_per_window(scene: Scene) -> None:
    victim, attacker = scene.a, scene.attacker
    before = drops(victim, "bad_pkey")
    flood = ["--dst-gid", victim.host.gid, "--pkey", "0x7bad"]
    result = attack(scene.fabric, attacker, "pkey_flood", *flood, "--count", "300", "--mf", "0x2a5")
    assert result[-1]["sent"] == 300
    assert wait_for(lambda: drops(victim, "bad_pkey") == before + 300)
    traps = scene.sm.traps(generic(257))
    assert len(traps) == 1
    trap = traps[0]
    assert trap.authentic and trap.sender == victim.host.gid
    details = trap.notice.data_details
    assert details.key == 0x7BAD and details.gid1 == attacker.gid and details.gid2 == victim.host.gid
    assert (
        trap.notice.mf == 0x2A5 and trap.notice.recv_port == 1 and trap.notice.issuer_gid == victim.host.gid
    )
    assert victim.counters()["stats"]["traps_suppressed"] >= 299

    innocent = scene.sm.host.gid
    spoofed = attack(scene.fabric, attacker, "pkey_flood", *flood, "--count", "50", "--src-gid", innocent)
    assert spoofed[-1]["sent"] == 50
    traps = scene.sm.traps(generic(257))
    assert (
        len(traps) == 1 and traps[0].notice.data_details.gid1 == scene.sm.host.gid
    )  # the trap believes the lie


def test_flood_rate_and_duration_bound_the_tool(scene: Scene) -> None:
    """Bounds, not rates reached: a tool starved of CPU sends fewer frames, never more than its rate allows
    over the time it ran, and stops once its duration is up (test_units checks the pacing exactly, with a
    clock of its own)."""
    rate, duration = 400, 0.5
    result = attack(scene.fabric, scene.attacker, "pkey_flood", "--dst-gid", scene.a.host.gid, "--pkey",
                    "0x7bad", "--count", "1000000", "--rate", str(rate), "--duration", str(duration))[-1]
    assert 0 < result["sent"] <= rate * duration  # never more than asked
    assert result["sent"] <= rate * result["seconds"] + 1  # never ahead of its rate
    assert duration <= result["seconds"] <= duration + STOP_MARGIN  # its duration ended it, not its count


def resolve_ud(scene: Scene, mode: int) -> tuple[list[str], int]:
    """A UD path from a to b in ``mode``, one real datagram captured: the spoofing arguments that copy
    it (a's GID and QPN, b's QPN, P_Key, the next PSN) and b's Q_Key, as a sniffer learns them."""
    qp = scene.a.call("connect", remote_gid=scene.b.host.gid, service="UD", pkey=SECURE_PKEY, mode=mode)
    peer = qp["peers"][0]
    _, view = capture(scene.tap, "UD_SEND_ONLY", lambda: scene.a.call(
        "send", qpn=qp["qpn"], data="real", dest_gid=peer["gid"], dest_qpn=peer["qpn"]))
    assert scene.b.call("recv", qpn=peer["qpn"], timeout=5)["data_hex"] == b"real".hex()
    args = ["--src-gid", scene.a.host.gid, "--src-qpn", str(qp["qpn"]), "--dst-gid", scene.b.host.gid,
            "--dst-qpn", str(peer["qpn"]), "--pkey", hex(SECURE_PKEY), "--psn", hex(view.psn + 1)]
    assert view.deth is not None
    return args, view.deth[0]


def test_spoofed_datagrams_are_believed_in_mode_0_only_and_a_bad_qkey_raises_trap_258(scene: Scene) -> None:
    spoof, qkey = resolve_ud(scene, 0)
    victim_qpn = int(spoof[spoof.index("--dst-qpn") + 1])
    attack(scene.fabric, scene.attacker, "spoof", *spoof, "--qkey", hex(qkey), "--data", "I am h0",
           "--count", "1")
    got = scene.b.call("recv", qpn=victim_qpn, timeout=5)  # mode 0: the spoofed datagram is believed
    assert bytes.fromhex(got["data_hex"]) == b"I am h0" and got["src_gid"] == scene.a.host.gid

    bad_qkeys = drops(scene.b, "bad_qkey")
    attack(scene.fabric, scene.attacker, "spoof", *spoof, "--qkey", hex(qkey ^ 0x55), "--count", "1")
    assert wait_for(lambda: drops(scene.b, "bad_qkey") == bad_qkeys + 1)
    traps = scene.sm.traps(generic(258))
    assert len(traps) == 1 and traps[0].authentic
    assert traps[0].notice.data_details.key == qkey ^ 0x55
    assert scene.b.call("recv", qpn=victim_qpn, timeout=0.3) is None

    spoof, qkey = resolve_ud(scene, 2)
    victim_qpn = int(spoof[spoof.index("--dst-qpn") + 1])
    failures = drops(scene.b, "mac_failure")
    attack(scene.fabric, scene.attacker, "spoof", *spoof, "--qkey", hex(qkey), "--mode", "2", "--count", "3")
    assert wait_for(lambda: drops(scene.b, "mac_failure") == failures + 3)
    assert scene.b.call("recv", qpn=victim_qpn, timeout=0.3) is None


def test_forged_traps_fail_authentication_at_the_sm(scene: Scene) -> None:
    innocent = scene.b.host
    attack(scene.fabric, scene.attacker, "forge_trap", "--sm-gid", scene.sm.host.gid, "--victim-gid",
           scene.a.host.gid, "--accused-gid", innocent.gid, "--mf", "0x15")
    forged = scene.sm.traps(lambda t: bool(t.notice.is_generic))
    assert len(forged) == 1 and forged[0].sender == scene.a.host.gid and not forged[0].authentic
    assert str(ipaddress.IPv6Address(forged[0].notice.data_details.gid1)) == innocent.gid

    result = attack(
        scene.fabric, scene.attacker, "trap_flood", "--sm-gid", scene.sm.host.gid, "--count", "200"
    )
    assert result[-1]["sent"] == 200
    flood = scene.sm.traps(lambda t: t.notice.is_generic, at_least=150)  # not the agents' port-up notices
    assert len(flood) >= 150 and not any(t.authentic for t in flood)
    assert all(t.notice.trap_number == layers.TRAP_BAD_PKEY for t in flood)


def _memory(agent: Agent, region: dict[str, int]) -> bytes:
    return bytes.fromhex(agent.call("read_mr", rkey=region["rkey"])["data_hex"])


def handshake(scene: Scene, mode: int) -> tuple[int, int, Any]:
    """An RC connection a -> b in ``mode`` and the REP seen on b's cable (its comm ids are in the clear)."""
    tap = Tap(scene.tap)
    try:
        qpn, remote = rc_pair(scene.a, scene.b, mode, "session" if mode else "partition")
        seen = [Ether(frame) for frame, view in tap.frames(0.5) if view.dqpn == layers.GSI_QPN]
        rep = next(packet[layers.CmRep] for packet in seen if layers.CmRep in packet)
    finally:
        tap.close()
    return qpn, remote, rep


@pytest.mark.parametrize("mode", [0, 1, 2, 4])
def test_a_forged_dreq_with_sniffed_comm_ids_ends_only_a_keyless_connection(scene: Scene, mode: int) -> None:
    qpn, remote, rep = handshake(scene, mode)
    before = drops(scene.b, "bad_auth")
    ids = ["--local-comm-id", hex(rep.remote_comm_id), "--remote-comm-id", hex(rep.local_comm_id)]
    attack(scene.fabric, scene.attacker, "forge_dreq", "--dst-gid", scene.b.host.gid, "--src-gid",
           scene.a.host.gid, *ids, "--pkey", hex(SECURE_PKEY), "--count", "3")

    def alive() -> bool:
        return any(q["qpn"] == remote for q in scene.b.call("qps"))

    if mode == 0:  # no key, no way to tell the forger from the peer: IBA's DREQ works
        assert wait_for(lambda: not alive())
        return
    assert wait_for(lambda: drops(scene.b, "bad_auth") == before + 3) and alive()
    scene.a.call("send", qpn=qpn, data="still connected")
    assert scene.b.call("recv", qpn=remote, timeout=5)["data_hex"] == b"still connected".hex()


def test_a_forged_dreq_learnt_by_sniffing_the_rep_leaves_the_requester_connected(scene: Scene) -> None:
    out = scene.fabric.run_dir / "forge_dreq.out"
    argv = [sys.executable, "-m", "ibsec.attacks.forge_dreq", "--iface", scene.tap.iface, "--dst-gid",
            scene.a.host.gid, "--sniff", "20", "--count", "2"]
    tool = scene.fabric.spawn(scene.tap, argv, out.name)
    assert wait_for(lambda: "sniffing" in out.read_text(), timeout=20)
    before = drops(scene.a, "bad_auth")
    qpn, remote = rc_pair(scene.a, scene.b, 2, "session")
    assert tool.wait(timeout=30) == 0
    assert json.loads(out.read_text().splitlines()[-1])["sent"] == 2
    assert wait_for(lambda: drops(scene.a, "bad_auth") == before + 2)
    scene.b.call("send", qpn=remote, data="both ends alive")
    assert scene.a.call("recv", qpn=qpn, timeout=5)["data_hex"] == b"both ends alive".hex()


def test_qp_error_tool_leaves_a_secured_connection_running(scene: Scene) -> None:
    """ReDMArk's one-packet DoS, by the tool from the attacker host into a live mode-2 connection (QPN and
    next PSN as a sniffer of b's cable learns them): every packet dropped and counted, b's QP stays RTS
    and the connection carries the next message."""
    qpn, remote = rc_pair(scene.a, scene.b, 2, "session")
    _, view = capture(scene.tap, "RC_SEND_ONLY", lambda: scene.a.call("send", qpn=qpn, data="before"))
    assert scene.b.call("recv", qpn=remote, timeout=5)["data_hex"] == b"before".hex()
    before = sum(scene.b.counters()["drops"].values())
    result = attack(scene.fabric, scene.attacker, "qp_error", *impersonating(scene, view), "--psn",
                    hex(view.psn + 1), "--mode", "2")[-1]
    assert result["sent"] == len(result["kinds"]) == 6
    assert wait_for(lambda: sum(scene.b.counters()["drops"].values()) == before + 6)
    assert next(q for q in scene.b.call("qps") if q["qpn"] == remote)["state"] == "RTS"
    scene.a.call("send", qpn=qpn, data="after")
    assert scene.b.call("recv", qpn=remote, timeout=5)["data_hex"] == b"after".hex()


def test_predict_tool_on_a_capture_of_real_connections_guesses_nothing(scene: Scene) -> None:
    """Eight connections of a to b with a region and a WRITE each, captured on b's cable into a pcap: the
    tool sees all eight and none of its guesses (16 a value) is right."""
    tap = Tap(scene.tap)
    try:
        for i in range(8):
            region = scene.b.call("reg_mr", length=64, pkey=SECURE_PKEY)
            qpn, _ = rc_pair(scene.a, scene.b, 0)
            written = scene.a.call("write", qpn=qpn, va=region["addr"], rkey=region["rkey"], data=f"w{i}")
            assert written["acked"]
        frames = [frame for frame, _ in tap.frames(0.5)]
    finally:
        tap.close()
    pcap = scene.fabric.run_dir / "connections.pcap"
    wrpcap(str(pcap), [Ether(frame) for frame in frames])
    tool = [sys.executable, "-m", "ibsec.attacks.predict", "--pcap", str(pcap), "--dst-gid", scene.b.host.gid]
    done = scene.fabric.run(scene.attacker, tool)
    assert done.returncode == 0, done.stderr
    line = json.loads(done.stdout.splitlines()[-1])
    for name in ("qpn", "psn", "rkey", "va"):
        assert line[name]["observed"] >= 8 and line[name]["hits"] == 0


def test_req_flood_tool_is_held_to_the_per_source_share(scene: Scene) -> None:
    """200 keyless REQs from spoofed GIDs, by the tool from the attacker host: all leave one MAC, so b
    accepts at most the per-source half-open share and refuses the rest (``cm_limit``); a connects after."""
    refused, qps = drops(scene.b, "cm_limit"), len(scene.b.call("qps"))
    result = attack(scene.fabric, scene.attacker, "req_flood", "--dst-gid", scene.b.host.gid,
                    "--count", "200")
    assert result[-1]["sent"] == 200 and result[-1]["spoofed"]
    share = Limits().half_open_per_source
    assert wait_for(lambda: drops(scene.b, "cm_limit") == refused + 200 - share)
    assert len(scene.b.call("qps")) <= qps + share
    qpn, remote = rc_pair(scene.a, scene.b, 2, "session")
    scene.a.call("send", qpn=qpn, data="after the flood")
    assert scene.b.call("recv", qpn=remote, timeout=5)["data_hex"] == b"after the flood".hex()
