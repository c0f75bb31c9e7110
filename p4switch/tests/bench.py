"""Benchmark: p4switch on its two engines against the bare C forwarder (and BMv2 when it is installed),
over veths, side by side in one run.

    python -m p4switch.tests.bench [--frames N] [--seconds S] [--latency-frames N] [--idle-switches N]
                             [--idle-seconds S] [--skip throughput,latency,pcap,idle]

For (a) the one-table L2 forwarder (p4switch/tests/programs/l2fwd.p4) and (b) the project's pipeline
(p4src/main.p4, with the entries of a leaf switch), 128-byte and 1024-byte frames go into port 1 and are
counted as they leave port 2 of each subject, all running at once on their own veth pairs:

- python: `p4switch --engine python`;  native: `p4switch --engine native`;
- bare: the bare forwarder (python -m p4switch.tests.bare), the native packet I/O with no pipeline, what
  this machine can forward over veths at all;
- bmv2: `simple_switch_grpc`, when it and p4c-bm2-ss are there (p4switch.targets: the venv or PATH), with
  the programs compiled by p4c-bm2-ss.

The subjects take turns burst by burst, so a change in the machine's other load falls on all of them
alike. It prints, side by side and as ratios:

- throughput: each burst is queued while the subject is stopped (SIGSTOP), then drained; its rate comes
  from the kernel's receive timestamps of the first and last frame out, so neither the sender nor this
  process's reading speed is in it (it sleeps while the subject drains), and the median burst's rate is
  reported. BMv2 drops most of a queued burst (its queues between threads are short), so it gets a
  window of frames in flight instead. CPU is the subject process's CPU time per frame forwarded,
  steadier than rates on a shared machine; 1 / CPU is the rate the subject would reach with a core to
  itself;
- per-hop latency at low load: one frame at a time, a few milliseconds apart, the subjects in a rotating
  order, from just before the send to the kernel's receive timestamp on the other veth (median and 99th
  percentile);
- the cost of --pcap (both ports captured) on the native engine, main.p4, 128-byte frames;
- the CPU of idle switches: N native p4switch processes (main.p4, two ports each), together, as a share
  of one core;
- the issue's targets for main.p4, each with the measured value and whether it holds.

Every run is bounded in frames and seconds; veths and processes are removed at the end."""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import itertools
import os
import select
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from finsy.proto import p4r
from scapy.contrib.roce import BTH
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from p4switch import targets
from p4switch.dataplane import SO_RCVBUFFORCE, SOCKET_BUFFER, set_buffer
from p4switch.engine.api import ActionCall, Exact, Lpm
from p4switch.tests.runtime import harness
from p4switch.tests.runtime.harness import update

REPO = Path(__file__).resolve().parents[2]
SIZES = (128, 1024)
BURST = 400
"""Frames queued per burst: within a receive ring (512 frames at 1500-byte MTU, both engines')."""
SRC_MAC, DST_MAC = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")
SO_TIMESTAMPNS = 35
TIMESPEC = struct.Struct("qq")
Setup = Callable[[harness.StreamClient, harness.Program], None]
START_SECONDS = 180.0
"""how long a switch may take to start (a machine running other suites is slow to start Python)"""
BMV2_WINDOW = 32
"""frames in flight at most through BMv2 (see windowed)"""
_veths = itertools.count()
"""numbers the veth pairs of the subjects running at once"""


