"""Traffic runs in the style of perftest: ``send_lat`` (ib_send_lat) and ``write_bw`` (ib_write_bw).

They run inside the agent, next to the adapter, so the numbers measure the adapter and the wire, not the
control socket. Every run is bounded by an iteration count and a duration, whichever ends first, and
reports progress about once a second.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, Protocol

MAX_ITERATIONS = 10_000_000
MAX_DURATION = 3600.0
PROGRESS_INTERVAL = 1.0
ACK_WAIT = 5.0  # seconds write_bw waits for acknowledgements: to free its window, and to drain at the end


class Endpoint(Protocol):
    """The adapter operations a run needs, on one connected QP."""

    def post_send(self, qpn: int, data: bytes) -> None: ...

    def wait_recv(self, qpn: int, timeout: float) -> bytes | None: ...

    def post_write(
        self, qpn: int, va: int, r_key: int, data: bytes, memory_key: bytes | None = None
    ) -> None: ...

    def outstanding(self, qpn: int) -> int: ...

    def wait_outstanding(self, qpn: int, at_most: int, timeout: float) -> bool: ...


def percentile(sorted_values: list[float], fraction: float) -> float:
    """The nearest-rank percentile of an ascending list (what perftest prints as 'typical' and '99%')."""
    if not sorted_values:
        return 0.0
    rank = max(1, min(len(sorted_values), math.ceil(fraction * len(sorted_values))))
    return sorted_values[rank - 1]


def latency_summary(samples_us: list[float]) -> dict[str, float]:
    """Min, median, p99, max and mean of one-way latency samples in microseconds."""
    ordered = sorted(samples_us)
    mean = sum(ordered) / len(ordered) if ordered else 0.0
    return {
        "min_us": ordered[0] if ordered else 0.0,
        "median_us": percentile(ordered, 0.5),
        "p99_us": percentile(ordered, 0.99),
        "max_us": ordered[-1] if ordered else 0.0,
        "mean_us": mean,
    }


def _bounds(iterations: int, duration: float) -> tuple[int, float]:
    if not 0 < iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be 1..{MAX_ITERATIONS}")
    if not 0 < duration <= MAX_DURATION:
        raise ValueError(f"duration must be in (0, {MAX_DURATION}] seconds")
    return iterations, duration


class _Ticker:
    """Calls ``progress`` at most once per interval with the count done so far."""

    def __init__(self, progress: Callable[[dict[str, Any]], None], total: int) -> None:
        self.progress, self.total = progress, total
        self.start = self.last = time.monotonic()

    def tick(self, done: int) -> None:
        now = time.monotonic()
        if now - self.last >= PROGRESS_INTERVAL:
            self.last = now
            self.progress({"done": done, "of": self.total, "elapsed_s": round(now - self.start, 3)})

    def elapsed(self) -> float:
        return time.monotonic() - self.start


def send_lat(
    ep: Endpoint,
    qpn: int,
    size: int,
    iterations: int,
    duration: float,
    progress: Callable[[dict[str, Any]], None],
    timeout: float = 2.0,
) -> dict[str, Any]:
    """Ping-pong SENDs with a peer that echoes (``serve --echo``); one-way latency = round trip / 2."""
    iterations, duration = _bounds(iterations, duration)
    payload = bytes(size)
    samples: list[float] = []
    ticker = _Ticker(progress, iterations)
    lost = 0
    while len(samples) + lost < iterations and ticker.elapsed() < duration:
        start = time.perf_counter()
        ep.post_send(qpn, payload)
        if ep.wait_recv(qpn, timeout) is None:
            lost += 1
            continue
        samples.append((time.perf_counter() - start) * 1e6 / 2)
        ticker.tick(len(samples))
    return {
        "test": "send_lat",
        "size": size,
        "iterations": len(samples),
        "lost": lost,
        **latency_summary(samples),
    }


def write_bw(
    ep: Endpoint,
    qpn: int,
    va: int,
    r_key: int,
    size: int,
    iterations: int,
    duration: float,
    progress: Callable[[dict[str, Any]], None],
    window: int = 32,
    memory_key: bytes | None = None,
) -> dict[str, Any]:
    """Back-to-back RDMA WRITEs with at most ``window`` unacknowledged; throughput counts acked bytes."""
    iterations, duration = _bounds(iterations, duration)
    payload = bytes(size)
    ticker = _Ticker(progress, iterations)
    posted = 0
    while posted < iterations and ticker.elapsed() < duration:
        if not ep.wait_outstanding(qpn, window - 1, timeout=ACK_WAIT):
            break
        ep.post_write(qpn, va, r_key, payload, memory_key)
        posted += 1
        ticker.tick(posted)
    ep.wait_outstanding(qpn, 0, timeout=ACK_WAIT)
    elapsed = ticker.elapsed()
    acked = posted - ep.outstanding(qpn)
    return {
        "test": "write_bw",
        "size": size,
        "iterations": acked,
        "seconds": elapsed,
        "msg_rate": acked / elapsed if elapsed else 0.0,
        "mbit_s": acked * size * 8 / elapsed / 1e6 if elapsed else 0.0,
    }
