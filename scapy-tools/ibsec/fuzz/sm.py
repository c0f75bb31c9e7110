"""``python -m ibsec.fuzz.sm``: hostile MADs against a live SM, every frame accounted for (issue 14).

The fabric runs in this process (``labs.sm_fabric``: software switches over real gRPC); the SM is the real
``sm run`` in its own process, distributing keys, with the punt meter opened wide so that every frame a
switch punts reaches it. Frames go in at the switches' host ports as a host would send them, built
from what hosts really send the SM and then mutated with knowledge of their structure:

- ``trap``, ``security``, ``port-up``, ``key-ack``, ``other-mad``: authentic MADs (sealed with the
  sender's CA key, fresh TransactionID) whose fields are set to edge or random values before sealing:
  header (class, method, status, attribute), Notice (generic bit, type, trap number, LIDs, data details,
  GIDs, extension, MF), key ACKs for TransactionIDs the SM really sent or did not;
- ``wire``: an authentic frame with a header field changed after sealing (Ethernet, IPv6 source and
  destination, lengths, UDP port, BTH opcode, P_Key, QP, pad count, DETH, trailer);
- ``bits``, ``cut``: bit flips anywhere, truncated or extended frames; ``replay``: an earlier authentic
  frame again; ``stale``: an authentic trap sent two minutes ago by its TransactionID; ``noise``: random
  bytes.

After each batch the driver waits until the SM has counted every frame the switches punted, asking
``sm status`` over the control socket, while another thread keeps sending it valid and malformed
requests. At the end it checks, and the exit status says (0: all hold):

- every frame is accounted for: punted to the SM, delivered to a host, or dropped by a switch and counted
  in its ``drops`` counter (injected = punted + delivered + dropped);
- every PacketIn is counted once by the SM (``traps`` + ``mads`` = ``packet_ins`` = punted);
- no internal error (SM, control socket, switch) and no traceback in ``sm.log``;
- every control request answered (valid ones ok, malformed ones with an error), none lost.

It prints a summary and one JSON line (``--report`` writes it to a file too). ``main`` takes the options
of every component of the hostile-input suite (``--frames``, ``--seed``, ``--run-dir``, ``--report``), so
``python -m ibsec.fuzz sm`` runs it where that suite lists the SM among its components.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ibsm.topology import Host

from ibsec import addressing, control, keys, layers, mad_auth, names, rocev2
from ibsec.builder import Builder
from ibsec.cliopts import integer
from labs.sm_fabric import InProcessFabric, ca_keys, inprocess_fabric, next_tid, sm_process

EXAMPLE = Path(__file__).resolve().parents[3] / "controller" / "tests" / "data" / "fattree-2x2.json"
MAD_AT = rocev2.MAD_AT
BATCH = 250
COUNT_TIMEOUT = 300.0  # seconds the SM may take to count a batch (a guard: a loaded machine is slow)
KINDS = {"trap": 22, "security": 6, "port-up": 3, "key-ack": 8, "other-mad": 6, "wire": 18, "bits": 12,
         "cut": 8, "replay": 8, "stale": 4, "noise": 5}

# (offset, size) of the fields a mutation picks from, in the 256-byte MAD: common header, then the Notice
# of an SMP (DataDetails split into its words), then a vendor body's first bytes
MAD_FIELDS = [(0, 1), (1, 1), (2, 1), (3, 1), (4, 2), (6, 2), (8, 8), (16, 2), (18, 2), (20, 4)]
NOTICE_FIELDS = [(64, 1), (65, 3), (68, 2), (70, 2), (72, 2), (74, 2), (76, 2), (78, 2), (80, 4), (84, 4),
                 (88, 4), (92, 16), (108, 16), (124, 4), (128, 16), (144, 1), (145, 1), (146, 6)]
BODY_FIELDS = [(24, 1), (25, 1), (26, 2), (28, 4), (32, 16), (96, 40), (24, 64)]
# (offset, size) in the frame, outside the sealed MAD
WIRE_FIELDS = [(0, 6), (6, 6), (12, 2), (14, 4), (18, 2), (20, 1), (21, 1), (22, 16), (38, 16), (54, 2),
               (56, 2), (58, 2), (60, 2), (62, 1), (63, 1), (64, 2), (66, 4), (70, 4), (74, 4), (78, 4),
               (MAD_AT + 256, 12), (MAD_AT + 268, 16), (-4, 4)]


@dataclass
class Report:
    """What was sent, where it went, what the SM made of it, and which checks failed."""

    frames: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    punted: int = 0
    delivered: int = 0
    switch_drops: Counter[str] = field(default_factory=Counter)
    switch_errors: int = 0
    sm: dict[str, Any] = field(default_factory=dict)
    control: Counter[str] = field(default_factory=Counter)
    tracebacks: int = 0
    error_lines: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "frames_per_s": round(self.frames / self.seconds) if self.seconds else 0}


class Mutator:
    """Builds one hostile frame at a time from the topology's hosts and their CA keys."""

    def __init__(self, fab: InProcessFabric, store: keys.KeyStore, rng: random.Random) -> None:
        self.fab = fab
        self.store = store
        self.rng = rng
        self.hosts = list(fab.topo.hosts)
        self.sm_gid = fab.topo.sm_gid
        self.sent: list[tuple[Host, bytes]] = []  # authentic frames, for replays (bounded)
        self.sm_tids: list[int] = []  # TransactionIDs of the SM's key MADs seen at the hosts

    # ---- values ----------------------------------------------------------------------------------------

    def value(self, size: int) -> bytes:
        """An edge value or random bytes, ``size`` bytes long."""
        top = (1 << (8 * size)) - 1
        pick = self.rng.choice((0, 1, top, top - 1, 1 << (8 * size - 1), -1))
        number = self.rng.getrandbits(8 * size) if pick == -1 else pick
        return number.to_bytes(size, "big")

    def gid(self) -> str:
        """A source GID a frame could claim: a host's, the SM's, or anybody's."""
        choice = self.rng.random()
        if choice < 0.5:
            return self.rng.choice(self.hosts).gid
        if choice < 0.7:
            return self.sm_gid
        return addressing.make_gid(self.rng.getrandbits(16), self.rng.getrandbits(64))

    def set(self, data: bytes, offset: int, size: int) -> bytes:
        start = offset % len(data) if offset < 0 else offset
        if start + size > len(data):
            return data
        return data[:start] + self.value(size) + data[start + size:]

    # ---- MADs ------------------------------------------------------------------------------------------

    def notice_mad(self, host: Host, kind: str) -> bytes:
        """A well-formed trap, security trap or port-up notice from ``host`` (fields random but sane)."""
        rng = self.rng
        if kind == "trap":
            # keyword arguments in the order the random values were always drawn (a seed's run is kept)
            notice = layers.bad_key_notice(
                lid=host.lid, gid=host.gid, key=rng.getrandbits(16), src_qp=rng.getrandbits(24),
                dst_qp=rng.choice((1, rng.getrandbits(24))), src_gid=self.gid(),
                trap_number=rng.choice((layers.TRAP_BAD_PKEY, layers.TRAP_BAD_QKEY)), mf=rng.getrandbits(38))
        elif kind == "security":
            details = layers.SecurityTrapDetails(lid=host.lid, qp=rng.getrandbits(24),
                                                 mac_failures=rng.getrandbits(32), peer_gid=self.gid())
            notice = layers.Notice(is_generic=0, device_id=layers.IBSEC_TRAP_SECURITY, issuer_lid=host.lid,
                                   data_details=details, issuer_gid=host.gid, mf=rng.getrandbits(38))
        else:
            notice = layers.Notice(is_generic=0, type=layers.NoticeType.INFO,
                                   device_id=layers.IBSEC_TRAP_PORT_UP, issuer_lid=host.lid,
                                   data_details=layers.PortUpDetails(lid=host.lid,
                                                                     boot_id=rng.getrandbits(64)),
                                   issuer_gid=host.gid)
        return layers.trap_mad(notice, next_tid())

    def key_ack(self) -> bytes:
        """A GetResp of the vendor class, for a TransactionID the SM sent (if any yet) or a random one."""
        tid = self.rng.choice(self.sm_tids) if self.sm_tids and self.rng.random() < 0.7 else next_tid()
        attr = self.rng.choice(list(layers.VendorAttr))
        body = layers.VENDOR_LAYERS[attr]()
        mad = layers.MAD(mgmt_class=layers.MgmtClass.IBSEC_VENDOR, method=layers.Method.GET, r=1,
                         attribute_id=attr, transaction_id=tid) / body
        return bytes(mad)[: layers.MAD_LEN].ljust(layers.MAD_LEN, b"\0")

    def other_mad(self) -> bytes:
        """Any other MAD: a class, method and attribute the SM does not serve, random body."""
        mad = bytearray(os.urandom(layers.MAD_LEN) if self.rng.random() < 0.3 else bytes(layers.MAD_LEN))
        mad[0:4] = bytes((1, self.rng.getrandbits(8), 1, self.rng.getrandbits(8)))
        mad[8:16] = next_tid().to_bytes(8, "big")
        return bytes(mad)

    def mutate_mad(self, mad: bytes, fields: list[tuple[int, int]]) -> bytes:
        for _ in range(self.rng.randint(1, 3)):
            offset, size = self.rng.choice(fields)
            mad = self.set(mad, offset, size)
        return mad

    def seal(self, host: Host, mad: bytes, key: keys.Key | None = None) -> bytes:
        """The frame ``host``'s agent would send: the MAD sealed under its CA key (or ``key``)."""
        builder = Builder(bytes.fromhex(addressing.guid_to_mac(host.guid).replace(":", "")),
                          addressing.parse_gid(host.gid).to_bytes())
        sealed = mad_auth.seal((key or self.store.ca_key(host.guid)).material, mad, host.gid)
        return builder.mad_frame(self.sm_gid, 0xFFFF, sealed)

    def authentic(self, host: Host) -> bytes:
        """An unmutated authentic frame of a random kind, remembered for replays."""
        kind = self.rng.choice(("trap", "security", "port-up"))
        frame = self.seal(host, self.notice_mad(host, kind))
        self.sent.append((host, frame))
        if len(self.sent) > 1000:
            self.sent = self.sent[-500:]
        return frame

    # ---- one frame -------------------------------------------------------------------------------------

    def frame(self, kind: str) -> tuple[Host, bytes]:
        """(host whose port it goes in at, frame) for one frame of ``kind``."""
        host = self.rng.choice(self.hosts)
        if kind in ("trap", "security", "port-up"):
            mad = self.notice_mad(host, kind)
            if self.rng.random() < 0.8:
                mad = self.mutate_mad(mad, MAD_FIELDS + NOTICE_FIELDS * 3)
            frame = self.seal(host, mad)
            self.sent.append((host, frame))
            return host, frame
        if kind == "key-ack":
            mad = self.key_ack()
            if self.rng.random() < 0.5:
                mad = self.mutate_mad(mad, BODY_FIELDS)
            return host, self.seal(host, mad)
        if kind == "other-mad":
            return host, self.seal(host, self.mutate_mad(self.other_mad(), MAD_FIELDS + BODY_FIELDS))
        if kind == "replay" and self.sent:
            return self.rng.choice(self.sent)
        if kind == "stale":
            stale = bytearray(self.notice_mad(host, "trap"))
            stale[8:16] = (time.time_ns() - 120 * 10**9).to_bytes(8, "big")
            return host, self.seal(host, bytes(stale))
        if kind == "noise":
            return host, os.urandom(self.rng.randint(0, 400))
        frame = self.authentic(host)
        if kind == "wire":
            for _ in range(self.rng.randint(1, 2)):
                frame = self.set(frame, *self.rng.choice(WIRE_FIELDS))
        elif kind == "bits":
            data = bytearray(frame)
            for _ in range(self.rng.randint(1, 8)):
                data[self.rng.randrange(len(data))] ^= 1 << self.rng.randrange(8)
            frame = bytes(data)
        else:  # cut
            cut = self.rng.randrange(len(frame))
            frame = frame[:cut] if self.rng.random() < 0.6 else frame + os.urandom(self.rng.randint(1, 300))
        return host, frame


