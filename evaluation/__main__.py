"""``make eval``: run the experiments, write CSVs, figures and docs/EVALUATION.md.

python -m evaluation [--profile quick|full] [--out DIR] [--doc PATH] [--only 4b,5,...]
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from . import fabric_eval, mixed, overhead, report, scalability, skc_eval
from .common import PROFILES, Context, Section

REPO = Path(__file__).resolve().parent.parent
# build order: the self-contained experiments first, the fabric ones last
EXPERIMENTS: dict[str, Callable[[Context], Section]] = {
    "4b": scalability.run,
    "5": skc_eval.run,
    "2": overhead.run,
    "6": mixed.run,
    "1": fabric_eval.run_dos,
    "3": fabric_eval.run_policies,
    "4a": fabric_eval.run_traceback,
}
TITLES = {
    "1": "DoS impact",
    "2": "Security overhead",
    "3": "Filtering policies",
    "4a": "Traceback on the fabric",
    "4b": "Traceback scalability",
    "5": "Session key cache",
    "6": "Mixed security",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=sorted(PROFILES), default=os.environ.get("EVAL_PROFILE", "full"))
    parser.add_argument("--out", type=Path, help="results directory (default runs/eval-<UTC timestamp>)")
    parser.add_argument("--doc", type=Path, default=REPO / "docs" / "EVALUATION.md", help="report to write")
    parser.add_argument("--only", help=f"comma-separated experiments out of {','.join(EXPERIMENTS)}")
    args = parser.parse_args(argv)
    chosen = args.only.split(",") if args.only else list(EXPERIMENTS)
    unknown = [key for key in chosen if key not in EXPERIMENTS]
    if unknown:
        parser.error(f"unknown experiments {unknown}; choose from {','.join(EXPERIMENTS)}")
    run_id = f"eval-{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
    out = (args.out or REPO / "runs" / run_id).resolve()
    out.mkdir(parents=True, exist_ok=True)
    ctx = Context(PROFILES[args.profile], out)
    ctx.progress("eval", f"profile {args.profile}, experiments {','.join(chosen)}, results in {out}")
    sections, failed = [], []
    with ctx.stack:  # a fabric shared by experiments is torn down here at the latest
        for key in (k for k in EXPERIMENTS if k in chosen):
            ctx.progress(key, f"start: {TITLES[key]}")
            try:
                sections.append(EXPERIMENTS[key](ctx))
            except Exception as err:  # one broken experiment must not lose the others' results
                traceback.print_exc()
                failed.append(key)
                sections.append(Section(key, TITLES[key], "", skipped=f"failed: {type(err).__name__}: {err}"))
            ctx.progress(key, "finished" if key not in failed else "FAILED")
    command = (
        " ".join(shlex.quote(a) for a in ["python", "-m", "evaluation", *sys.argv[1:]])
        if argv is None
        else " ".join(["python -m evaluation", *argv])
    )
    report.write(args.doc, out, sections, command, args.profile, REPO, run_id)
    ctx.progress("eval", f"report {args.doc}, results {out}" + (f"; FAILED: {failed}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
