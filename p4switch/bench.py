"""Benchmark: packets per second through one `p4switch` process with two veth ports, and through BMv2's
simple_switch_grpc the same way when it is on PATH.

    python -m p4switch.bench [--frames N] [--seconds S]

For (a) the one-table L2 forwarder (p4switch/tests/programs/l2fwd.p4) and (b) the project's pipeline
(p4src/main.p4, with entries that route the frames), 128-byte and 1024-byte frames are sent into port 1
and counted as they leave port 2. The load generator is this process (a sender and a receiver thread) and
keeps a bounded window of frames in flight, so the switch never sees more than it can queue and the rate
measured is the switch's. With simple_switch_grpc and p4c-bm2-ss on PATH, BMv2 runs the same programs
(compiled by p4c), entries and frames in the same run, started with the same command line (both at log
level warn), and the summary sets the two side by side. Every run is bounded in frames and seconds; veths
and the switch processes are removed at the end."""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
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
from p4switch.targets import Target
from p4switch.tests.runtime import harness
from p4switch.tests.runtime.harness import update

REPO = Path(__file__).resolve().parent.parent
SIZES = (128, 1024)
BURST = 3000
"""Frames queued per round: well within the switch's receive ring (4096 frames at 1500-byte MTU)."""
WINDOW = 32
"""Frames in flight when targets are compared: within BMv2's queues (64 frames per egress port)."""
SRC_MAC, DST_MAC = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")


@dataclass
class Result:
    """One run. Wall-clock rates depend on what else the machine runs; CPU time per frame much less, so
    both are reported: ``switch_us`` is the switch process's CPU time per forwarded frame, ``engine_us``
    the CPU time of p4switch's Switch.process alone (same program, entries and frame, in this process;
    burst runs only). ``method``: "burst" (:func:`measure`) or "window" (:func:`measure_window`)."""

    target: str
    method: str
    program: str
    size: int
    sent: int
    received: int
    seconds: float
    switch_cpu: float
    engine_us: float | None

    @property
    def pps(self) -> float:
        return self.received / self.seconds if self.seconds else 0.0

    @property
    def switch_us(self) -> float:
        return self.switch_cpu / self.received * 1e6 if self.received else 0.0

    @property
    def capacity(self) -> float:
        """Packets/s the switch would forward with one core to itself (1 / CPU time per frame)."""
        return 1e6 / self.switch_us if self.switch_us else 0.0


@contextlib.contextmanager
def tester_ports(ingress: str, egress: str) -> Iterator[tuple[socket.socket, socket.socket]]:
    """(send socket on ``ingress``, receive socket on ``egress``, 1 s timeout), closed afterwards."""
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    try:
        tx.bind((ingress, 0))
        rx.bind((egress, 0))
        set_buffer(rx, SO_RCVBUFFORCE, socket.SO_RCVBUF, SOCKET_BUFFER * 2)
        rx.settimeout(1.0)
        yield tx, rx
    finally:
        tx.close()
        rx.close()


def measure(pid: int, ingress: str, egress: str, frame: bytes, frames: int, seconds: float,
            progress: Callable[[int], None]) -> tuple[int, int, float]:
    """Queue bursts of ``frame`` on ``ingress`` while the switch (``pid``) is stopped, let it run, and time
    how fast the forwarded copies arrive on ``egress``: the sender's cost is not in the measurement, only
    the switch draining a full queue. Returns (sent, received, seconds the switch spent forwarding)."""
    marker, buf = frame[:14], bytearray(2048)
    sent = received = 0
    busy = 0.0
    start = time.monotonic()
    with tester_ports(ingress, egress) as (tx, rx):
        while sent < frames and time.monotonic() - start < seconds:
            burst = min(BURST, frames - sent)
            os.kill(pid, signal.SIGSTOP)
            try:
                for _ in range(burst):
                    tx.send(frame)
            finally:
                os.kill(pid, signal.SIGCONT)
            sent += burst
            first = last = 0.0
            got = 0
            while got < burst:
                try:
                    rx.recv_into(buf)
                except TimeoutError:
                    break  # the rest of the burst was lost
                if buf[:14] == marker:
                    last = time.monotonic()
                    first = first or last
                    got += 1
            received += got
            busy += last - first
            progress(received)
    return sent, received, max(busy, 1e-9)