class Tally:
    """Counts, per software switch, what went to the SM and what to hosts, and the switches' drops."""

    def __init__(self, fab: InProcessFabric, mutator: Mutator) -> None:
        self.fab = fab
        self.punted = 0
        self.to_hosts = 0
        self.packet_outs = 0
        self._lock = threading.Lock()
        for device in fab.devices.values():
            device.to_cpu = self._counting(device.to_cpu, "punted")
            process = device.process

            def process_counting(port: int, frame: bytes, process: Callable[[int, bytes], None] = process,
                                 cpu: int | None = device.cpu_port) -> None:
                if port == cpu:  # a PacketOut: the SM sends a host a MAD
                    self._bump("packet_outs")
                process(port, frame)

            device.process = process_counting  # type: ignore[method-assign]
        sm_gid = addressing.parse_gid(fab.topo.sm_gid).to_bytes()

        def host_receives(frame: bytes) -> None:
            self._bump("to_hosts")
            if frame[rocev2.SRC_GID_AT] == sm_gid:  # from the SM: its TIDs make realistic key ACKs
                mutator.sm_tids.append(int.from_bytes(frame[MAD_AT + 8: MAD_AT + 16], "big"))

        for host in fab.topo.hosts:
            fab.attach(host.name, host_receives)

    def _bump(self, name: str) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)

    def _counting(self, sink: Callable[[bytes], None], name: str) -> Callable[[bytes], None]:
        def count(frame: bytes) -> None:
            self._bump(name)
            sink(frame)
        return count

    def drops(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for device in self.fab.devices.values():
            assert device.switch is not None
            for reason in range(1, names.p4_const("DROP_REASONS")):
                packets = device.switch.counter_read(names.DROPS, reason)[1]
                if packets:
                    out[f"reason {reason}"] += packets
        return out


class ControlProbe(threading.Thread):
    """Keeps asking the SM for its status and sending it malformed requests until stopped."""

    BAD = [b"[]", b"null", b"7", b'"status"', b"{", b'{"cmd": 1}', b'{"cmd": "policy", "policy": NaN}',
           b'{"cmd": "status", "x": 1e999}', b"[" * 5000, b"\xff\xfe", b'{"cmd": "reboot"}',
           b'{"cmd": "policy", "policy": "' + b"x" * 70_000 + b'"}',
           b'{"cmd": "status", "n": ' + b"9" * 3000 + b"}"]

    def __init__(self, sock: Path, rng: random.Random) -> None:
        super().__init__(name="control-probe", daemon=True)
        self.sock = sock
        self.rng = rng
        self.counts: Counter[str] = Counter()
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.1):
            self.ask(b'{"cmd": "status"}', good=True)
            bad = self.rng.choice(self.BAD)
            self.ask(bad if self.rng.random() < 0.8 else os.urandom(self.rng.randint(1, 200)), good=False)

    def ask(self, line: bytes, good: bool) -> None:
        try:
            answer = control.call_raw(self.sock, line, timeout=30)
        except (OSError, ValueError) as err:
            self.counts[f"failed: {type(err).__name__}"] += 1
            return
        if answer.get("ok") is good:
            self.counts["answered ok" if good else "answered with an error"] += 1
        else:
            self.counts["wrong answer"] += 1


