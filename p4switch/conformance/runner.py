"""The corpus runner: every program of a directory of p4c test programs (testdata/p4_16_samples) through
p4switch-cc, p4switch's engine and the program's STF case, each in a worker process bounded in time.

Which programs and what p4c makes of them comes from the directory: a ``manifest.json`` beside it or in
it (``{name: {"p4c_bm2_ss_rc": 0, ...}}``, as ../shared/p4lang has) and p4c's P4Info for each in
``p4c-reference/NAME.p4info.txtpb``; or, with ``p4c`` given, from running the real p4c-bm2-ss on each
program; otherwise every ``*.p4`` that instantiates ``V1Switch``.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

Result = dict[str, Any]


@dataclass
class Program:
    """One program of the corpus and what is known of it before running."""

    name: str
    path: Path
    stf: Path | None
    p4c_accepts: bool | None  # None: not known (no manifest, no p4c)
    reference_p4info: Path | None


@dataclass
class Outcome:
    """What happened to one program: one result per phase (see worker.check)."""

    program: Program
    reference: Result | None = None
    compile: Result = field(default_factory=lambda: {"status": "not run"})
    p4info: Result | None = None
    stf: Result | None = None
    seconds: float = 0.0
    asks_p4c: bool = False  # the worker runs p4c-bm2-ss first

    @property
    def accepted(self) -> bool | None:
        """Does p4c accept the program (from the manifest, or from running p4c)?"""
        if self.reference is not None and self.reference.get("accepted") is not None:
            return bool(self.reference["accepted"])
        return self.program.p4c_accepts

    @property
    def stf_status(self) -> str | None:
        """passed, wrong, failed, crashed, timed out, or `not run` (not compiled); None: no STF case."""
        if self.program.stf is None:
            return None
        return self.stf["status"] if self.stf else "not run"

    def to_json(self) -> Result:
        return {
            "program": self.program.name,
            "source": str(self.program.path),
            "p4c_accepts": self.accepted,
            "compile": self.compile,
            "p4info": self.p4info,
            "stf": self.stf if self.program.stf else None,
            "stf_status": self.stf_status,
            "reference": self.reference,
            "seconds": round(self.seconds, 2),
        }


def find_manifest(corpus: Path) -> Path | None:
    for candidate in (corpus / "manifest.json", corpus.parent / "manifest.json"):
        if candidate.is_file():
            return candidate
    return None


def discover(corpus: Path, manifest: Path | None, names: list[str] | None = None) -> list[Program]:
    """The programs to run, in name order (only ``names`` if given)."""
    known: dict[str, Any] = json.loads(manifest.read_text()) if manifest else {}
    if known:
        candidates = [corpus / f"{name}.p4" for name in known]
    else:
        candidates = [
            p for p in corpus.glob("*.p4") if p.is_file() and "V1Switch" in p.read_text(errors="replace")
        ]
    programs = []
    for path in sorted(p for p in candidates if p.is_file()):
        if names and path.stem not in names:
            continue
        entry = known.get(path.stem, {})
        rc = entry.get("p4c_bm2_ss_rc")
        stf = path.with_suffix(".stf")
        reference = corpus / "p4c-reference" / f"{path.stem}.p4info.txtpb"
        programs.append(
            Program(
                path.stem,
                path,
                stf if stf.is_file() else None,
                None if rc is None else rc == 0,
                reference if reference.is_file() else None,
            )
        )
    return programs


class Worker:
    """One `python -m p4switch.conformance.worker` process and the job it is on."""

    def __init__(self, log: IO[bytes]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "p4switch.conformance.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin = self.proc.stdin
        self.fd = self.proc.stdout.fileno()
        self.buffer = b""
        self.outcome: Outcome | None = None
        self.started = 0.0

    def give(self, outcome: Outcome, job: Result) -> None:
        self.outcome, self.started = outcome, time.monotonic()
        outcome.asks_p4c = bool(job.get("p4c"))
        self.stdin.write((json.dumps(job) + "\n").encode())
        self.stdin.flush()

    def lines(self) -> list[Result] | None:
        """The answers that arrived (None: the worker is gone)."""
        data = os.read(self.fd, 65536)
        if not data:
            return None
        self.buffer += data
        *complete, self.buffer = self.buffer.split(b"\n")
        return [json.loads(line) for line in complete if line.strip()]

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.stdin.close()


def pending_phase(outcome: Outcome) -> str:
    """The phase a worker was on when it died or ran out of time."""
    if outcome.asks_p4c and outcome.reference is None:
        return "reference"
    if outcome.compile["status"] == "not run":
        return "compile"
    return "stf"


def record(outcome: Outcome, answer: Result) -> None:
    phase = answer.pop("phase")
    if phase == "reference":
        outcome.reference = answer
    elif phase == "compile":
        outcome.compile = answer
    elif phase == "p4info":
        outcome.p4info = answer
    elif phase == "stf":
        outcome.stf = answer


def fail_pending(outcome: Outcome, status: str, message: str) -> None:
    result = {"status": status, "message": message}
    phase = pending_phase(outcome)
    if phase == "reference":  # p4c-bm2-ss itself: its verdict stays unknown, p4switch was not tried
        outcome.reference = {"accepted": None, "message": f"p4c-bm2-ss {status}: {message}"}
    elif phase == "compile":
        outcome.compile = result
    else:
        outcome.stf = result


class Pool:
    """Workers running jobs, at most ``jobs`` at a time, each bounded by ``timeout`` seconds."""

    def __init__(self, jobs: int, timeout: float, log: IO[bytes], on_done: Callable[[Outcome], None]) -> None:
        self.jobs, self.timeout, self.log, self.on_done = jobs, timeout, log, on_done
        self.selector = selectors.DefaultSelector()
        self.idle: list[Worker] = []
        self.busy: list[Worker] = []

    def start(self, outcome: Outcome, job: Result) -> None:
        if self.idle:
            worker = self.idle.pop()
        else:
            worker = Worker(self.log)
            self.selector.register(worker.fd, selectors.EVENT_READ, worker)
        worker.give(outcome, job)
        self.busy.append(worker)

    def finish(self, worker: Worker, keep: bool) -> None:
        assert worker.outcome is not None
        worker.outcome.seconds = time.monotonic() - worker.started
        self.on_done(worker.outcome)
        worker.outcome = None
        self.busy.remove(worker)
        if keep:
            self.idle.append(worker)
        else:
            self.selector.unregister(worker.fd)
            worker.stop()

    def wait(self) -> None:
        """Handle the answers that come before the first deadline, then the workers past theirs."""
        deadline = min(w.started for w in self.busy) + self.timeout
        for key, _ in self.selector.select(max(0.0, deadline - time.monotonic())):
            worker: Worker = key.data
            outcome = worker.outcome
            answers = worker.lines()
            if outcome is None:  # an idle worker can only have died
                self.idle.remove(worker)
                self.selector.unregister(worker.fd)
                worker.stop()
            elif answers is None:
                fail_pending(outcome, "crashed", f"the worker died (exit status {worker.proc.wait()})")
                self.finish(worker, keep=False)
            else:
                for answer in answers:
                    if answer.get("phase") == "done":
                        self.finish(worker, keep=True)
                        break
                    record(outcome, answer)
        now = time.monotonic()
        for worker in [w for w in self.busy if now - w.started > self.timeout]:
            assert worker.outcome is not None
            fail_pending(worker.outcome, "timed out", f"no answer within {self.timeout:.0f} s")
            self.finish(worker, keep=False)

    def close(self) -> None:
        for worker in self.idle + self.busy:
            worker.stop()
        self.selector.close()


def largest_first(programs: list[Program]) -> list[Program]:
    """The order the pool takes programs in: the biggest source first (name order among equals). One
    program can take far longer than the rest together (p4c-bm2-ss spends about 40 s of CPU on
    switch_p4_16, under 0.5 s on most others): started last, as name order would, it runs alone on one
    core at the end while the others idle; started first, the small ones fill the other cores meanwhile."""
    return sorted(programs, key=lambda p: -p.path.stat().st_size)


def run_all(
    programs: list[Program],
    *,
    jobs: int,
    timeout: float,
    workdir: Path,
    p4c: str | None = None,
    bmv2_json: bool = False,
    engine: str = "python",
    on_done: Callable[[Outcome], None] = lambda outcome: None,
) -> list[Outcome]:
    """Every program through a pool of ``jobs`` workers on ``engine`` (loader.load; with ``bmv2_json``: p4c
    compiles each program and p4switch runs its BMv2 JSON instead of p4switch-cc's output); a program over
    ``timeout`` seconds, or whose worker dies, is recorded as timed out or crashed in the phase it was in,
    and its worker replaced. Programs start largest first (largest_first); outcomes come back in the
    order of ``programs``."""
    queue = deque(largest_first(programs))
    outcomes = {p.name: Outcome(p) for p in programs}
    with (workdir / "workers.log").open("ab") as log:
        pool = Pool(jobs, timeout, log, on_done)
        try:
            while queue or pool.busy:
                while queue and len(pool.busy) < jobs:
                    program = queue.popleft()
                    job = {
                        "program": str(program.path),
                        "stf": str(program.stf) if program.stf else None,
                        "reference_p4info": str(program.reference_p4info)
                        if program.reference_p4info
                        else None,
                        "p4c": p4c,
                        "bmv2_json": bmv2_json,
                        "workdir": str(workdir),
                        "engine": engine,
                    }
                    pool.start(outcomes[program.name], job)
                pool.wait()
        finally:
            pool.close()
    return [outcomes[p.name] for p in programs]
