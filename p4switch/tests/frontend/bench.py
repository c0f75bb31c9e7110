"""Front-end benchmark: `python -m p4switch.tests.frontend.bench` prints compile times per pass and program.

The passes are those of p4switch.frontend.passes.PASSES, in order. Each figure is the median of RUNS
compiles in this process (the grammar tables are built once, as in a long-running tool).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from p4switch.frontend.passes import PASSES, Compilation
from p4switch.frontend.preprocess import preprocess

RUNS = 5
ROOT = Path(__file__).resolve().parents[3]
PROGRAMS = [
    ROOT / "p4switch" / "tests" / "programs" / "l2fwd.p4",
    ROOT / "p4switch" / "tests" / "programs" / "ngsdn_style.p4",
    ROOT / "p4src" / "main.p4",
]


def time_passes(path: Path) -> dict[str, float]:
    """Seconds per pass for one compile of `path`, and their total."""
    c = Compilation(path)
    times = {}
    for step in PASSES:
        t0 = time.perf_counter()
        step.run(c)
        times[step.name] = time.perf_counter() - t0
    times["total"] = sum(times.values())
    return times


def main() -> None:
    time_passes(PROGRAMS[0])  # build the LALR tables once
    totals: dict[str, float] = {}
    columns = [step.name for step in PASSES] + ["total"]
    print(f"{'program':<16} {'lines':>6} " + " ".join(f"{name[:10]:>10}" for name in columns) + "  (ms)")
    for path in PROGRAMS:
        if not path.exists():
            print(f"{path.name:<16} missing")
            continue
        runs = [time_passes(path) for _ in range(RUNS)]
        med = {k: statistics.median(r[k] for r in runs) for k in columns}
        text, _ = preprocess(path)
        lines = sum(1 for line in text.splitlines() if line.strip())
        totals[path.name] = med["total"]
        print(f"{path.name:<16} {lines:>6} " + " ".join(f"{med[k] * 1000:>10.1f}" for k in columns))
    if "l2fwd.p4" in totals and "main.p4" in totals:
        print(f"main.p4 / l2fwd.p4 compile time ratio: {totals['main.p4'] / totals['l2fwd.p4']:.1f}")


if __name__ == "__main__":
    main()
