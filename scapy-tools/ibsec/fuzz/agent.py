"""``python -m ibsec.fuzz agent``: the host agent's hostile-input suite.

Three hosts on a bridge in network namespaces (``labs.agent_lab``): a peer agent, the victim agent, and
the fuzzer, whose GID is the victim's SM (so authentic vendor MADs reach it too). In order:

1. traffic between peer and victim in every mode, key scope and service, both ways (CM sealed and plain,
   SENDs of one and of several packets, RDMA WRITEs to plain, authenticated and extended-protection
   regions, UD, DREQ/DREP), captured on the victim's cable: the corpus (the victim's own frames reflected
   at it as well), plus frames built for every BTH opcode, every CM attribute and the vendor attributes;
2. ``--frames`` mutated frames (:mod:`ibsec.fuzz.mutate`) from the fuzzer's port, in batches, each waited
   for on the victim's control socket (nothing lost in a socket buffer, and the socket answers throughout);
3. hostile control requests (unfit numbers, deep nesting, wrong types, oversized lines);
4. a member connects and sends: the victim still works;
5. the victim restarts and the peer's captured frames are replayed at it: nothing may be delivered.

Checks: the victim never stops, no internal error, every frame counted once (rx_frames = drops + taken),
every frame sent reached it, no traceback and no ERROR line in any log. Exit status 0 when all hold.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import random
import socket
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ibsec import cmwire, icrc, keys, layers, mad_auth, opcodes, rocev2
from ibsec.builder import Builder, gid_bytes, mac_of
from ibsec.cmwire import IBSEC_SERVICE_ID
from ibsec.control import ControlClient
from ibsec.polling import poll_until
from labs.agent_lab import SECURE_PKEY, Agent, AgentLab, Host, Provisioned, provision, start_agents

from ..agent.cm import SCOPES, request_key
from ..agent.keyring import Keyring, MissingKey
from ..attacks.forging import forged
from .mutate import MAD_AT, Mutator
from .report import Summary, progress

TRAFFIC = ((0, "partition"), (1, "session"), (2, "session"), (2, "partition"), (3, "derived"), (4, "session"))
WAIT = 120.0  # seconds a batch may take to reach the victim
VICTIM_ARGS = ("--half-open-timeout", "2", "--trap-window", "1")


@dataclass
class Lab:
    fabric: AgentLab
    prov: Provisioned
    peer: Agent
    victim: Agent
    fuzzer: Host
    sock: socket.socket

    @property
    def victim_mac(self) -> bytes:
        return mac_of(self.victim.host.gid)

    @property
    def fuzzer_mac(self) -> bytes:
        return mac_of(self.fuzzer.gid)

    def send(self, frame: bytes) -> bool:
        """Put a frame on the fuzzer's port; False if the kernel refuses it (too short, too long)."""
        try:
            self.sock.send(frame)
        except OSError:
            return False
        return True

    def counters(self) -> dict[str, Any]:
        return self.victim.call("counters")  # type: ignore[no-any-return]

    def received(self) -> int:
        return int(self.counters()["stats"].get("rx_frames", 0))

    def wait_received(self, count: int) -> bool:
        """Wait until the victim has received ``count`` frames in all; False if it stops receiving."""
        return bool(poll_until(lambda: self.received() >= count, WAIT, interval=0.02))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m ibsec.fuzz agent",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--frames", type=int, default=100_000, help="mutated frames to send (1..10^7)")
    parser.add_argument("--batch", type=int, default=400, help="frames between two waits for the victim")
    parser.add_argument("--control", type=int, default=300, help="hostile control requests")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--run-dir", type=Path, help="default: runs/<UTC>-fuzz-agent")
    parser.add_argument("--report", type=Path, help="also write the summary here (JSON)")
    args = parser.parse_args(argv)
    if not 1 <= args.frames <= 10_000_000 or not 1 <= args.batch <= 10_000 or not 0 <= args.control <= 10**5:
        parser.error("--frames 1..10^7, --batch 1..10^4, --control 0..10^5")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    run_dir = args.run_dir or Path("runs") / f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-fuzz-agent"
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    summary = Summary("agent", args.seed)
    rng = random.Random(args.seed)
    fabric = AgentLab.create(run_dir, 3)
    try:
        lab = _start(fabric)
        progress(f"fuzz agent: lab up in {run_dir}; capturing traffic in every mode")
        corpus, captured = _corpus(lab, rng)
        mutator = Mutator(rng, corpus, _resealer(lab), (lab.fuzzer_mac,))
        _fuzz(lab, mutator, args, summary)
        _control(lab, rng, args.control, summary)
        _still_works(lab, summary)
        summary.counters = lab.counters()
        _restart(lab, captured, summary)
        summary.scan_logs(sorted((run_dir / "logs").glob("*.log")))
    finally:
        fabric.close()
    return summary.print(args.report)


