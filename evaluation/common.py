"""What every experiment shares: the profile, the results directory, progress lines and the section format.

An experiment is a function ``run(ctx) -> Section``. It writes its CSV files and figures through ``ctx``
and returns a :class:`Section`: the tables that put the paper's number beside ours, the files it wrote,
and the direction checks (the claims the test holds the run to).
"""

from __future__ import annotations

import csv
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
from matplotlib.figure import Figure  # noqa: E402


@dataclass(frozen=True)
class Profile:
    """How much work each experiment does. ``quick`` is for CI (minutes), ``full`` for users."""

    name: str
    ddpm_random_pairs: int  # random source/destination pairs walked hop by hop per largest topology
    skc_packets: int  # lookups per simulated cache point
    agent_iterations: int  # latency samples per (mode, payload) point between two agents
    agent_duration: float  # seconds per point and test (bound)
    agent_rounds: int  # interleaved rounds per point (best kept)
    payloads: tuple[int, ...]
    mixed_messages: int  # messages per connection in the mixed-security workload
    skc_trace_messages: int  # messages the agent-driven cache trace sends
    skc_trace_caches: tuple[int, ...]  # cache sizes (entries) the agents run the trace with
    fabric_seconds: float  # legitimate traffic per fabric point
    attackers: tuple[int, ...]
    loads: tuple[int, ...]  # legitimate background flows beside the measured one (offered load)
    topologies: tuple[str, ...]  # fabrics launched for the traceback experiment
    routings: tuple[str, ...]
    traceback_trials: int  # spoofed floods per launched topology (each from another host)


PROFILES = {
    "quick": Profile(
        name="quick",
        ddpm_random_pairs=0,
        skc_packets=6_000,
        agent_iterations=60,
        agent_duration=0.4,
        agent_rounds=2,
        payloads=(64, 256, 1024),
        mixed_messages=120,
        skc_trace_messages=400,
        skc_trace_caches=(4, 16),
        fabric_seconds=6.0,
        attackers=(0, 2),
        loads=(0,),
        topologies=("fat-tree",),
        routings=("deterministic",),
        traceback_trials=3,
    ),
    "full": Profile(
        name="full",
        ddpm_random_pairs=10,
        skc_packets=40_000,
        agent_iterations=600,
        agent_duration=1.5,
        agent_rounds=5,
        payloads=(64, 128, 256, 512, 1024, 4096),
        mixed_messages=300,
        skc_trace_messages=3_000,
        skc_trace_caches=(2, 4, 8, 16),
        fabric_seconds=10.0,
        attackers=(0, 1, 2, 3, 4),
        loads=(0, 1, 3),
        topologies=("fat-tree", "mesh", "torus", "hypercube", "mesh3d"),
        routings=("deterministic", "adaptive"),
        traceback_trials=4,
    ),
}


@dataclass
class Table:
    """One Markdown table of EVALUATION.md: every cell filled by the run."""

    caption: str
    headers: list[str]
    rows: list[list[str]]


@dataclass
class Section:
    """One experiment's contribution to the report."""

    key: str  # "1" .. "6", "4a", "4b"
    title: str
    paper: str  # the paper's claim, with its source
    tables: list[Table] = field(default_factory=list)
    csvs: list[str] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checks: dict[str, bool] = field(default_factory=dict)  # direction the paper claims -> holds here
    limits: dict[str, str] = field(default_factory=dict)  # check that does not hold -> what limited it here
    skipped: str | None = None  # why the experiment could not run (the section says so)


@dataclass
class Context:
    """The run's profile and results directory, and the progress printer."""

    profile: Profile
    out: Path
    started: float = field(default_factory=time.monotonic)
    say: Callable[[str], None] = print
    tracebacks: list[dict[str, Any]] = field(default_factory=list)  # every fabric run's, judged (4a)
    shared: dict[str, Any] = field(default_factory=dict)  # what several experiments use (one fabric)
    stack: ExitStack = field(default_factory=ExitStack)  # closed when the evaluation ends, even on error

    def progress(self, step: str, text: str) -> None:
        self.say(f"[eval {time.monotonic() - self.started:7.1f} s] {step}: {text}")

    def write_csv(self, name: str, rows: Sequence[dict[str, Any]]) -> str:
        """``name``.csv in the results directory, columns from the first row; returns the file name."""
        if not rows:
            raise ValueError(f"{name}: no rows to write")
        path = self.out / f"{name}.csv"
        with path.open("w", newline="") as stream:
            writer = csv.DictWriter(stream, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        return path.name

    def save(self, fig: Figure, name: str) -> str:
        """``name``.png in the results directory; returns the file name."""
        path = self.out / f"{name}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path.name


SATURATED = 0.9  # share of the machine's CPU time busy from which the emulator, not the fabric, sets the pace


def cpu_times(stat: Path = Path("/proc/stat")) -> tuple[int, int]:
    """(busy, total) CPU time of the whole machine since boot, in clock ticks (the first line of
    /proc/stat: user nice system idle iowait irq softirq steal; idle and iowait are not busy)."""
    ticks = [int(v) for v in stat.read_text().split("\n", 1)[0].split()[1:9]]
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)


def busy_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The share of all CPUs' time that was busy between two :func:`cpu_times` readings."""
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total > 0 else 0.0


def fmt(value: float, digits: int = 1) -> str:
    """A number for a table cell: fixed point, thousands separated, no trailing noise."""
    return f"{value:,.{digits}f}"


def pct(value: float, digits: int = 1) -> str:
    return f"{100 * value:.{digits}f} %"


def new_figure(
    title: str, xlabel: str, ylabel: str, size: tuple[float, float] = (8, 5)
) -> tuple[Figure, Any]:
    fig, ax = plt.subplots(figsize=size)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    return fig, ax


def rows_of(
    records: Iterable[dict[str, Any]], columns: Sequence[tuple[str, Callable[[Any], str]]]
) -> list[list[str]]:
    """Table rows from records: each column is (key, formatter)."""
    return [[form(record[key]) for key, form in columns] for record in records]
