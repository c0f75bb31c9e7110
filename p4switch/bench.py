"""Benchmark: packets per second through one `p4switch` process with two veth ports.

    python -m p4switch.bench [--frames N] [--seconds S]

For (a) the one-table L2 forwarder (p4switch/tests/programs/l2fwd.p4) and (b) the project's pipeline
(p4src/main.p4, with entries that route the frames), 128-byte and 1024-byte frames are sent into port 1
and counted as they leave port 2. The load generator is this process (a sender and a receiver thread) and
keeps a bounded window of frames in flight, so the switch never sees more than it can queue and the rate
measured is the switch's. Every run is bounded in frames and seconds; veths and the switch process are
removed at the end."""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Semaphore
from pathlib import Path

from finsy.proto import p4r

from p4switch.tests.runtime import harness
from p4switch.tests.runtime.harness import update

REPO = Path(__file__).resolve().parent.parent
SIZES = (128, 1024)
WINDOW = 64
"""Frames in flight: enough to keep the switch busy, few enough that its socket never overflows."""
SRC_MAC, DST_MAC = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")


@dataclass
class Result:
    program: str
    size: int
    sent: int
    received: int
    seconds: float
    switch_cpu: float
    """CPU seconds the switch process used per second of the run (1.0 = one core busy)"""

    @property
    def pps(self) -> float:
        return self.received / self.seconds if self.seconds else 0.0


def _send_frames(ingress: str, frame: bytes, frames: int, seconds: float, credit: Semaphore,
                 sent: Synchronized) -> None:  # type: ignore[type-arg]
    """The sender process: one frame per credit (the receiver gives credits back), bounded in count and
    time. A lost frame costs its credit; after 0.5 s without any, one is taken back so the run goes on."""
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    tx.bind((ingress, 0))
    start = time.monotonic()
    count = 0
    while count < frames and time.monotonic() - start < seconds:
        if not credit.acquire(False) and not credit.acquire(timeout=0.5):
            credit.release()
            continue
        tx.send(frame)
        count += 1
        sent.value = count
    tx.close()


def measure(ingress: str, egress: str, frame: bytes, frames: int, seconds: float,
            progress: Callable[[int], None]) -> tuple[int, int, float]:
    """Send up to ``frames`` copies of ``frame`` on ``ingress`` (from a separate process, at most WINDOW
    unanswered) and count the copies leaving on ``egress``; returns (sent, received, seconds from the
    first send to the last receive)."""
    ctx = multiprocessing.get_context("spawn")
    credit, sent = ctx.Semaphore(WINDOW), ctx.Value("q", 0, lock=False)
    rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    rx.bind((egress, 0))
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    rx.settimeout(0.2)
    sender = ctx.Process(target=_send_frames, args=(ingress, frame, frames, seconds, credit, sent))
    received, marker, buf = 0, frame[:14], bytearray(2048)
    try:
        sender.start()
        start = last_rx = time.monotonic()
        while sender.is_alive() or received < sent.value:
            try:
                size = rx.recv_into(buf)
            except TimeoutError:
                if not sender.is_alive():
                    break
                continue
            if buf[:14] == marker and size >= len(frame) - 4:
                received += 1
                last_rx = time.monotonic()
                credit.release()
                if received % 10000 == 0:
                    progress(received)
    finally:
        sender.join(timeout=seconds + 5)
        if sender.is_alive():
            sender.kill()
        rx.close()
    return int(sent.value), received, max(last_rx - start, 1e-9)


def build_frame(size: int) -> bytes:
    header = DST_MAC + SRC_MAC + b"\x88\xb5"
    return header + bytes(size - len(header) - 4)  # the 4-byte FCS is not part of what sockets see


@contextlib.contextmanager
def running_switch(program: harness.Program, workdir: Path
                   ) -> Iterator[tuple[list[tuple[str, str]], harness.SwitchProcess]]:
    with harness.veth_pairs(2, harness.unique_prefix("p4b")) as pairs:
        args = ["-i", f"1@{pairs[0][0]}", "-i", f"2@{pairs[1][0]}", "--log-level", "warn",
                str(program.json_path)]
        with harness.switch_process(args, workdir / "switch.log") as proc:
            yield pairs, proc


def bench_program(name: str, program: harness.Program, setup: Callable[[harness.StreamClient], None],
                  frame_for: Callable[[int], bytes], args: argparse.Namespace, workdir: Path) -> list[Result]:
    results = []
    with running_switch(program, workdir) as (pairs, proc), \
            harness.primary_client(proc.address, program) as client:
        setup(client)
        for size in SIZES:
            frame = frame_for(size)
            measure(pairs[0][1], pairs[1][1], frame, 500, 5, lambda n: None)  # warm-up
            print(f"  {name}: {size}-byte frames ...", flush=True)
            cpu_before = cpu_seconds(proc.proc.pid)
            sent, received, seconds = measure(pairs[0][1], pairs[1][1], frame, args.frames, args.seconds,
                                              lambda n: print(f"    {n} forwarded", flush=True))
            result = Result(name, size, sent, received, seconds,
                            (cpu_seconds(proc.proc.pid) - cpu_before) / seconds)
            print(f"  {name}: {size}-byte frames: {received}/{sent} forwarded in {seconds:.2f} s = "
                  f"{result.pps:,.0f} packets/s (switch CPU {result.switch_cpu:.0%})", flush=True)
            results.append(result)
    return results


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
        workdir = Path(tmp)
        print("(a) one-table L2 forwarder, p4switch/tests/programs/l2fwd.p4", flush=True)
        l2fwd = harness.compile_program(harness.SHARED_PROGRAMS / "l2fwd.p4", workdir / "l2fwd")
        results += bench_program("l2fwd", l2fwd, l2fwd_setup(l2fwd), build_frame, args, workdir)
        print("(b) the project's pipeline, p4src/main.p4", flush=True)
        main_p4 = REPO / "p4src" / "main.p4"
        try:
            program = harness.compile_program(main_p4, workdir / "main")
        except (AssertionError, FileNotFoundError, subprocess.SubprocessError) as err:
            print(f"  skipped: p4src/main.p4 does not compile with p4switch-cc yet ({str(err)[:300]})")
        else:
            from p4switch.bench_main import main_frame, main_setup
            results += bench_program("main.p4", program, main_setup(program), main_frame, args, workdir)
    report(results)
    return 0


def report(results: list[Result]) -> None:
    print("\nsummary (packets/s through one p4switch process, 2 veth ports)")
    by_key = {(r.program, r.size): r.pps for r in results}
    for r in results:
        print(f"  {r.program:8s} {r.size:5d} B  {r.pps:10,.0f} pps  ({r.received}/{r.sent} frames, "
              f"switch CPU {r.switch_cpu:.0%})")
    for prog in sorted({r.program for r in results}):
        small, large = by_key.get((prog, 128)), by_key.get((prog, 1024))
        if small and large:
            print(f"  {prog}: 1024-byte / 128-byte rate = {large / small:.2f}")
    for size in SIZES:
        a, b = by_key.get(("l2fwd", size)), by_key.get(("main.p4", size))
        if a and b:
            print(f"  {size}-byte frames: main.p4 / l2fwd rate = {b / a:.2f}")


if __name__ == "__main__":
    sys.exit(main())