def _status(sock: Path) -> dict[str, Any]:
    status: dict[str, Any] = control.call(sock, "status", timeout=30)
    return status


def _wait_counted(sock: Path, tally: Tally, deadline: float) -> dict[str, Any]:
    """The SM's status once it has counted every frame the switches punted so far."""
    while True:
        status = _status(sock)
        if status["packet_ins"] >= tally.punted or time.monotonic() > deadline:
            return status
        time.sleep(0.02)


def run(frames: int, seed: int, workdir: Path, progress: Callable[[str], None] = lambda _: None) -> Report:
    """Fuzz a live SM with ``frames`` frames; the report says what happened and which checks failed."""
    rng = random.Random(seed)
    report = Report()
    _log_switches(workdir / "logs" / "switches.log")
    with inprocess_fabric(EXAMPLE, workdir) as fab:
        store = ca_keys(fab.topo)
        mutator = Mutator(fab, store, rng)
        tally = Tally(fab, mutator)
        with sm_process(fab, workdir, store, "--punt-rate", "1000000000", "--punt-burst", "1000000000",
                        "--key-timeout", "0.5"):
            sock = workdir / "sm.sock"
            probe = ControlProbe(sock, random.Random(seed + 1))
            probe.start()
            started = time.monotonic()
            kinds, weights = zip(*KINDS.items(), strict=True)
            status: dict[str, Any] = {}
            try:
                for sent in range(0, frames, BATCH):
                    for kind in rng.choices(kinds, weights, k=min(BATCH, frames - sent)):
                        host, frame = mutator.frame(kind)
                        report.kinds[kind] += 1
                        fab.devices[host.switch].process(host.port, frame)
                    status = _wait_counted(sock, tally, time.monotonic() + COUNT_TIMEOUT)
                    progress(f"{sent + min(BATCH, frames - sent)} frames, SM counted {status['packet_ins']} "
                             f"PacketIns, {time.monotonic() - started:.0f} s")
            finally:
                probe.stop.set()
                probe.join(60)
            report.seconds = round(time.monotonic() - started, 1)
        report.frames = sum(report.kinds.values())
        report.punted, report.switch_drops = tally.punted, tally.drops()
        report.switch_errors = sum(d.switch.stats.get("internal_error", 0) for d in fab.devices.values()
                                   if d.switch is not None)
        report.delivered = tally.to_hosts - tally.packet_outs
        report.sm = {k: status.get(k) for k in ("packet_ins", "traps", "mads", "control", "filters")}
        report.control = probe.counts
        log = (workdir / "logs" / "sm.log").read_text()
        report.tracebacks = log.count("Traceback (most recent call last)")
        report.error_lines = sum(1 for line in log.splitlines() if line.split(" ", 4)[3:4] == ["ERROR"])
    report.failures = _check(report)
    return report