# ---- the lab and the corpus ---------------------------------------------------------------------------


def _start(fabric: AgentLab) -> Lab:
    peer_host, victim_host, fuzzer = fabric.hosts
    prov = provision(fabric, [peer_host, victim_host])
    peer, victim = start_agents(fabric, [peer_host, victim_host], prov, fuzzer, *VICTIM_ARGS)
    sock = fuzzer.raw_socket()
    return Lab(fabric, prov, peer, victim, fuzzer, sock)


def _corpus(lab: Lab, rng: random.Random) -> tuple[list[bytes], list[bytes]]:
    """(corpus, the peer's frames to the victim) from traffic in every mode, plus built frames."""
    seen = _capture(lab.victim.host, lambda: _traffic(lab))
    victim_mac = lab.victim_mac
    to_victim = [f for f in seen if f[rocev2.DST_MAC_AT] == victim_mac]
    captured = [f for f in to_victim if f[rocev2.SRC_MAC_AT] == mac_of(lab.peer.host.gid)]
    reflected = [_reflect(f, lab) for f in seen if f[rocev2.SRC_MAC_AT] == victim_mac and len(f) > 70]
    built = _built(lab, rng)
    corpus = [f for f in to_victim + reflected + built if f]
    progress(
        f"fuzz agent: corpus of {len(corpus)} frames ({len(captured)} captured from the peer, "
        f"{len(reflected)} reflected, {len(built)} built)"
    )
    return corpus, captured


