"""In-process throughput of Switch.process(): packets per second for one program and one frame, with no
I/O (the runtime's `make bench` adds the veth numbers). Run as ``python -m p4switch.engine.bench``.

``measure()`` is the helper other benchmarks call; the command line measures the one-table L2 forwarder
(p4switch/tests/programs/l2fwd.json) with 128- and 1024-byte frames, and any IR JSON given with
``--program`` (entries are the caller's business: use measure() from Python for those).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from p4switch.engine.api import ActionCall, Exact, Switch, TableEntry

L2FWD = Path(__file__).resolve().parents[1] / "tests" / "programs" / "l2fwd.json"


@dataclass(frozen=True)
class Result:
    packets: int
    wall_seconds: float
    cpu_seconds: float

    @property
    def pps(self) -> float:
        """Packets per second of CPU time (steadier than wall time on a shared machine)."""
        return self.packets / self.cpu_seconds if self.cpu_seconds else float("inf")

    @property
    def wall_pps(self) -> float:
        return self.packets / self.wall_seconds if self.wall_seconds else float("inf")


def measure(
    switch: Switch,
    port: int,
    frame: bytes,
    packets: int = 20_000,
    max_seconds: float = 10.0,
    check: Callable[[list[tuple[int, bytes]]], bool] | None = None,
) -> Result:
    """Process ``frame`` repeatedly (after one warm-up packet checked by ``check``, if given) and time it.
    Stops early after ``max_seconds`` of wall time."""
    first = switch.process(port, frame)
    if check is not None and not check(first):
        raise RuntimeError(f"benchmark frame was not handled as expected: {first!r}")
    process = switch.process
    wall0, cpu0 = time.perf_counter(), time.process_time()
    done = 0
    while done < packets:
        for _ in range(1000):
            process(port, frame)
        done += 1000
        if time.perf_counter() - wall0 > max_seconds:
            break
    return Result(done, time.perf_counter() - wall0, time.process_time() - cpu0)


def l2fwd_switch() -> Switch:
    switch = Switch.load(L2FWD.read_bytes())
    switch.table_insert(
        "L2Ingress.dmac",
        TableEntry(
            {"hdr.ethernet.dst_addr": Exact(0x000000000002)}, ActionCall("L2Ingress.forward", {"port": 2})
        ),
    )
    return switch


def l2_frame(size: int) -> bytes:
    header = bytes.fromhex("0000000000020000000000010800")
    return header + bytes(size - len(header))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--packets", type=int, default=20_000)
    args = parser.parse_args(argv)
    switch = l2fwd_switch()
    results = {}
    for size in (128, 1024):
        result = measure(
            switch, 1, l2_frame(size), args.packets, check=lambda out: [p for p, _ in out] == [2]
        )
        results[size] = result
        print(f"engine l2fwd {size:5d} B: {result.pps:10.0f} packets/s (cpu), {result.wall_pps:10.0f} (wall)")
    print(f"engine l2fwd ratio 128/1024 B: {results[128].pps / results[1024].pps:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
