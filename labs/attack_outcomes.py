"""Measured outcome of every attack tool, and of the attacks of issue 14, against live agents.

Four hosts on a bridge (``labs.agent_lab``): agents on a and b (b is the victim of most attacks), a stand-in
SM that sniffs its cable and checks each trap's tag with the CA keys, and an attacker. Each scenario runs
the tool (``python -m ibsec.attacks.TOOL``) or the frames of the attack and reads what happened off the
victim's counters, memory, QPs and the SM's cable. One line per scenario, then a Markdown table (what
docs/security.md embeds) and one JSON line.

The agents are those of the checkout on ``PYTHONPATH``; the tools always come from the tree this file is in
(``--tools``), so one script measures before and after a change::

    python -m labs.attack_outcomes                                           # this tree
    PYTHONPATH=/path/to/old/scapy-tools python -m labs.attack_outcomes   # another tree's agents

Only APIs both trees have are used (absolute imports, no ``taken`` counters), so it runs against either.
Needs root (network namespaces).
"""

from __future__ import annotations

import argparse
import functools
import ipaddress
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ibsec import layers, mad_auth, rocev2
from ibsec.builder import Builder, gid_bytes
from ibsec.control import ControlClient
from ibsec.polling import poll_until
from ibsec.rocev2 import View, parse
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from labs.agent_lab import SECURE_PKEY, Agent, AgentLab, Host, Provisioned, provision, rc_pair, start_agents

TOOLS = Path(__file__).resolve().parents[1] / "scapy-tools"  # of this tree
Row = dict[str, str]


class Lab:
    """a, b (victim), the stand-in SM host and the attacker host, with what the scenarios need."""

    def __init__(self, fabric: AgentLab, tools: Path) -> None:
        self.fabric, self.tools = fabric, tools
        self.ha, self.hb, self.hsm, self.hx = fabric.hosts
        self.prov: Provisioned = provision(fabric, [self.ha, self.hb])
        self.agent_args = ("--trap-window", "60", "--mac-failure-threshold", "16")
        self.a, self.b = start_agents(fabric, [self.ha, self.hb], self.prov, self.hsm, *self.agent_args)
        self.ca_keys = {self.ha.gid: self.prov.ca_keys[0], self.hb.gid: self.prov.ca_keys[1]}

    def tool(self, host: Host, name: str, *args: str) -> list[dict[str, Any]]:
        env = {**os.environ, "PYTHONPATH": f"{self.tools}:{os.environ.get('PYTHONPATH', '')}"}
        done = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                host.ns,
                sys.executable,
                "-m",
                f"ibsec.attacks.{name}",
                "--iface",
                host.iface,
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        if done.returncode:
            raise RuntimeError(f"{name}: {done.stderr.strip()[-500:]}")
        return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]

    def stat(self, agent: Agent, name: str) -> int:
        counters = agent.counters()
        return int(counters["stats"].get(name, counters["drops"].get(name, 0)))

    def restart_b(self) -> None:
        self.b.process.terminate()
        self.b.process.wait(timeout=30)
        self.b = self.fabric.start_agent(
            self.hb,
            "--keys",
            str(self.prov.key_files[1]),
            "--pkeys",
            str(self.prov.pkey_file),
            "--sm-gid",
            self.hsm.gid,
            *self.agent_args,
        )


def as_a(lab: Lab, view: View) -> tuple[str, ...]:
    """The arguments that address a tool's frames as a's on the connection a sniffed frame of it shows."""
    address = ("--dst-gid", lab.hb.gid, "--src-gid", lab.ha.gid)
    return (*address, "--pkey", hex(view.pkey), "--qpn", hex(view.dqpn))


