"""Front-end benchmark: `python -m p4switch.frontend.bench` prints compile times per stage and program.

Stages: preprocess, parse (LALR), elaborate (type check + IR lowering), p4info. Each figure is the median
of RUNS compiles in this process (the grammar tables are built once, as in a long-running tool).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from p4switch.frontend import p4info
from p4switch.frontend.elaborate import Elaborator
from p4switch.frontend.parser import parse
from p4switch.frontend.preprocess import preprocess

RUNS = 5
ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = [
    ROOT / "p4switch" / "tests" / "programs" / "l2fwd.p4",
    ROOT / "p4switch" / "tests" / "programs" / "ngsdn_style.p4",
    ROOT / "p4src" / "main.p4",
]


def time_stages(path: Path) -> dict[str, float]:
    """Seconds per stage for one compile of `path`."""
    t0 = time.perf_counter()
    text, smap = preprocess(path)
    t1 = time.perf_counter()
    tree = parse(text, smap)
    t2 = time.perf_counter()
    elab = Elaborator(tree, smap, text, path.name)
    program = elab.run()
    t3 = time.perf_counter()
    program, ids = p4info.assign_ids(program, elab.p4info_extras())
    p4info.build(program, elab.p4info_extras(), ids)
    t4 = time.perf_counter()
    return {
        "preprocess": t1 - t0,
        "parse": t2 - t1,
        "elaborate": t3 - t2,
        "p4info": t4 - t3,
        "total": t4 - t0,
    }


def main() -> None:
    time_stages(PROGRAMS[0])  # build the LALR tables once
    totals: dict[str, float] = {}
    print(
        f"{'program':<16} {'lines':>6} "
        + " ".join(f"{s:>11}" for s in ("preprocess", "parse", "elaborate", "p4info", "total"))
    )
    for path in PROGRAMS:
        if not path.exists():
            print(f"{path.name:<16} missing")
            continue
        runs = [time_stages(path) for _ in range(RUNS)]
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        text, _ = preprocess(path)
        lines = sum(1 for line in text.splitlines() if line.strip())
        totals[path.name] = med["total"]
        print(f"{path.name:<16} {lines:>6} " + " ".join(f"{med[k] * 1000:>9.1f}ms" for k in med))
    if "l2fwd.p4" in totals and "main.p4" in totals:
        print(f"main.p4 / l2fwd.p4 compile time ratio: {totals['main.p4'] / totals['l2fwd.p4']:.1f}")


if __name__ == "__main__":
    main()