def measure_window(ingress: str, egress: str, frame: bytes, frames: int, seconds: float
                   ) -> tuple[int, int, float]:
    """Send ``frame`` into ``ingress`` keeping at most WINDOW frames in flight (one more goes in as one
    comes out of ``egress``) and time the whole stream. A queue-draining burst suits p4switch, but BMv2
    drops what exceeds its small queues (64 frames per egress port), so targets are compared this way.
    Frames not out within a second count as lost. Returns (sent, received, seconds)."""
    marker, buf = frame[:14], bytearray(2048)
    sent = received = lost = 0
    start = last = time.monotonic()
    with tester_ports(ingress, egress) as (tx, rx):
        while received + lost < frames and time.monotonic() - start < seconds:
            while sent - received - lost < WINDOW and sent < frames:
                tx.send(frame)
                sent += 1
            try:
                rx.recv_into(buf)
            except TimeoutError:
                lost = sent - received  # the window never came out
                continue
            if buf[:14] == marker:
                received += 1
                last = time.monotonic()
    return sent, received, max(last - start, 1e-9)


def build_frame(size: int) -> bytes:
    header = DST_MAC + SRC_MAC + b"\x88\xb5"
    return header + bytes(size - len(header) - 4)  # the 4-byte FCS is not part of what sockets see


@contextlib.contextmanager
def running_switch(target: Target, workdir: Path
                   ) -> Iterator[tuple[list[tuple[str, str]], subprocess.Popen[bytes], str]]:
    """(veth pairs, process, P4Runtime address) of ``target``'s switch on ports 1 and 2, no program yet."""
    with harness.veth_pairs(2, harness.unique_prefix("p4b")) as pairs:
        port = targets.free_port()
        argv = target.switch_argv(device_id=harness.DEVICE_ID, ports={1: pairs[0][0], 2: pairs[1][0]},
                                  grpc_port=port, log=workdir / f"{target.name}.log", log_level="warn")
        with targets.running(argv, port, workdir / f"{target.name}.out") as proc:
            yield pairs, proc, f"127.0.0.1:{port}"


def engine_cost(program: harness.Program, setup: Callable[[harness.StreamClient], None], frame: bytes,
                frames: int, seconds: float) -> float:
    """CPU microseconds per Switch.process call for ``frame``, programmed like the switch process."""
    with harness.in_process_switch() as switch, harness.primary_client(switch.address, program) as client:
        setup(client)
        engine = switch.device.switch
        assert engine is not None and engine.process(1, frame), "the benchmark frame is not forwarded"
        count, start, cpu_start = 0, time.monotonic(), time.thread_time()
        while count < frames and time.monotonic() - start < seconds:
            engine.process(1, frame)
            count += 1
        return (time.thread_time() - cpu_start) / count * 1e6


def bench_program(target: Target, name: str, program: harness.Program,
                  setup: Callable[[harness.StreamClient], None], frame_for: Callable[[int], bytes],
                  args: argparse.Namespace, workdir: Path) -> list[Result]:
    """p4switch: a queue-draining run (with the engine's own cost) and a windowed one per frame size;
    BMv2: the windowed one."""
    methods = ("burst", "window") if target.name == "p4switch" else ("window",)
    results = []
    with running_switch(target, workdir) as (pairs, proc, address), \
            harness.primary_client(address, program) as client:
        setup(client)
        for size in SIZES:
            frame = frame_for(size)
            measure_window(pairs[0][1], pairs[1][1], frame, 500, 5)  # warm-up
            for method in methods:
                result = one_run(target, method, name, proc.pid, pairs, size, frame, args)
                if method == "burst":
                    result.engine_us = engine_cost(program, setup, frame, args.frames, args.seconds)
                results.append(result)
    return results