def _capture(host: Host, during: Any) -> list[bytes]:
    """Every frame on ``host``'s cable while ``during()`` runs."""
    sock = host.raw_socket()
    sock.settimeout(0.1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
    frames: list[bytes] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                frames.append(sock.recv(65536))
            except TimeoutError:
                continue

    reader = threading.Thread(target=read)
    reader.start()
    try:
        during()
        time.sleep(0.5)
    finally:
        stop.set()
        reader.join()
        sock.close()
    return frames


def _traffic(lab: Lab) -> None:
    peer, victim = lab.peer, lab.victim
    rc_qpns = []
    for mode, scope in TRAFFIC:
        qp = peer.call("connect", remote_gid=victim.host.gid, pkey=SECURE_PKEY, mode=mode, scope=scope)
        rc_qpns.append(qp["qpn"])
        peer.call("send", qpn=qp["qpn"], data=f"mode {mode}")
        peer.call("send", qpn=qp["qpn"], size=9000)  # three packets: FIRST, MIDDLE, LAST
        access = "authenticated" if mode in (1, 2, 3) else "any"
        region = victim.call(
            "reg_mr", length=4096, pkey=SECURE_PKEY, access=access, ext_depth=1 if mode else None
        )
        memory_key = victim.call("mr_key", rkey=region["rkey"])["key_hex"] if mode else None
        peer.call(
            "write",
            qpn=qp["qpn"],
            va=region["addr"] + 16,
            rkey=region["rkey"],
            data="w" * 40,
            memory_key_hex=memory_key,
        )
        back = victim.call("connect", remote_gid=peer.host.gid, pkey=SECURE_PKEY, mode=mode, scope=scope)
        victim.call("send", qpn=back["qpn"], data="back")
        ud = peer.call(
            "connect", remote_gid=victim.host.gid, service="UD", pkey=SECURE_PKEY, mode=mode, scope=scope
        )
        dest = ud["peers"][0]
        peer.call("send", qpn=ud["qpn"], data="datagram", dest_gid=dest["gid"], dest_qpn=dest["qpn"])
    peer.call("disconnect", qpn=rc_qpns[0])
    peer.call("disconnect", qpn=rc_qpns[2])


def _reflect(frame: bytes, lab: Lab) -> bytes:
    """A frame the victim sent, turned back at it as if its peer had sent it (from the fuzzer's port)."""
    out = bytearray(frame)
    out[rocev2.DST_MAC_AT], out[rocev2.SRC_MAC_AT] = lab.victim_mac, lab.fuzzer_mac
    out[rocev2.SRC_GID_AT], out[rocev2.DST_GID_AT] = frame[rocev2.DST_GID_AT], frame[rocev2.SRC_GID_AT]
    try:
        return icrc.with_icrc(bytes(out))
    except rocev2.WireError:
        return b""


def _built(lab: Lab, rng: random.Random) -> list[bytes]:
    """Frames no traffic shows: every BTH opcode, every CM attribute (plain and sealed) and the vendor
    MADs the SM sends, and MADs of classes the agent does not serve."""
    victim = lab.victim.host.gid
    builder = Builder(lab.fuzzer_mac, gid_bytes(lab.peer.host.gid))
    qpns = [q["qpn"] for q in lab.victim.call("qps")] or [2]
    frames = []
    for op in opcodes.OPCODES.values():
        ext: dict[str, Any] = {}
        headers = set(op.headers)
        if opcodes.Ext.DETH in headers:
            ext["deth"] = (rng.getrandbits(32), rng.choice(qpns))
        if opcodes.Ext.RETH in headers:
            ext["reth"] = (rng.getrandbits(64), rng.getrandbits(32), 16)
        if opcodes.Ext.AETH in headers:
            ext["aeth"] = (rng.choice((0, 0x20 | 20, 0x60)), rng.getrandbits(24))
        for mode in range(5):
            frames.append(
                forged(
                    builder,
                    mode,
                    victim,
                    op.name,
                    rng.choice((0xFFFF, SECURE_PKEY)),
                    rng.choice(qpns),
                    rng.getrandbits(24),
                    rng.randbytes(16),
                    **ext,
                )
            )
    ring = _keyring(lab, 0)
    for attr in [*cmwire.FIELDS, 0x11, 0x19, 0x1A]:
        fields = cmwire.FIELDS.get(attr, {})
        message = cmwire.Message(
            attr,
            rng.getrandbits(64),
            service_id=IBSEC_SERVICE_ID | rng.randrange(3),
            qpn=rng.choice(qpns),
            pkey=SECURE_PKEY,
            private=cmwire.pack_private(2, os.urandom(12), os.urandom(64)),
        )
        mad = cmwire.write(message) if fields else _mad(layers.MgmtClass.CM, attr)
        key = request_key(ring, 2, SCOPES[message.service_id & 0xFF], SECURE_PKEY, victim)
        for payload in (mad, mad_auth.seal(key or os.urandom(16), mad, lab.peer.host.gid)):
            frames.append(
                builder.mad_frame(victim, rng.choice((0xFFFF, SECURE_PKEY)), payload, lab.victim_mac)
            )
    sm = Builder(lab.fuzzer_mac, gid_bytes(lab.fuzzer.gid))
    for body in (_key_distribution(lab), _pkey_table()):
        frames.append(sm.mad_frame(victim, 0xFFFF, _sealed_vendor(lab, body), lab.victim_mac))
    frames.append(
        sm.mad_frame(victim, 0xFFFF, _sealed_vendor(lab, layers.Raw(bytes(232)), 0x7777), lab.victim_mac)
    )
    for klass in (layers.MgmtClass.SUBN_LID, layers.MgmtClass.PERF, layers.MgmtClass.SUBN_ADM, 0x42):
        frames.append(sm.mad_frame(victim, 0xFFFF, _mad(klass, rng.getrandbits(16)), lab.victim_mac))
    return frames


def _mad(klass: int, attr: int) -> bytes:
    """An empty 256-byte MAD of class ``klass`` and attribute ``attr``."""
    return bytes(layers.MAD(mgmt_class=klass, method=layers.Method.GET, attribute_id=attr))[: layers.MAD_LEN]


def _keyring(lab: Lab, index: int) -> Keyring:
    host = lab.fabric.hosts[index]
    ring = Keyring(int(ipaddress.IPv6Address(host.gid)) & ((1 << 64) - 1))
    ring.load(lab.prov.key_files[index])
    return ring


def _key_distribution(lab: Lab) -> Any:
    p_sk = keys.Key.generate(keys.KeyType.P_SK, (0x8042,))
    return layers.KeyDistribution(
        key_type=keys.KeyType.P_SK,
        owners=[0x8042],
        pkey=0x8042,
        wrapped_key=keys.wrap_key(lab.prov.ca_keys[1], p_sk),
    )


def _pkey_table() -> Any:
    return layers.PKeyTable(pkeys=[0xFFFF, SECURE_PKEY], secmodes=[0, 0])


_TID = [time.time_ns()]


def _fresh_tid() -> int:
    _TID[0] += 1
    return _TID[0]


def _sealed_vendor(lab: Lab, body: Any, attr: int | None = None) -> bytes:
    """A vendor MAD from the SM (the fuzzer's GID) to the victim, sealed under its CA key, fresh TID."""
    if attr is None:
        attr = next(a for a, layer in layers.VENDOR_LAYERS.items() if isinstance(body, layer))
    mad = (
        layers.MAD(
            mgmt_class=layers.MgmtClass.IBSEC_VENDOR,
            method=layers.Method.SET,
            attribute_id=attr,
            transaction_id=_fresh_tid(),
        )
        / body
    )
    return mad_auth.seal(lab.prov.ca_keys[1].material, bytes(mad)[: layers.MAD_LEN], lab.fuzzer.gid)


def _resealer(lab: Lab) -> Any:
    """Seal a mutated MAD frame's trailer again, where the fuzzer holds the key the victim will check:
    vendor MADs from the SM (its CA key, a fresh TID) and CM requests from the peer (the request key)."""
    ring, fuzzer_gid, peer_gid = _keyring(lab, 0), gid_bytes(lab.fuzzer.gid), gid_bytes(lab.peer.host.gid)
    victim = lab.victim.host.gid

    def reseal(frame: bytes) -> bytes | None:
        sender, mad = frame[rocev2.SRC_GID_AT], bytearray(frame[MAD_AT : MAD_AT + layers.MAD_LEN])
        if mad[1] == layers.MgmtClass.IBSEC_VENDOR and sender == fuzzer_gid:
            mad[8:16] = _fresh_tid().to_bytes(8, "big")
            key: bytes | None = lab.prov.ca_keys[1].material
        elif mad[1] == layers.MgmtClass.CM and sender == peer_gid:
            message = cmwire.read(bytes(mad))
            if message is None or message.attr not in (layers.CmAttr.REQ, layers.CmAttr.SIDR_REQ):
                return None
            scope = SCOPES.get(message.service_id & 0xFF)
            try:
                key = (
                    request_key(ring, cmwire.private(message.private).mode, scope, message.pkey, victim)
                    if scope is not None
                    else None
                )
            except MissingKey:
                return None
        else:
            return None
        if key is None:
            return None
        return frame[:MAD_AT] + mad_auth.seal(key, bytes(mad), sender) + frame[-4:]

    return reseal


# ---- the phases ------------------------------------------------------------------------------------------


def _fuzz(lab: Lab, mutator: Mutator, args: argparse.Namespace, summary: Summary) -> None:
    expected = lab.received()
    sm = Builder(lab.fuzzer_mac, gid_bytes(lab.fuzzer.gid))
    answered = unanswered = 0
    next_report = time.monotonic() + 10
    while summary.frames < args.frames:
        for _ in range(min(args.batch, args.frames - summary.frames)):
            name, frame = mutator.mutate()
            summary.frames += 1
            summary.by_operator[name] += 1
            if lab.send(frame):
                expected += 1
            else:
                summary.unsent += 1
        # the SM's real P_Key table again, so mutated (authentic) tables do not starve later batches
        expected += lab.send(
            sm.mad_frame(lab.victim.host.gid, 0xFFFF, _sealed_vendor(lab, _pkey_table()), lab.victim_mac)
        )
        if lab.victim.process.poll() is not None or not lab.wait_received(expected):
            unanswered += 1
            break
        answered += 1
        if time.monotonic() >= next_report:
            next_report = time.monotonic() + 10
            progress(f"fuzz agent: {summary.frames}/{args.frames} frames")
    lab.wait_received(expected)
    summary.extra["batches_answered"] = answered
    summary.check(
        "the victim runs and took every batch",
        unanswered == 0 and lab.victim.process.poll() is None,
        f"{answered} batches answered on the control socket, {unanswered} not",
    )
    counters = _quiet(lab)
    stats = counters["stats"]
    total = sum(counters["drops"].values()) + sum(counters["taken"].values())
    summary.check(
        "no internal error", stats.get("internal_errors", 0) == 0, f"{stats.get('internal_errors', 0)}"
    )
    summary.check(
        "every frame counted once (rx_frames = drops + taken)",
        stats["rx_frames"] == total,
        f"rx_frames {stats['rx_frames']}, drops + taken {total}",
    )
    summary.check(
        "every frame sent reached the victim",
        stats["rx_frames"] >= expected,
        f"{stats['rx_frames']} received of {expected} sent since start ({summary.unsent} refused "
        "by the kernel: too short or too long)",
    )


def _quiet(lab: Lab) -> dict[str, Any]:
    """The victim's counters once nothing is in flight (two equal readings)."""
    last = lab.counters()
    for _ in range(100):
        time.sleep(0.1)
        now = lab.counters()
        if now["stats"]["rx_frames"] == last["stats"]["rx_frames"]:
            return now
        last = now
    return last


def _control(lab: Lab, rng: random.Random, count: int, summary: Summary) -> None:
    """Hostile control requests: every one answered, none an internal error."""
    bad = 0
    with ControlClient(lab.victim.control_path, timeout=30) as client:
        for _ in range(count):
            try:
                reply = json.loads(client.raw(_hostile_request(rng)))
                bad += not reply.get("ok") and str(reply.get("error", "")).startswith("internal error")
            except ValueError:
                bad += 1
    summary.extra["control_requests"] = count
    summary.check(
        "the control socket answered every hostile request without an internal error",
        bad == 0,
        f"{count} requests, {bad} bad answers",
    )


UNFIT = (
    "Infinity",
    "-Infinity",
    "NaN",
    "1e999",
    "-1",
    "1" + "0" * 60,
    "9" * 5000,
    "0.5",
    "true",
    "null",
    '"x"',
    "[]",
    "{}",
    '"0x1000000"',
    "16777216",
    "4294967296",
)
COMMANDS = (
    '"ping"',
    '"info"',
    '"counters"',
    '"qps"',
    '"mrs"',
    '"recv", "qpn": 1, "timeout": 0',
    '"read_mr", "rkey": 7',
    '"mr_key", "rkey": 7',
    '"alloc_pd"',
    '"listen", "pkey": 65535, "pd": 32767',
    '"create_qp", "service": "UD"',
    '"send", "qpn": 1, "data": "x"',
)


def _hostile_request(rng: random.Random) -> bytes:
    """One request line: a command with a field of an unfit value, deep nesting, junk or a huge line."""
    roll = rng.random()
    command = rng.choice(COMMANDS)
    if roll < 0.6:
        name = rng.choice(("qpn", "timeout", "pkey", "length", "rkey", "offset", "pd", "echo", "data", "x"))
        return f'{{"cmd": {command}, "{name}": {rng.choice(UNFIT)}}}'.encode()
    if roll < 0.75:
        depth = rng.choice((17, 100, 10_000, 100_000))
        return f'{{"cmd": {command}, "x": '.encode() + b"[" * depth + b"]" * depth + b"}"
    if roll < 0.9:
        return rng.randbytes(rng.randint(0, 200)).replace(b"\n", b" ")
    return b'{"cmd": "ping", "pad": "' + b"x" * (5 << 20) + b'"}'


def _still_works(lab: Lab, summary: Summary) -> None:
    """A member connects to the victim and sends after the storm."""
    try:
        qp = lab.peer.call(
            "connect", remote_gid=lab.victim.host.gid, pkey=SECURE_PKEY, mode=2, scope="session"
        )
        lab.peer.call("send", qpn=qp["qpn"], data="after the storm")
        got = lab.victim.call("recv", qpn=qp["remote_qpn"], timeout=10)
        ok = got is not None and bytes.fromhex(got["data_hex"]) == b"after the storm"
    except Exception as exc:  # noqa: BLE001  (reported as the check's detail)
        ok, got = False, exc
    summary.check("a member connects and sends after the fuzzing", ok, "delivered" if ok else repr(got))


def _restart(lab: Lab, captured: list[bytes], summary: Summary) -> None:
    """Restart the victim and replay what its peer sent it before: nothing may be delivered."""
    victim = lab.victim
    victim.process.terminate()
    victim.process.wait(timeout=30)
    lab.victim = lab.fabric.start_agent(
        victim.host,
        "--keys",
        str(lab.prov.key_files[1]),
        "--pkeys",
        str(lab.prov.pkey_file),
        "--sm-gid",
        lab.fuzzer.gid,
        *VICTIM_ARGS,
    )
    sent = 0
    for frame in captured:
        # from the attacker's own port
        sent += lab.send(lab.victim_mac + lab.fuzzer_mac + frame[rocev2.ETHERTYPE_AT.start:])
    lab.wait_received(sent)
    counters = _quiet(lab)
    delivered = counters["taken"]["data"]
    summary.extra["restart"] = {
        "replayed": sent,
        "delivered": delivered,
        "drops": {k: v for k, v in counters["drops"].items() if v},
        "taken": {k: v for k, v in counters["taken"].items() if v},
    }
    summary.check(
        "frames captured before a restart deliver nothing after it",
        delivered == 0 and sent > 0,
        f"{sent} replayed, {delivered} delivered, {counters['stats'].get('rx_messages', 0)} messages, "
        f"{counters['stats'].get('rdma_write_bytes', 0)} bytes written",
    )