# ----------------------------------------------------------------------------------------- measuring
def cpu_seconds(pid: int) -> float:
    """CPU time of a process, all its threads, to the nanosecond (the scheduler's own account in
    /proc/PID/task/*/schedstat; /proc/PID/stat counts in 10 ms ticks, too coarse for a burst)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


@dataclass
class Subject:
    """A running forwarder: its label, process and the two sockets that feed and read it."""

    label: str
    pid: int
    tx: socket.socket
    rx: socket.socket
    window: int = 0
    """frames in flight at most, for a subject whose queues drop a burst (0: bursts, see burst)"""
    buf: bytearray = field(default_factory=lambda: bytearray(16384))


@contextlib.contextmanager
def tester(ingress: str, egress: str) -> Iterator[tuple[socket.socket, socket.socket]]:
    """A sending socket on ``ingress`` and a receiving one on ``egress`` with kernel timestamps."""
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    try:
        tx.bind((ingress, 0))
        rx.bind((egress, 0))
        set_buffer(rx, SO_RCVBUFFORCE, socket.SO_RCVBUF, SOCKET_BUFFER * 2)
        rx.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        yield tx, rx
    finally:
        tx.close()
        rx.close()


def receive(subject: Subject, timeout: float) -> tuple[int, float] | None:
    """(length, kernel receive time in seconds) of the next frame out of ``subject``, None after
    ``timeout``; the frame is in ``subject.buf``."""
    ready, _, _ = select.select([subject.rx], [], [], timeout)
    if not ready:
        return None
    size, ancillary, _, _ = subject.rx.recvmsg_into([subject.buf], socket.CMSG_SPACE(TIMESPEC.size))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            sec, nsec = TIMESPEC.unpack(data[:TIMESPEC.size])
            return size, sec + nsec * 1e-9
    return size, time.time()


def drain(subject: Subject) -> None:
    """Drop frames still queued on the receiving socket (late ones of a lost burst)."""
    while receive(subject, 0) is not None:
        pass


def settle(pid: int, quiet: float = 0.005, limit: float = 10.0) -> None:
    """Sleep until process ``pid`` has used no CPU for ``quiet`` seconds: it has forwarded what was
    queued. The frames wait in the receiving socket (their timestamps are the kernel's), so this process
    does not compete with the subject for one of the machine's two cores while it forwards."""
    deadline = time.monotonic() + limit
    before = cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(quiet)
        now = cpu_seconds(pid)
        if now == before:
            return
        before = now


def burst(subject: Subject, frame: bytes, count: int) -> tuple[int, float | None]:
    """Queue ``count`` copies of ``frame`` while the subject is stopped, let it run, and time from the
    kernel's timestamps how fast they leave. Returns (frames out, frames per second or None)."""
    if subject.window:
        return windowed(subject, frame, count)
    marker = frame[:14]
    drain(subject)
    os.kill(subject.pid, signal.SIGSTOP)
    try:
        for _ in range(count):
            subject.tx.send(frame)
    finally:
        os.kill(subject.pid, signal.SIGCONT)
    settle(subject.pid)
    first = last = 0.0
    got = 0
    while got < count and (out := receive(subject, 0.1)) is not None:
        if subject.buf[:14] == marker:
            last = out[1]
            first = first or last
            got += 1
    return got, (got - 1) / (last - first) if got > 1 and last > first else None


def windowed(subject: Subject, frame: bytes, count: int) -> tuple[int, float | None]:
    """``count`` copies of ``frame`` with at most ``subject.window`` in flight (BMv2 holds a few dozen
    frames between its threads and drops the rest of a burst), timed like a burst. Frames that do not come
    within 0.2 s count as lost and leave the window."""
    marker = frame[:14]
    drain(subject)
    sent = got = lost = 0
    first = last = 0.0
    while got + lost < count:
        while sent < count and sent - got - lost < subject.window:
            subject.tx.send(frame)
            sent += 1
        out = receive(subject, 0.2)
        if out is None:
            lost = sent - got
        elif subject.buf[:14] == marker:
            last = out[1]
            first = first or last
            got += 1
    return got, (got - 1) / (last - first) if got > 1 and last > first else None


@dataclass
class Result:
    """One subject's throughput run: frames sent and received, the median burst's rate and the CPU
    seconds the subject used."""

    subject: str
    program: str
    size: int
    sent: int
    received: int
    pps: float
    cpu: float

    @property
    def cpu_us(self) -> float:
        """CPU microseconds of the subject per frame forwarded."""
        return self.cpu / self.received * 1e6 if self.received else 0.0


def side_by_side(subjects: list[Subject], program: str, frame: bytes, frames: int, seconds: float
                 ) -> list[Result]:
    """Bursts of ``frame`` through every subject in turn, up to ``frames`` each and ``seconds`` each in
    all (after a warm-up burst each)."""
    for subject in subjects:
        burst(subject, frame, 500)
    cpu = [cpu_seconds(s.pid) for s in subjects]
    sent, received = [0] * len(subjects), [0] * len(subjects)
    rates: list[list[float]] = [[] for _ in subjects]
    deadline = time.monotonic() + seconds * len(subjects)
    while min(sent) < frames and time.monotonic() < deadline:
        for i, subject in enumerate(subjects):
            count = min(BURST, frames - sent[i])
            if count > 0:
                got, rate = burst(subject, frame, count)
                sent[i], received[i] = sent[i] + count, received[i] + got
                rates[i] += [rate] if rate else []
    return [Result(s.label, program, len(frame) + 4, sent[i], received[i],
                   statistics.median(rates[i]) if rates[i] else 0.0, cpu_seconds(s.pid) - cpu[i])
            for i, s in enumerate(subjects)]


def one_way(subject: Subject, frame: bytes) -> float | None:
    """Microseconds from just before sending ``frame`` to the kernel's receive timestamp of its copy,
    None if it does not come within a second. The frame's last four bytes tell it from others."""
    drain(subject)
    sent_at = time.time()
    subject.tx.send(frame)
    deadline = sent_at + 1.0
    while (left := deadline - time.time()) > 0 and (out := receive(subject, left)) is not None:
        size, at = out
        if size == len(frame) and subject.buf[size - 4:size] == frame[-4:] and subject.buf[:6] == frame[:6]:
            return (at - sent_at) * 1e6
    return None


def latencies(subjects: list[Subject], frame: bytes, count: int, gap: float = 0.002) -> list[list[float]]:
    """One-way microseconds per subject of ``count`` numbered frames, the subjects taking turns, one frame
    at a time ``gap`` seconds apart (low load). The order of the turns rotates every round, so each subject
    follows each other one equally often: a lone frame's latency is mostly cache misses, and the subject
    that always came right after the Python engine's or BMv2's turn found the caches they had evicted
    while the next one found the kernel's paths just warmed."""
    out: list[list[float]] = [[] for _ in subjects]
    for n in range(count):
        numbered = frame[:-4] + n.to_bytes(4, "big")
        first = n % len(subjects)
        for i in [*range(first, len(subjects)), *range(first)]:
            if (us := one_way(subjects[i], numbered)) is not None:
                out[i].append(us)
            time.sleep(gap)
    return out


# ---------------------------------------------------------------------------------------- subjects
@dataclass
class Workload:
    """A program (compiled by p4switch-cc, and by p4c-bm2-ss for BMv2), the entries that route the bench's
    frames, and its frames by size."""

    name: str
    program: harness.Program
    bmv2_program: harness.Program | None
    setup: Setup
    frame: Callable[[int], bytes]


def bmv2() -> targets.Target | None:
    """BMv2 when its compiler and switch are in the venv or on PATH (p4switch.targets)."""
    target = targets.TARGETS["bmv2"]
    return None if target.missing() else target


@contextlib.contextmanager
def process(kind: str, ifaces: tuple[str, str], work: Workload, workdir: Path, pcap: bool
            ) -> Iterator[tuple[int, str | None, harness.Program]]:
    """A subject's process on ports 1 and 2 (``ifaces``): pid, P4Runtime address (None for the bare
    forwarder) and the program to push to it."""
    capture = ["--pcap", str(workdir)] if pcap else []
    ports = ["-i", f"1@{ifaces[0]}", "-i", f"2@{ifaces[1]}"]
    name = f"{kind}-{next(_veths)}"
    if kind == "bare":
        proc = subprocess.Popen([sys.executable, "-m", "p4switch.tests.bare", *ports, *capture],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            harness.wait_for_line(proc, "forwarding", 60)
            yield proc.pid, None, work.program
        finally:
            proc.terminate()
            proc.wait(10)
    elif kind == "bmv2":
        target = bmv2()
        assert target and work.bmv2_program
        port = targets.free_port()
        argv = target.switch_argv(device_id=harness.DEVICE_ID, ports={1: ifaces[0], 2: ifaces[1]},
                                  grpc_port=port, log=workdir / name, log_level="warn",
                                  cpu_port=None)  # forwarding only: no packet I/O
        with targets.running(argv, port, workdir / f"{name}.out") as bmv2_proc:
            yield bmv2_proc.pid, f"127.0.0.1:{port}", work.bmv2_program
    else:
        args = [*ports, "--log-level", "warn", "--engine", kind, *capture, str(work.program.json_path)]
        with harness.switch_process(args, workdir / f"{name}.log", start_timeout=START_SECONDS) as switch:
            yield switch.proc.pid, switch.address, work.program


@contextlib.contextmanager
def started(kind: str, work: Workload, workdir: Path, pcap: bool = False) -> Iterator[Subject]:
    """A subject of ``kind`` (python, native, bare, bmv2) on a fresh pair of veths, programmed with
    ``work``'s entries, and the sockets that feed and read it."""
    label = f"{kind}+pcap" if pcap else kind
    with harness.veth_pairs(2, harness.unique_prefix(f"p4b{next(_veths)}-")) as pairs, \
            process(kind, (pairs[0][0], pairs[1][0]), work, workdir, pcap) \
            as (pid, address, program), \
            contextlib.ExitStack() as stack:
        if address is not None:
            client = stack.enter_context(harness.primary_client(address, program))
            work.setup(client, program)
        tx, rx = stack.enter_context(tester(pairs[0][1], pairs[1][1]))
        yield Subject(label, pid, tx, rx, BMV2_WINDOW if kind == "bmv2" else 0)


def print_result(r: Result) -> None:
    print(f"  {r.program:8s} {r.size:5d} B {r.subject:11s} {r.pps:10,.0f} pps  {r.cpu_us:7.2f} us CPU/frame"
          f"  ({r.received}/{r.sent})", flush=True)


def bench_throughput(work: Workload, kinds: list[str], args: argparse.Namespace, workdir: Path
                     ) -> list[Result]:
    with contextlib.ExitStack() as stack:
        subjects = [stack.enter_context(started(kind, work, workdir)) for kind in kinds]
        results = []
        for size in SIZES:
            results += side_by_side(subjects, work.name, work.frame(size), args.frames, args.seconds)
            for r in results[-len(subjects):]:
                print_result(r)
        return results


def bench_latency(work: Workload, kinds: list[str], count: int, workdir: Path) -> dict[str, list[float]]:
    with contextlib.ExitStack() as stack:
        subjects = [stack.enter_context(started(kind, work, workdir)) for kind in kinds]
        latencies(subjects, work.frame(128), 50)  # warm-up
        out = dict(zip(kinds, latencies(subjects, work.frame(128), count), strict=True))
    for kind, values in out.items():
        print(f"  {work.name} latency {kind:7s} median {statistics.median(values or [0]):7.1f} us "
              f"({len(values)}/{count} frames)", flush=True)
    return out


def bench_pcap(work: Workload, args: argparse.Namespace, workdir: Path) -> tuple[Result, Result]:
    """The native engine on main.p4, 128-byte frames, without and with --pcap, side by side."""
    with started("native", work, workdir) as plain, started("native", work, workdir, pcap=True) as pcap:
        runs = side_by_side([plain, pcap], work.name, work.frame(128), args.frames, args.seconds)
    for r in runs:
        print_result(r)
    return runs[0], runs[1]


def bench_idle(program: harness.Program, engine: str, count: int, seconds: float, workdir: Path) -> float:
    """CPU share of one core used by ``count`` idle p4switch processes (two ports each) together."""
    with contextlib.ExitStack() as stack:
        pairs = stack.enter_context(harness.veth_pairs(2 * count, harness.unique_prefix("p4i")))
        pids = []
        for i in range(count):
            ports = ["-i", f"1@{pairs[2 * i][0]}", "-i", f"2@{pairs[2 * i + 1][0]}"]
            args = [*ports, "--log-level", "warn", "--engine", engine, str(program.json_path)]
            proc = stack.enter_context(harness.switch_process(args, workdir / f"idle{i}", device_id=i + 1,
                                                              start_timeout=START_SECONDS))
            pids.append(proc.proc.pid)
        time.sleep(5)  # starting up is not idling
        before = sum(cpu_seconds(pid) for pid in pids)
        start = time.monotonic()
        time.sleep(seconds)
        used = sum(cpu_seconds(pid) for pid in pids) - before
        return used / (time.monotonic() - start)


# ------------------------------------------------------------------------------------------ workloads
def build_frame(size: int) -> bytes:
    header = DST_MAC + SRC_MAC + b"\x88\xb5"
    return header + bytes(size - len(header) - 4)  # the 4-byte FCS is not part of what sockets see


def l2fwd_setup(client: harness.StreamClient, program: harness.Program) -> None:
    entry = p4r.TableEntry(table_id=program.name_to_id("tables", "L2Ingress.dmac"))
    entry.match.add(field_id=program.field_id("L2Ingress.dmac", "hdr.ethernet.dst_addr"),
                    exact=p4r.FieldMatch.Exact(value=DST_MAC))
    entry.action.action.action_id = program.name_to_id("actions", "L2Ingress.forward")
    entry.action.action.params.add(param_id=program.param_id("L2Ingress.forward", "port"), value=b"\x02")
    client.write(update(p4r.Update.INSERT, table_entry=entry))


MAIN = "IbsecIngress."
SUBNET, SRC_GUID, DST_GUID = 0x0001, 0x10, 0x20
SITE_LOCAL = 0xFEC0 << 112
"""fec0::/10 with the 38 marking-field bits zero (docs/DESIGN.md section 2)"""
ROUTES = 200
"""routes_table entries besides the benchmark's own (a fabric of a few hundred hosts)"""


def site_local_gid(subnet: int, guid: int) -> str:
    """A host's GID as docs/DESIGN.md section 2 lays it out: prefix, zero MF, 16-bit subnet, 64-bit GUID
    (written here, not imported from the wire library: the P4 target depends on nothing of the project)."""
    return str(ipaddress.IPv6Address(SITE_LOCAL | subnet << 64 | guid))


def roce_frame(size: int) -> bytes:
    """A RoCEv2 RC SEND between two hosts of the fabric (site-local GIDs), padded to ``size`` bytes."""
    src, dst = (site_local_gid(SUBNET, guid) for guid in (SRC_GUID, DST_GUID))
    packet = (Ether(src=SRC_MAC, dst=DST_MAC) / IPv6(src=src, dst=dst, hlim=64)
              / UDP(sport=0xC000, dport=4791) / BTH(opcode=4, pkey=0xFFFF, dqpn=0x12, psn=1, ackreq=1))
    return bytes(packet / Raw(bytes(size - len(packet) - 4)))  # payload and ICRC fill the frame


def main_setup(client: harness.StreamClient, program: harness.Program) -> None:
    """Entries of a leaf switch: host port 1 seeding the mark and filtering 16 invalid P_Keys, fabric
    port 2, DDPM on port 2, an SM punt entry, and ROUTES + 1 routes through one-member groups."""
    b = harness.Builder(program)
    port = "standard_metadata.ingress_port"
    updates = [
        b.table_entry(MAIN + "port_roles.port_roles_table", {port: Exact(1)},
                      ActionCall(MAIN + "port_roles.seed_host_mark", {"mf_seed": 0x155})),
        b.table_entry(MAIN + "port_roles.port_roles_table", {port: Exact(2)},
                      ActionCall(MAIN + "port_roles.keep_mark")),
        b.table_entry(MAIN + "partition.partition_mode_table", {port: Exact(1)},
                      ActionCall(MAIN + "partition.filter_invalid_list")),
        b.table_entry(MAIN + "marking.ddpm_delta_table", {"standard_metadata.egress_spec": Exact(2)},
                      ActionCall(MAIN + "marking.add_distance", {"addend": 1, "field_mask": 0xFF})),
        b.table_entry(MAIN + "sm_punt.sm_punt_table", {"meta.dst_id": Exact((SUBNET << 64) | 1)},
                      ActionCall(MAIN + "sm_punt.punt_to_sm")),
    ]
    updates += [b.table_entry(MAIN + "partition.invalid_pkeys",
                              {port: Exact(1), "hdr.bth.p_key": Exact(0x8001 + i)},
                              ActionCall(MAIN + "partition.reject_pkey")) for i in range(16)]
    client.write(*(update(p4r.Update.INSERT, table_entry=e) for e in updates))
    groups, routes = [], []
    for group, guid in enumerate([DST_GUID, *range(0x1000, 0x1000 + ROUTES)], start=1):
        groups.append(update(p4r.Update.INSERT, table_entry=b.table_entry(
            MAIN + "routing.route_groups_table",
            {"meta.route_group": Exact(group), "meta.route_member": Exact(0)},
            ActionCall(MAIN + "routing.forward", {"port": 2}))))
        routes.append(update(p4r.Update.INSERT, table_entry=b.table_entry(
            MAIN + "routing.routes_table", {"meta.dst_id": Lpm((SUBNET << 64) | guid, 80)},
            ActionCall(MAIN + "routing.forward_to_group", {"group": group, "members": 1}))))
    client.write(*groups)
    client.write(*routes)


# --------------------------------------------------------------------------------------------- report
def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def throughput_table(results: list[Result], kinds: list[str]) -> list[str]:
    """pps and CPU per frame of every subject, then the native engine's ratios to the others (pps, and
    the inverse of CPU per frame: how many times more frames one core moves)."""
    by = {(r.subject, r.program, r.size): r for r in results}
    others = [k for k in kinds if k != "native"]
    head = " | ".join(f"{k + ' pps':>12s} {'CPU us':>6s}" for k in kinds)
    vs = " | ".join(f"{'native/' + k:>16s}" for k in others)
    lines = ["throughput (pps: median burst's rate; CPU us: the subject's CPU per frame forwarded)",
             f"  {'program':8s} {'size':>5s} | {head} | {vs}   (pps, per-core rate)"]
    for program in dict.fromkeys(r.program for r in results):
        for size in SIZES:
            row = [by.get((k, program, size)) for k in kinds]
            cells = [f"{r.pps:12,.0f} {r.cpu_us:6.2f}" if r else f"{'-':>12s} {'-':>6s}" for r in row]
            nat = by.get(("native", program, size))
            ratios = []
            for k in others:
                other = by.get((k, program, size))
                ratios.append(f"{ratio(nat.pps, other.pps)} {ratio(other.cpu_us, nat.cpu_us)}"
                              if nat and other else "-")
            lines.append(f"  {program:8s} {size:5d} | {' | '.join(cells)} | "
                         f"{' | '.join(f'{r:>16s}' for r in ratios)}")
    return lines


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def latency_lines(lat: dict[str, list[float]]) -> list[str]:
    lines = ["per-hop latency at low load, main.p4, 128 B (us, send to kernel receive timestamp)"]
    for kind, values in lat.items():
        if values:
            lines.append(f"  {kind:7s} median {statistics.median(values):7.1f}  "
                         f"p99 {percentile(values, 0.99):7.1f}  ({len(values)} frames)")
    if lat.get("native") and lat.get("bare"):
        medians = statistics.median(lat["native"]), statistics.median(lat["bare"])
        lines.append(f"  native/bare median {ratio(*medians)}")
    return lines


def goals(results: list[Result], lat: dict[str, list[float]], pcap: tuple[Result, Result] | None,
            idle: float | None, idle_count: int) -> list[str]:
    """The issue's targets for main.p4, each with the measured value and whether it holds."""
    by = {(r.subject, r.program, r.size): r for r in results}
    lines = ["targets (main.p4)"]

    def check(name: str, value: float, limit: float, at_most: bool) -> None:
        holds = value <= limit if at_most else value >= limit
        bound = f"{'<=' if at_most else '>='} {limit}"
        lines.append(f"  {'ok  ' if holds else 'MISS'} {name}: {value:.2f} ({bound})")

    for size in SIZES:
        nat, py, bar = (by.get((k, "main.p4", size)) for k in ("native", "python", "bare"))
        if nat and bar and nat.received and bar.received:
            check(f"{size} B CPU per frame native/bare", nat.cpu_us / bar.cpu_us, 2.0, True)
            check(f"{size} B throughput native/bare", nat.pps / bar.pps, 0.7, False)
        if nat and py and py.pps and py.received and nat.received:
            check(f"{size} B throughput native/python", nat.pps / py.pps, 5.0, False)
            check(f"{size} B per-core rate native/python (CPU per frame python/native; the title's 10x)",
                  py.cpu_us / nat.cpu_us, 10.0, False)
    if lat.get("native") and lat.get("bare"):
        medians = statistics.median(lat["native"]), statistics.median(lat["bare"])
        check("median latency native/bare", medians[0] / medians[1], 1.3, True)
    if pcap and pcap[0].received and pcap[1].received:
        check("--pcap cost (CPU per frame, fraction)", pcap[1].cpu_us / pcap[0].cpu_us - 1, 0.15, True)
    if idle is not None:
        check(f"{idle_count} idle native switches, share of one core", idle, 0.02, True)
    return lines


# ------------------------------------------------------------------------------------------------ main
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m p4switch.tests.bench",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=30000,
                        help="frames per subject and run (default 30000)")
    parser.add_argument("--seconds", type=float, default=15.0,
                        help="time limit per subject and run (default 15)")
    parser.add_argument("--latency-frames", type=int, default=1000,
                        help="frames per subject in the latency run (default 1000)")
    parser.add_argument("--idle-switches", type=int, default=32, help="idle switches measured (default 32)")
    parser.add_argument("--idle-seconds", type=float, default=20.0, help="idle measurement time (default 20)")
    parser.add_argument("--skip", default="", help="comma-separated: throughput, latency, pcap, idle")
    return parser.parse_args(argv)


def workloads(workdir: Path, bmv2: targets.Target | None) -> list[Workload]:
    """l2fwd and main.p4, compiled by p4switch-cc (and by p4c-bm2-ss when BMv2 is measured)."""
    sources = [("l2fwd", harness.SHARED_PROGRAMS / "l2fwd.p4", l2fwd_setup, build_frame),
               ("main.p4", REPO / "p4src" / "main.p4", main_setup, roce_frame)]
    compiler = str(bmv2.tool(bmv2.compiler)) if bmv2 else ""
    return [Workload(name, harness.compile_program(source, workdir / source.stem),
                     harness.compile_program(source, workdir / f"bmv2-{source.stem}", compiler)
                     if bmv2 else None,
                     setup, frame)
            for name, source, setup, frame in sources]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    if shutil.which("ip") is None or os.geteuid() != 0:
        print("p4switch.tests.bench: needs root and iproute2 (ip) for veth pairs", file=sys.stderr)
        return 1
    reference = bmv2()
    kinds = ["python", "native", "bare"] + (["bmv2"] if reference else [])
    if not reference:
        print(f"p4switch.tests.bench: BMv2 not measured ({targets.TARGETS['bmv2'].missing()})", flush=True)
    results: list[Result] = []
    lat: dict[str, list[float]] = {}
    pcap: tuple[Result, Result] | None = None
    idle: float | None = None
    with tempfile.TemporaryDirectory(prefix="p4switch-bench-") as tmp:
        workdir = Path(tmp)
        works = workloads(workdir, reference)
        if "throughput" not in skip:
            print(f"== throughput: {', '.join(kinds)} in turns", flush=True)
            for work in works:
                results += bench_throughput(work, kinds, args, workdir)
        if "latency" not in skip:
            print("== latency", flush=True)
            lat = bench_latency(works[1], kinds, args.latency_frames, workdir)
        if "pcap" not in skip:
            print("== --pcap", flush=True)
            pcap = bench_pcap(works[1], args, workdir)
        if "idle" not in skip:
            print(f"== {args.idle_switches} idle switches", flush=True)
            idle = bench_idle(works[1].program, "native", args.idle_switches, args.idle_seconds, workdir)
    print()
    lines = throughput_table(results, kinds) if results else []
    if lat:
        lines += [""] + latency_lines(lat)
    if pcap:
        lines += ["", f"--pcap on the native engine (main.p4, 128 B): {pcap[0].cpu_us:.2f} -> "
                  f"{pcap[1].cpu_us:.2f} us CPU per frame, {pcap[0].pps:,.0f} -> {pcap[1].pps:,.0f} pps"]
    if idle is not None:
        lines += ["", f"{args.idle_switches} idle native switches (main.p4, 2 ports each): "
                  f"{100 * idle:.2f} % of one core together"]
    lines += [""] + goals(results, lat, pcap, idle, args.idle_switches)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