def one_run(target: Target, method: str, name: str, pid: int, pairs: list[tuple[str, str]], size: int,
            frame: bytes, args: argparse.Namespace) -> Result:
    """One measurement of ``method`` through the switch ``pid`` (ports: the host sides of ``pairs``)."""
    label = f"{target.name} {name}: {size}-byte frames, {method}"
    print(f"  {label} ...", flush=True)
    ingress, egress = pairs[0][1], pairs[1][1]
    cpu_before = cpu_seconds(pid)
    if method == "burst":
        sent, received, seconds = measure(pid, ingress, egress, frame, args.frames, args.seconds,
                                          lambda n: print(f"    {n} forwarded", flush=True))
    else:
        sent, received, seconds = measure_window(ingress, egress, frame, args.frames, args.seconds)
    result = Result(target.name, method, name, size, sent, received, seconds,
                    cpu_seconds(pid) - cpu_before, None)
    print(f"  {label}: {received}/{sent} forwarded in {seconds:.2f} s = {result.pps:,.0f} packets/s; "
          f"switch CPU {result.switch_us:.1f} us/frame", flush=True)
    return result


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (from /proc), to tell a busy switch from an idle one."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def l2fwd_setup(program: harness.Program) -> Callable[[harness.StreamClient], None]:
    def setup(client: harness.StreamClient) -> None:
        entry = p4r.TableEntry(table_id=program.name_to_id("tables", "L2Ingress.dmac"))
        entry.match.add(field_id=program.field_id("L2Ingress.dmac", "hdr.ethernet.dst_addr"),
                        exact=p4r.FieldMatch.Exact(value=DST_MAC))
        entry.action.action.action_id = program.name_to_id("actions", "L2Ingress.forward")
        entry.action.action.params.add(param_id=program.param_id("L2Ingress.forward", "port"), value=b"\x02")
        client.write(update(p4r.Update.INSERT, table_entry=entry))
    return setup


MAIN = "IbsecIngress."
SUBNET, SRC_GUID, DST_GUID = 0x0001, 0x10, 0x20
SITE_LOCAL = 0xFEC0 << 112
"""fec0::/10 with the 38 marking-field bits zero (docs/DESIGN.md section 2)"""


def site_local_gid(subnet: int, guid: int) -> str:
    """A host's GID as docs/DESIGN.md section 2 lays it out: prefix, zero MF, 16-bit subnet, 64-bit GUID
    (written here, not imported from the wire library: the P4 target depends on nothing of the project)."""
    return str(ipaddress.IPv6Address(SITE_LOCAL | subnet << 64 | guid))
ROUTES = 200
"""routes_table entries besides the benchmark's own (a fabric of a few hundred hosts)"""


def roce_frame(size: int) -> bytes:
    """A RoCEv2 RC SEND between two hosts of the fabric (site-local GIDs), padded to ``size`` bytes."""
    src, dst = (site_local_gid(SUBNET, guid) for guid in (SRC_GUID, DST_GUID))
    packet = (Ether(src=SRC_MAC, dst=DST_MAC) / IPv6(src=src, dst=dst, hlim=64)
              / UDP(sport=0xC000, dport=4791) / BTH(opcode=4, pkey=0xFFFF, dqpn=0x12, psn=1, ackreq=1))
    return bytes(packet / Raw(bytes(size - len(packet) - 4)))  # payload and ICRC fill the frame


def main_setup(program: harness.Program) -> Callable[[harness.StreamClient], None]:
    """Entries of a leaf switch: host port 1 seeding the mark and filtering 16 invalid P_Keys, fabric
    port 2, DDPM on port 2, an SM punt entry, and ROUTES + 1 routes through one-member groups."""
    def setup(client: harness.StreamClient) -> None:
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
    return setup


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m p4switch.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=20000, help="frames per run (default 20000)")
    parser.add_argument("--seconds", type=float, default=10.0, help="time limit per run (default 10)")
    args = parser.parse_args(argv)
    if shutil.which("ip") is None:
        print("p4switch.bench: needs iproute2 (ip) and root for veth pairs", file=sys.stderr)
        return 1
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="p4switch-bench-") as tmp:
        results += bench_target(targets.TARGETS["p4switch"], args, Path(tmp))
        bmv2 = targets.TARGETS["bmv2"]
        if reason := bmv2.missing():
            print(f"BMv2: not measured ({reason})", flush=True)
        else:
            results += bench_target(bmv2, args, Path(tmp))
    report(results)
    return 0