def _log_switches(path: Path) -> None:
    """The in-process switches log (``sw.<name>``) to one file of the run directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s"))
    switches = logging.getLogger("sw")
    switches.handlers[:] = [handler]
    switches.setLevel(logging.INFO)
    switches.propagate = False


def _check(r: Report) -> list[str]:
    failures = []
    dropped = r.frames - r.punted - r.delivered
    if dropped != sum(r.switch_drops.values()):
        failures.append(f"{dropped} frames neither punted nor delivered, but the switches counted "
                        f"{sum(r.switch_drops.values())} drops")
    counted = sum(r.sm["traps"].values()) + sum(r.sm["mads"].values())
    if not r.sm["packet_ins"] == counted == r.punted:
        failures.append(f"switches punted {r.punted}, the SM got {r.sm['packet_ins']} PacketIns and counted "
                        f"{counted} outcomes")
    errors = (r.sm["mads"].get("internal-error", 0) + r.sm["control"].get("internal_errors", 0)
              + r.switch_errors)
    if errors:
        failures.append(f"{errors} internal errors")
    if r.tracebacks or r.error_lines:
        failures.append(f"sm.log: {r.tracebacks} tracebacks, {r.error_lines} ERROR lines")
    lost = {k: v for k, v in r.control.items() if not k.startswith("answered")}
    if lost or not r.control["answered ok"]:
        failures.append(f"control socket: {dict(r.control)}")
    return failures


def summary_text(report: Report) -> str:
    """The human part of the summary: what went in, where it went, what the SM made of it, the checks."""
    sm = report.sm
    lines = [f"== fuzz sm: {report.frames} frames in {report.seconds} s",
             "   kinds: " + ", ".join(f"{k} {v}" for k, v in sorted(report.kinds.items())),
             f"   punted to the SM {report.punted}, delivered to hosts {report.delivered}, dropped by the "
             f"switches {sum(report.switch_drops.values())} ({dict(report.switch_drops)})",
             "   SM traps: " + ", ".join(f"{k} {v}" for k, v in sorted(sm["traps"].items())),
             "   SM other PacketIns: " + ", ".join(f"{k} {v}" for k, v in sorted(sm["mads"].items())),
             "   control socket: " + ", ".join(f"{k} {v}" for k, v in sorted(report.control.items()))]
    lines += [f"   [FAILED] {failure}" for failure in report.failures] or ["   [ok] every check held"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m ibsec.fuzz.sm`` (also the ``sm`` component of ``python -m ibsec.fuzz``): 0 if every check
    held."""
    parser = argparse.ArgumentParser(prog="python -m ibsec.fuzz.sm", description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=integer(1, 10**8), default=100_000, help="frames to send")
    parser.add_argument("--seed", type=integer(0, 2**63), default=1, help="random seed (a run is repeatable)")
    parser.add_argument("--run-dir", type=Path,
                        help="keep the SM's log and events here (default: a temporary directory)")
    parser.add_argument("--report", type=Path, help="also write the summary here (JSON)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ibsm-fuzz-") as tmp:
        workdir = args.run_dir or Path(tmp)
        workdir.mkdir(mode=0o700, parents=True, exist_ok=True)
        report = run(args.frames, args.seed, workdir, lambda line: print(line, file=sys.stderr, flush=True))
    summary = json.dumps(report.as_dict(), default=dict)
    print(summary_text(report))
    print(summary, flush=True)
    if args.report:
        args.report.write_text(json.dumps(report.as_dict(), indent=1, default=dict) + "\n")
    return 1 if report.failures else 0


if __name__ == "__main__":
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    sys.exit(main())
