"""Fidelity of a run, as Mininet-HiFi checks it: is the emulator, not the emulated links, the limit?

A thread of the launcher samples, every ``interval`` seconds, each switch process's CPU time
(``/proc/PID/stat``: utime + stime, all its threads) and the kernel's drop counters of its veths
(``/sys/class/net/IFACE/statistics/rx_dropped`` and ``tx_dropped``). A switch whose CPU share nears one
core cannot keep up with its links, and a frame the kernel dropped at a switch's port was lost to the
emulator, not to the fabric; either makes a latency or throughput measured meanwhile the emulator's.
Drops at the switch's own sockets (its receive buffer or ring full) are not in those counters: only the
switch can read them (PACKET_STATISTICS), and p4switch writes them to its ``--stats-file`` (the ports'
``kernel_drops``), which the sampler reads too; BMv2 has no such file, so its ring drops are reported as
None (not available).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROC = Path("/proc")
SYS_NET = Path("/sys/class/net")
TICKS = os.sysconf("SC_CLK_TCK")
INTERVAL = 0.5
MAX_SAMPLES = 7200
"""Samples kept (an hour at INTERVAL): the oldest go first, so a long run costs bounded memory."""
SATURATED_CORE = 0.9
"""A switch busy this share of one core or more is taken as the limit of what was measured."""
DROP_COUNTERS = ("rx_dropped", "tx_dropped")


@dataclass(frozen=True)
class Watched:
    """One switch to sample: its process and its interfaces (on this machine)."""

    pid: int
    ifaces: tuple[str, ...]
    stats_file: Path | None = None
    """p4switch's --stats-file (None: a target that writes none)"""


@dataclass(frozen=True)
class Sample:
    """One reading: wall time, and per switch its CPU seconds so far and its veths' drops so far."""

    wall: float
    cpu: dict[str, float]
    drops: dict[str, int]
    ring_drops: dict[str, int]


def cpu_seconds(pid: int, proc: Path = PROC) -> float | None:
    """utime + stime of the process (all its threads), in seconds; None once it is gone."""
    try:
        fields = (proc / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS  # fields 14 and 15 of proc(5)


def iface_drops(ifaces: Sequence[str], sys_net: Path = SYS_NET) -> int:
    """The kernel's rx and tx drops of these interfaces so far (a gone interface counts 0)."""
    total = 0
    for iface in ifaces:
        for name in DROP_COUNTERS:
            try:
                total += int((sys_net / iface / "statistics" / name).read_text())
            except (OSError, ValueError):
                continue
    return total


def ring_drops(stats_file: Path) -> int | None:
    """The kernel's drops at the switch's sockets so far, from its --stats-file (None until written)."""
    try:
        doc = json.loads(stats_file.read_text())
    except (OSError, ValueError):
        return None
    return sum(int(port.get("kernel_drops", 0)) for port in doc["ports"].values())


class Sampler:
    """Samples the watched switches on a daemon thread from :meth:`start` until :meth:`stop`."""

    def __init__(self, switches: Mapping[str, Watched], interval: float = INTERVAL, proc: Path = PROC,
                 sys_net: Path = SYS_NET, max_samples: int = MAX_SAMPLES) -> None:
        self.switches = dict(switches)
        self.interval = interval
        self.proc = proc
        self.sys_net = sys_net
        self.samples: deque[Sample] = deque(maxlen=max_samples)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="fidelity-sampler", daemon=True)

    def sample(self) -> Sample:
        """Read every watched switch now, and keep the reading."""
        cpu: dict[str, float] = {}
        drops: dict[str, int] = {}
        rings: dict[str, int] = {}
        for name, watched in self.switches.items():
            seconds = cpu_seconds(watched.pid, self.proc)
            if seconds is not None:
                cpu[name] = seconds
            drops[name] = iface_drops(watched.ifaces, self.sys_net)
            ring = ring_drops(watched.stats_file) if watched.stats_file else None
            if ring is not None:
                rings[name] = ring
        reading = Sample(time.time(), cpu, drops, rings)
        with self._lock:
            self.samples.append(reading)
        return reading

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> None:
        self.sample()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5 * self.interval + 1)

    def report(self, since: float | None = None) -> dict[str, Any]:
        """The busiest switch (largest mean CPU share, as a fraction of one core) and the drops of every
        switch's veths, over the samples from wall time ``since`` (all kept samples if None) to a
        reading taken now (after :meth:`stop`, to the last one); ``limited_by_emulator`` when the busiest
        switch reached SATURATED_CORE or any frame was dropped."""
        if not self._stop.is_set():
            self.sample()
        with self._lock:
            kept = list(self.samples)
        # from the last reading at or before ``since``, so the window covers all of it however short
        first = max((i for i, s in enumerate(kept) if since is not None and s.wall <= since), default=0)
        window = kept[first:]
        shares: dict[str, list[float]] = {}
        for before, after in zip(window, window[1:], strict=False):
            elapsed = after.wall - before.wall
            for name in after.cpu.keys() & before.cpu.keys():
                if elapsed > 0:
                    shares.setdefault(name, []).append((after.cpu[name] - before.cpu[name]) / elapsed)
        veth = growth(window, lambda s: s.drops)
        ring = growth(window, lambda s: s.ring_drops)
        known = any(w.stats_file for w in self.switches.values())  # else no switch writes its ring drops
        drops = veth + (ring if known else 0)
        busiest = max(shares, key=lambda n: (sum(shares[n]) / len(shares[n]), n), default=None)
        cpu_max = max(shares[busiest]) if busiest else 0.0
        cpu_mean = sum(shares[busiest]) / len(shares[busiest]) if busiest else 0.0
        return {
            "busiest_switch": busiest,
            "busiest_cpu_max": round(cpu_max, 3),
            "busiest_cpu_mean": round(cpu_mean, 3),
            "switch_drops": drops,
            "veth_drops": veth,
            "ring_drops": ring if known else None,
            "samples": len(window),
            "seconds": round(window[-1].wall - window[0].wall, 1) if window else 0.0,
            "limited_by_emulator": cpu_max >= SATURATED_CORE or drops > 0,
        }


def growth(window: Sequence[Sample], counts: Callable[[Sample], dict[str, int]]) -> int:
    """How much a per-switch counter rose over the window, all switches (a switch counted from its first
    reading in the window: a stats file appears a second after its switch starts)."""
    first: dict[str, int] = {}
    for sample in window:
        for name, value in counts(sample).items():
            first.setdefault(name, value)
    last = counts(window[-1]) if window else {}
    return sum(max(0, last[name] - first[name]) for name in last)