def sniff(host: Host, during: Callable[[], object], settle: float = 0.7) -> list[tuple[bytes, View]]:
    """Every RoCEv2 frame on ``host``'s cable while ``during`` runs (and ``settle`` seconds after)."""
    sock = host.raw_socket()
    sock.settimeout(0.1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
    seen: list[tuple[bytes, View]] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                frame = sock.recv(65536)
            except TimeoutError:
                continue
            try:
                view = parse(frame)
            except ValueError:
                continue
            if view is not None:
                seen.append((frame, view))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        during()
        time.sleep(settle)
    finally:
        stop.set()
        reader.join()
        sock.close()
    return seen


def first(seen: list[tuple[bytes, View]], opcode: str) -> tuple[bytes, View]:
    return next((f, v) for f, v in seen if v.opcode_name == opcode)


def traps(lab: Lab, during: Callable[[], object]) -> list[tuple[Any, bool]]:
    """(Notice, authentic) of each trap reaching the SM's cable while ``during`` runs."""
    found = []
    for frame, view in sniff(lab.hsm, during):
        packet = Ether(frame)
        notice = packet.getlayer(layers.Notice)
        if notice is None or view.dst_gid != gid_bytes(lab.hsm.gid):
            continue
        key = lab.ca_keys.get(str(ipaddress.IPv6Address(view.src_gid)))
        try:
            authentic = key is not None and mad_auth.verify_packet(key.material, packet) is not None
        except mad_auth.MadAuthError:
            authentic = False
        found.append((notice, authentic))
    return found


def settle(agent: Agent, stat: str, before: int, timeout: float = 10.0) -> int:
    """The statistic once it stops moving (or ``timeout``): how many frames a scenario added to it."""
    deadline, last = time.monotonic() + timeout, -1
    while time.monotonic() < deadline:
        now = int(agent.counters()["stats"].get(stat, agent.counters()["drops"].get(stat, 0)))
        if now == last:
            return now - before
        last = now
        time.sleep(0.3)
    return last - before


# ---- the tools ---------------------------------------------------------------------------------------------


def in_modes_0_and_2(attack: Callable[[Lab, int], Row]) -> Callable[[Lab], list[Row]]:
    """The scenario run against mode 0 (no protection) and mode 2 (AES-GCM under a secure transport
    header), a row each: what the attack gets through unprotected, and what the protection stops."""

    @functools.wraps(attack)
    def both(lab: Lab) -> list[Row]:
        return [attack(lab, mode) for mode in (0, 2)]

    return both


def eavesdrop(lab: Lab) -> Row:
    out = lab.fabric.run_dir / "eavesdrop.out"
    argv = [
        sys.executable,
        "-m",
        "ibsec.attacks.eavesdrop",
        "--iface",
        lab.hb.iface,
        "--duration",
        "20",
        "--count",
        "100000",
    ]
    env = f"PYTHONPATH={lab.tools}:{os.environ.get('PYTHONPATH', '')}"
    sniffer = lab.fabric.spawn(lab.hb, ["env", env, *argv], out.name)
    time.sleep(3)
    for mode in range(5):
        qpn, _ = rc_pair(lab.a, lab.b, mode, "session")
        lab.a.call("send", qpn=qpn, data=f"SECRET-{mode}")
    time.sleep(1.5)
    sniffer.terminate()
    sniffer.wait(timeout=10)
    text = out.read_text()
    readable = [str(m) for m in range(5) if f"SECRET-{m}" in text]
    return row(
        "eavesdrop",
        "a secret sent in each mode 0-4, a sniffer on the receiver's cable",
        f"readable in modes {', '.join(readable) or 'none'}",
    )


@in_modes_0_and_2
def forge(lab: Lab, mode: int) -> Row:
    region = lab.b.call("reg_mr", length=64, pkey=SECURE_PKEY)
    qpn, _ = rc_pair(lab.a, lab.b, mode)

    def write() -> None:
        lab.a.call("write", qpn=qpn, va=region["addr"], rkey=region["rkey"], data="legit")

    _, view = first(sniff(lab.hb, write), "RC_RDMA_WRITE_ONLY")
    failures = lab.stat(lab.b, "mac_failure")
    lab.tool(
        lab.hx,
        "forge",
        *as_a(lab, view),
        "--rkey",
        hex(region["rkey"]),
        "--va",
        hex(region["addr"] + 8),
        "--psn",
        hex(view.psn + 1),
        "--mode",
        str(mode),
        "--data",
        "FORGED",
    )
    time.sleep(1)
    landed = bytes.fromhex(lab.b.call("read_mr", rkey=region["rkey"])["data_hex"])[8:14] == b"FORGED"
    return row(
        "forge",
        f"RDMA WRITE with the captured P_Key, QPN, R_Key and next PSN, mode {mode}",
        f"{'6 bytes landed' if landed else 'nothing landed'}, "
        f"{lab.stat(lab.b, 'mac_failure') - failures} mac_failure",
    )


@in_modes_0_and_2
def replay(lab: Lab, mode: int) -> Row:
    qpn, remote = rc_pair(lab.a, lab.b, mode, "session" if mode else "partition")

    def send() -> None:
        lab.a.call("send", qpn=qpn, data="pay me once")

    frame, _ = first(sniff(lab.hb, send), "RC_SEND_ONLY")
    lab.b.call("recv", qpn=remote, timeout=5)
    pcap = lab.fabric.run_dir / f"replay-{mode}.pcap"
    wrpcap(str(pcap), [Ether(frame)])
    messages = lab.stat(lab.b, "rx_messages")
    lab.tool(lab.hx, "replay", "--dst-gid", lab.hb.gid, "--pcap", str(pcap), "--count", "5")
    delivered = settle(lab.b, "rx_messages", messages)
    return row("replay", f"5 copies of a captured SEND, mode {mode}", f"{delivered} of 5 delivered")


@in_modes_0_and_2
def spoof(lab: Lab, mode: int) -> Row:
    qp = lab.a.call("connect", remote_gid=lab.hb.gid, service="UD", pkey=SECURE_PKEY, mode=mode)
    peer = qp["peers"][0]

    def send() -> None:
        lab.a.call("send", qpn=qp["qpn"], data="real", dest_gid=peer["gid"], dest_qpn=peer["qpn"])

    _, view = first(sniff(lab.hb, send), "UD_SEND_ONLY")
    lab.b.call("recv", qpn=peer["qpn"], timeout=5)
    assert view.deth is not None
    messages = lab.stat(lab.b, "rx_messages")
    lab.tool(
        lab.hx,
        "spoof",
        "--src-gid",
        lab.ha.gid,
        "--src-qpn",
        str(qp["qpn"]),
        "--dst-gid",
        lab.hb.gid,
        "--dst-qpn",
        str(peer["qpn"]),
        "--pkey",
        hex(SECURE_PKEY),
        "--psn",
        hex(view.psn + 1),
        "--qkey",
        hex(view.deth[0]),
        "--mode",
        str(mode),
        "--count",
        "3",
    )
    delivered = settle(lab.b, "rx_messages", messages)
    return row(
        "spoof",
        f"3 UD SENDs claiming a's GID and QPN with the captured Q_Key, mode {mode}",
        f"{delivered} of 3 delivered as a's",
    )


def tag_brute(lab: Lab) -> Row:
    qpn, remote = rc_pair(lab.a, lab.b, 1)
    seen = sniff(lab.hb, lambda: lab.a.call("send", qpn=qpn, data="known"))
    _, view = first(seen, "RC_SEND_ONLY")
    failures = lab.stat(lab.b, "mac_failure")
    found = traps(
        lab,
        lambda: lab.tool(
            lab.hx,
            "tag_brute",
            *as_a(lab, view),
            "--psn",
            hex(view.psn + 1),
            "--count",
            "48",
        ),
    )
    security = [t for t in found if not t[0].is_generic]
    lab.a.call("send", qpn=qpn, data="still works")
    works = lab.b.call("recv", qpn=remote, timeout=5) is not None  # the real "known" message first
    works = works and lab.b.call("recv", qpn=remote, timeout=5) is not None
    return row(
        "tag_brute",
        "48 forged mode-1 tags at the next PSN",
        f"{lab.stat(lab.b, 'mac_failure') - failures} mac_failure, {sum(a for _, a in security)} "
        f"authentic security trap(s) at the SM, connection {'still works' if works else 'broken'}",
    )


def pkey_flood(lab: Lab) -> Row:
    before = lab.stat(lab.b, "bad_pkey")
    found = traps(
        lab,
        lambda: lab.tool(lab.hx, "pkey_flood", "--dst-gid", lab.hb.gid, "--pkey", "0x7bad", "--count", "300"),
    )
    trap257 = [t for t in found if t[0].is_generic and t[0].trap_number == 257]
    return row(
        "pkey_flood",
        "300 UD SENDs with P_Key 0x7bad",
        f"{settle(lab.b, 'bad_pkey', before)} bad_pkey, {sum(a for _, a in trap257)} authentic trap 257 "
        "at the SM (SIF then filters the port: topologies tests)",
    )


def forged_traps(lab: Lab) -> list[Row]:
    one = traps(
        lab,
        lambda: lab.tool(
            lab.hx,
            "forge_trap",
            "--sm-gid",
            lab.hsm.gid,
            "--victim-gid",
            lab.ha.gid,
            "--accused-gid",
            lab.hb.gid,
            "--mf",
            "0x15",
        ),
    )
    many = traps(lab, lambda: lab.tool(lab.hx, "trap_flood", "--sm-gid", lab.hsm.gid, "--count", "200"))
    return [
        row(
            "forge_trap",
            "trap 257 claiming a, accusing b",
            f"{len(one)} at the SM, {sum(a for _, a in one)} authentic",
        ),
        row(
            "trap_flood",
            "200 traps at the SM",
            f"{len(many)} seen at the SM, {sum(a for _, a in many)} authentic",
        ),
    ]


@in_modes_0_and_2
def forge_dreq(lab: Lab, mode: int) -> Row:
    made: list[tuple[int, int]] = []

    def connect() -> None:
        made.append(rc_pair(lab.a, lab.b, mode, "session" if mode else "partition"))

    seen = sniff(lab.hb, connect)
    rep = next(Ether(f)[layers.CmRep] for f, v in seen if v.dqpn == 1 and layers.CmRep in Ether(f))
    lab.tool(
        lab.hx,
        "forge_dreq",
        "--dst-gid",
        lab.hb.gid,
        "--src-gid",
        lab.ha.gid,
        "--local-comm-id",
        hex(rep.remote_comm_id),
        "--remote-comm-id",
        hex(rep.local_comm_id),
        "--pkey",
        hex(SECURE_PKEY),
        "--count",
        "3",
    )
    time.sleep(1)
    alive = any(q["qpn"] == made[0][1] for q in lab.b.call("qps"))
    return row(
        "forge_dreq",
        f"3 DREQs with the comm ids of a sniffed REP, mode {mode}",
        "connection survives" if alive else "connection destroyed",
    )


# ---- the attacks of issue 14 without a tool --------------------------------------------------------------


def odd_gid(rng: random.Random) -> str:
    """A GID whose GUID is not a MAC-derived EUI-64."""
    while True:
        guid = rng.getrandbits(64)
        if (guid >> 24) & 0xFFFF != 0xFFFE:
            return str(ipaddress.IPv6Address((0xFEC0 << 112) | (1 << 64) | guid))


def hostile_cm(lab: Lab) -> Row:
    rng, errors = random.Random(1), lab.stat(lab.b, "internal_errors")
    qps = len(lab.b.call("qps"))
    sock = lab.hx.raw_socket()
    try:
        for _ in range(40):
            builder = Builder(sock.getsockname()[4], gid_bytes(odd_gid(rng)))
            for attr, body in (
                (
                    layers.CmAttr.REQ,
                    layers.CmReq(
                        local_comm_id=rng.getrandbits(32),
                        service_id=0x1B5EC00000000000,
                        local_qpn=0x1234,
                        private_data=layers.IbsecPrivateData(n0=bytes(12)),
                    ),
                ),
                (layers.CmAttr.DREQ, layers.CmDreq(local_comm_id=1, remote_comm_id=2)),
            ):
                mad = (
                    layers.MAD(mgmt_class=layers.MgmtClass.CM, method=layers.Method.SEND, attribute_id=attr)
                    / body
                )
                sock.send(builder.mad_frame(lab.hb.gid, 0xFFFF, bytes(mad)[: layers.MAD_LEN]))
    finally:
        sock.close()
    time.sleep(12)  # longer than the agent's half-open timeout
    return row(
        "(issue 14, 1)",
        "40 CM REQs and 40 DREQs from GIDs that are not MAC-derived",
        f"{lab.stat(lab.b, 'internal_errors') - errors} internal errors, "
        f"{len(lab.b.call('qps')) - qps} QPs left 12 s later",
    )


def restart_replay(lab: Lab) -> Row:
    lab.restart_b()  # a fresh incarnation, as after a reboot: its QPs are the first it makes

    def traffic() -> None:
        qpn, _ = rc_pair(lab.a, lab.b, 2, "session")
        for i in range(3):
            lab.a.call("send", qpn=qpn, data=f"before the restart {i}")

    seen = sniff(lab.hb, traffic)
    mac_b = lab.hb.mac.replace(":", "")
    frames = [
        f for f, v in seen if f[rocev2.DST_MAC_AT].hex() == mac_b and v.src_gid == gid_bytes(lab.ha.gid)
    ]
    lab.restart_b()
    sock = lab.hx.raw_socket()
    try:
        for frame in frames:
            sock.send(frame[rocev2.DST_MAC_AT] + sock.getsockname()[4] + frame[rocev2.ETHERTYPE_AT.start :])
    finally:
        sock.close()
    delivered = settle(lab.b, "rx_messages", 0)
    return row(
        "(issue 14, 2)",
        f"the {len(frames)} frames a sent b (REQ, RTU, 3 SENDs, mode 2) replayed after b restarted",
        f"{delivered} of 3 messages delivered",
    )


def sniffed_rkey(lab: Lab) -> Row:
    region = lab.b.call("reg_mr", length=64, pkey=SECURE_PKEY, access="authenticated")
    qpn, _ = rc_pair(lab.a, lab.b, 2, "session")
    seen = sniff(
        lab.hb, lambda: lab.a.call("write", qpn=qpn, va=region["addr"], rkey=region["rkey"], data="ok")
    )
    _, view = first(seen, "RC_RDMA_WRITE_ONLY")
    assert view.reth is not None
    pkeys = lab.fabric.run_dir / "stranger-pkeys.json"
    pkeys.write_text(json.dumps({"partitions": [{"pkey": "0xffff"}]}))
    stranger = lab.fabric.start_agent(lab.hx, "--pkeys", str(pkeys))
    qp = stranger.call("connect", remote_gid=lab.hb.gid, pkey=0xFFFF, mode=0)
    stranger.call("write", qpn=qp["qpn"], va=view.reth[0] + 8, rkey=view.reth[1], data="FORGED", timeout=1)
    time.sleep(1)
    stranger.process.terminate()
    stranger.process.wait(timeout=10)
    landed = bytes.fromhex(lab.b.call("read_mr", rkey=region["rkey"])["data_hex"])[8:14] == b"FORGED"
    return row(
        "(issue 14, 3)",
        "a keyless mode-0 connection in 0xFFFF writes with an R_Key sniffed from a mode-2 WRITE",
        "6 bytes landed" if landed else "nothing landed",
    )


def full_queue(lab: Lab) -> Row:
    qpn, remote = rc_pair(lab.a, lab.b, 2, "session")
    count, errors = 4200, []

    def send() -> None:
        with ControlClient(lab.a.control_path, timeout=120) as client:
            for i in range(count):
                try:
                    client.call("send", qpn=qpn, data=f"{i:05d}")
                except Exception as exc:  # noqa: BLE001  (reported)
                    errors.append(exc)
                    return

    sender = threading.Thread(target=send)
    sender.start()

    def queue_full() -> bool:
        return int(next(q for q in lab.b.call("qps") if q["qpn"] == remote)["queued"]) >= 4096

    poll_until(lambda: not sender.is_alive() or queue_full(), 300, interval=0.5)
    received = 0
    with ControlClient(lab.b.control_path, timeout=120) as client:
        while client.call("recv", qpn=remote, timeout=10) is not None:
            received += 1
    sender.join(timeout=120)
    return row(
        "(issue 14, 4)",
        f"{count} SENDs to a QP whose application reads once its 4,096-message queue is full",
        f"{received} of {count} received, {count - received} lost",
    )


def req_flood(lab: Lab) -> Row:
    rng = random.Random(2)
    sock = lab.hx.raw_socket()
    before = lab.stat(lab.b, "rx_frames")
    try:
        for _ in range(4400):
            builder = Builder(sock.getsockname()[4], gid_bytes(odd_gid(rng)))
            body = layers.CmReq(
                local_comm_id=rng.getrandbits(32),
                service_id=0x1B5EC00000000000,
                local_qpn=rng.randrange(2, 1 << 24),
                private_data=layers.IbsecPrivateData(n0=bytes(12)),
            )
            mad = (
                layers.MAD(
                    mgmt_class=layers.MgmtClass.CM, method=layers.Method.SEND, attribute_id=layers.CmAttr.REQ
                )
                / body
            )
            sock.send(builder.mad_frame(lab.hb.gid, 0xFFFF, bytes(mad)[: layers.MAD_LEN]))
    finally:
        sock.close()
    poll_until(lambda: lab.stat(lab.b, "rx_frames") >= before + 4400, 600, interval=1)
    try:
        rc_pair(lab.a, lab.b, 2, "session")
        outcome = "connects"
    except Exception as exc:  # noqa: BLE001  (the outcome)
        outcome = f"refused ({exc})"
    return row(
        "(issue 14, 5)",
        "4,400 keyless REQs from the attacker's port, then a member connects in mode 2",
        f"the member {outcome}, b holds {len(lab.b.call('qps'))} QPs",
    )


def control_socket(lab: Lab) -> Row:
    lines = [
        b'{"cmd": "fault", "drop_rx": Infinity}',
        b'{"cmd": "reg_mr", "length": 1e999}',
        b'{"cmd": "send", "qpn": 1, "size": 1' + b"0" * 40 + b"}",
        b"[" * 100_000,
        b'{"cmd": "recv", "qpn": ' + b"9" * 400 + b"}",
    ]
    internal = 0
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(str(lab.b.control_path))
        answers = sock.makefile("rb")
        for line in lines:
            sock.sendall(line + b"\n")
            internal += b"internal error" in answers.readline()
    return row(
        "(issue 14, 7)",
        "drop_rx Infinity, length 1e999, size 10^40, 100,000 [, a 400-digit QPN",
        f"{internal} of {len(lines)} answered 'internal error'",
    )


def row(attack: str, scenario: str, outcome: str) -> Row:
    print(f"{attack}: {scenario}: {outcome}", file=sys.stderr, flush=True)
    return {"attack": attack, "scenario": scenario, "outcome": outcome}


SCENARIOS = (
    eavesdrop,
    forge,
    replay,
    spoof,
    tag_brute,
    pkey_flood,
    forged_traps,
    forge_dreq,
    hostile_cm,
    sniffed_rkey,
    full_queue,
    control_socket,
    restart_replay,
    req_flood,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=Path, default=TOOLS, help="the scapy-tools/ directory of the tools")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument(
        "--only", nargs="+", choices=[s.__name__ for s in SCENARIOS], help="these scenarios only"
    )
    args = parser.parse_args(argv)
    run_dir = Path(tempfile.mkdtemp(prefix="ibsec-outcomes-"))
    (run_dir / "logs").mkdir()
    fabric = AgentLab.create(run_dir, 4)
    rows: list[Row] = []
    try:
        lab = Lab(fabric, args.tools)
        for scenario in [s for s in SCENARIOS if not args.only or s.__name__ in args.only]:
            try:
                outcome = scenario(lab)
                rows += outcome if isinstance(outcome, list) else [outcome]
            except Exception as exc:  # noqa: BLE001  (one scenario failing is an outcome too)
                rows.append(row(scenario.__name__, "(scenario failed)", f"{type(exc).__name__}: {exc}"[:200]))
    finally:
        fabric.close()
    print("| attack | scenario | outcome |\n|---|---|---|")
    for r in rows:
        print(f"| `{r['attack']}` | {r['scenario']} | {r['outcome']} |")
    print(json.dumps(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
