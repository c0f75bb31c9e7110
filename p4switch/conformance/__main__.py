"""`python -m p4switch.conformance DIR`: p4c's v1model test corpus through p4switch.

    python -m p4switch.conformance ../shared/p4lang/p4_16_samples [--jobs N] [--timeout S]
        [--report DIR] [--baseline FILE] [--write-baseline FILE] [--docs FILE] [--p4c PATH]
        [--bmv2-json] [--engine python|native] [NAME ...]

Prints a progress line per program and the summary table, writes report.json and report.txt (every
program: compiled or refused with file:line:col and construct, P4Info differences from p4c's, STF
mismatches) to --report. With --bmv2-json the corpus goes the other way: the real p4c-bm2-ss compiles
every program and p4switch runs its STF case from that BMv2 JSON (p4switch/bmv2json). Exit status 1
when an STF case gives a wrong output, anything crashes or times out, or (with --baseline) a program
does worse than the baseline says; 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from p4switch.conformance import report
from p4switch.conformance.runner import Outcome, discover, find_manifest, run_all


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m p4switch.conformance", description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", type=Path, metavar="DIR", help="p4c's testdata/p4_16_samples (or a part of it)")
    ap.add_argument("names", nargs="*", metavar="NAME", help="only these programs (file names without .p4)")
    ap.add_argument(
        "--manifest", type=Path, help="which programs p4c accepts (default: DIR/../manifest.json)"
    )
    ap.add_argument("--p4c", help="run this p4c-bm2-ss for p4c's verdict and P4Info where no manifest says")
    ap.add_argument(
        "--bmv2-json",
        action="store_true",
        help="p4c-bm2-ss (--p4c, else the one on PATH) compiles each program, p4switch runs its BMv2 JSON",
    )
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="programs at a time")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per program (default 120)")
    ap.add_argument("--report", type=Path, default=Path("build/conformance"), help="where the reports go")
    ap.add_argument("--baseline", type=Path, help="fail on programs doing worse than this (JSON)")
    ap.add_argument("--write-baseline", type=Path, metavar="FILE", help="write this run as a baseline")
    ap.add_argument("--docs", type=Path, metavar="FILE", help="write the coverage page (docs/conformance.md)")
    ap.add_argument("--engine", choices=("python", "native"), default="python",
                    help="the engine that runs the STF cases (native: programs it cannot run fall back to "
                    "Python, counted in the summary)")
    args = ap.parse_args(argv)
    if not args.corpus.is_dir():
        ap.error(f"{args.corpus} is not a directory")
    if args.p4c and not shutil.which(args.p4c):
        ap.error(f"{args.p4c} not found")
    if args.bmv2_json:
        args.p4c = args.p4c or shutil.which("p4c-bm2-ss")
        if not args.p4c:
            ap.error("--bmv2-json needs p4c-bm2-ss: give --p4c PATH or put it on PATH")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    manifest = args.manifest or find_manifest(args.corpus)
    programs = discover(args.corpus, manifest, args.names)
    if not programs:
        print(f"no V1Switch programs in {args.corpus}", file=sys.stderr)
        return 2
    if args.bmv2_json:
        source = f"BMv2 JSON from {args.p4c}"
    elif manifest:
        source = f"p4c's verdicts from {manifest}"
    else:
        source = "p4c-bm2-ss run here" if args.p4c else "no p4c"
    print(f"{len(programs)} programs from {args.corpus} ({source}), {args.jobs} at a time", flush=True)
    args.report.mkdir(parents=True, exist_ok=True)
    done: list[Outcome] = []

    def progress(outcome: Outcome) -> None:
        done.append(outcome)
        print(report.progress_line(len(done), len(programs), outcome), flush=True)

    with tempfile.TemporaryDirectory(prefix="p4c-", dir=args.report) as workdir:
        outcomes = run_all(
            programs,
            jobs=args.jobs,
            timeout=args.timeout,
            workdir=Path(workdir),
            p4c=args.p4c if args.bmv2_json or not manifest else None,
            bmv2_json=args.bmv2_json,
            engine=args.engine,
            on_done=progress,
        )
    summary = report.summarize(outcomes)
    report.write_reports(outcomes, summary, args.report)
    print("\n" + report.summary_table(summary))
    print(f"\nreports: {args.report / 'report.txt'}, {args.report / 'report.json'}")
    if args.write_baseline:
        args.write_baseline.write_text(
            json.dumps(report.baseline_of(outcomes), indent=1, sort_keys=True) + "\n"
        )
    if args.docs:
        old = args.docs.read_text() if args.docs.is_file() else ""
        if args.bmv2_json:
            page = report.with_bmv2_section(old, report.bmv2_section(outcomes, summary, str(args.corpus)))
        else:
            page = report.with_bmv2_section(report.coverage_page(outcomes, summary, str(args.corpus)),
                                            report.bmv2_section_of(old))
        args.docs.write_text(page)
    problems = report.failures(outcomes)
    if args.baseline:
        problems += report.regressions(outcomes, json.loads(args.baseline.read_text()))
    for problem in problems:
        print(f"FAIL {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