def bench_target(target: Target, args: argparse.Namespace, workdir: Path) -> list[Result]:
    """Both programs on ``target``, each compiled by the target's own compiler."""
    compiler = str(target.tool(target.compiler))
    print(f"(a) {target.name}: one-table L2 forwarder, p4switch/tests/programs/l2fwd.p4", flush=True)
    l2fwd = harness.compile_program(harness.SHARED_PROGRAMS / "l2fwd.p4", workdir / target.name / "l2fwd",
                                    compiler)
    results = bench_program(target, "l2fwd", l2fwd, l2fwd_setup(l2fwd), build_frame, args, workdir)
    print(f"(b) {target.name}: the project's pipeline, p4src/main.p4", flush=True)
    try:
        program = harness.compile_program(REPO / "p4src" / "main.p4", workdir / target.name / "main",
                                          compiler)
    except (AssertionError, subprocess.SubprocessError) as err:
        print(f"  skipped: p4src/main.p4 does not compile with {target.compiler} ({str(err)[:300]})")
        return results
    return results + bench_program(target, "main.p4", program, main_setup(program), roce_frame, args, workdir)


def report(results: list[Result]) -> None:
    print("\nsummary: one switch process, 2 veth ports. pps = measured; CPU us/frame of the switch process"
          " and of p4switch's engine alone; capacity = 1e6 / switch us (one free core)")
    for r in results:
        engine = f"engine {r.engine_us:6.1f} us  I/O+loop {r.switch_us - r.engine_us:6.1f} us  " \
            if r.engine_us is not None else ""
        print(f"  {r.target:8s} {r.method:6s} {r.program:8s} {r.size:5d} B  {r.pps:9,.0f} pps  "
              f"switch {r.switch_us:6.1f} us  {engine}capacity {r.capacity:9,.0f} pps  "
              f"({r.received}/{r.sent} frames)")
    burst = {(r.program, r.size): r for r in results if r.method == "burst"}  # p4switch's
    for prog in sorted({r.program for r in results}):
        small, large = burst.get((prog, 128)), burst.get((prog, 1024))
        if small and large:
            print(f"  p4switch {prog}: 1024-byte / 128-byte: measured {large.pps / small.pps:.2f}, "
                  f"capacity {large.capacity / small.capacity:.2f}")
    for size in SIZES:
        a, b = burst.get(("l2fwd", size)), burst.get(("main.p4", size))
        if a and b:
            print(f"  p4switch {size}-byte frames: main.p4 / l2fwd: measured {b.pps / a.pps:.2f}, "
                  f"capacity {b.capacity / a.capacity:.2f}")
    side_by_side([r for r in results if r.method == "window"])


def side_by_side(windowed: list[Result]) -> None:
    """p4switch against BMv2 on each program and frame size both ran (windowed runs): packets/s, which
    follow the machine's load, and CPU time per frame, which much less."""
    bmv2 = {(r.program, r.size): r for r in windowed if r.target == "bmv2"}
    pairs = [(ours, bmv2[ours.program, ours.size]) for ours in windowed
             if ours.target == "p4switch" and (ours.program, ours.size) in bmv2]
    if not pairs:
        return
    print(f"\np4switch against BMv2 (simple_switch_grpc): same program, entries and frames, this run, "
          f"{WINDOW} frames in flight; ratios are p4switch's advantage")
    print(f"  {'program':8s} {'size':>6s}  {'p4switch pps':>12s}  {'BMv2 pps':>10s}  {'ratio':>6s}  "
          f"{'p4switch us/frame':>17s}  {'BMv2 us/frame':>13s}  {'ratio':>6s}")
    for ours, theirs in pairs:
        print(f"  {ours.program:8s} {ours.size:4d} B  {ours.pps:12,.0f}  {theirs.pps:10,.0f}  "
              f"{ratio(ours.pps, theirs.pps):5.2f}x  {ours.switch_us:17.1f}  {theirs.switch_us:13.1f}  "
              f"{ratio(theirs.switch_us, ours.switch_us):5.2f}x")


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


if __name__ == "__main__":
    sys.exit(main())
