"""The corpus runner's worker process: checks one program at a time, so that a hang or a crash costs
the runner one program (it kills the worker and starts another), never the run.

Protocol (JSON, one object a line): the runner writes a job ``{"program": P4 path, "stf": path or
null, "reference_p4info": path or null, "p4c": p4c-bm2-ss path or null, "workdir": dir, "engine":
"python" or "native"}``; the worker
answers with one line per phase as it finishes it (``{"phase": "reference" | "compile" | "p4info" |
"stf", ...}``, see ``check``) and ``{"phase": "done"}``. A phase that never answers is the one that
hung or crashed.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from p4switch import bmv2json, ir, stf
from p4switch.conformance import p4info_diff
from p4switch.conformance.driver import InProcessRun, StfFailure
from p4switch.engine.api import ProgramError
from p4switch.frontend.cli import Compiled, compile_file
from p4switch.frontend.errors import P4Error

MEMORY_LIMIT = 4 << 30
"""Address space of a worker: a program that makes the front end or engine blow up fails alone."""
P4C_TIMEOUT = 800.0
"""p4c-bm2-ss on a large program (switch_p4_16: 37 s of CPU) took 275-300 s of wall time at load 20-30 on
2 cores; a bound for hangs, not a budget."""
_UNSUPPORTED = re.compile(
    r"^(?P<where>.*?:\d+:\d+): (?P<construct>.*) (?:is|are) not supported by p4switch$", re.S
)
_WHERE = re.compile(r"^(?P<where>.*?:\d+:\d+): (?P<message>.*)$", re.S)

Result = dict[str, Any]


def refusal(message: str) -> Result:
    """A compile or load error: `unsupported` (names a construct p4switch does not implement) or
    `rejected` (a syntax, name or type error: on a program p4c accepts, a bug of p4switch)."""
    m = _UNSUPPORTED.match(message.strip())
    if m:
        return {"status": "unsupported", "where": m["where"], "construct": m["construct"], "message": message}
    m = _WHERE.match(message.strip())
    where, text = (m["where"], m["message"]) if m else ("", message.strip())
    return {"status": "rejected", "where": where, "message": text}


def crash(exc: BaseException) -> Result:
    lines = traceback.format_exception(exc)
    return {"status": "crashed", "message": f"{type(exc).__name__}: {exc}", "traceback": "".join(lines[-8:])}


def reference(program: Path, p4c: str, workdir: Path) -> Result:
    """Compile with the real p4c-bm2-ss: does p4c accept the program, and its P4Info."""
    p4info = workdir / f"{program.stem}.p4info.txtpb"
    try:
        done = subprocess.run(
            [
                p4c,
                str(program),
                "-o",
                str(workdir / f"{program.stem}.json"),
                "--p4runtime-files",
                str(p4info),
            ],
            capture_output=True,
            text=True,
            timeout=P4C_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return {"accepted": None, "message": f"p4c-bm2-ss took more than {P4C_TIMEOUT:.0f} s"}
    accepted = done.returncode == 0
    return {"accepted": accepted, "p4info": str(p4info) if accepted else None, "message": done.stderr[-2000:]}


def compile_program(program: Path, engine: str = "python") -> tuple[Result, Compiled | None, str]:
    """Front end, then the engine's load (which refuses some constructs too). The result says which
    engine runs the program (the native one may leave it to the Python engine, saying why)."""
    try:
        compiled = compile_file(program)
        ir_json = compiled.ir_json()
        switch = InProcessRun.load(ir_json, engine=engine).switch
    except (P4Error, ProgramError) as exc:
        return refusal(str(exc)), None, ""
    except Exception as exc:  # noqa: BLE001 - a bug of p4switch: reported, never fatal to the run
        return crash(exc), None, ""
    result: Result = {"status": "compiled", "engine": switch.engine}
    if switch.engine_note:
        result["engine_note"] = switch.engine_note
    return result, compiled, ir_json


def load_bmv2_json(program: Path, workdir: Path) -> tuple[Result, str]:
    """p4c-bm2-ss's BMv2 JSON of the program (written by `reference`) through p4switch's BMv2 JSON
    loader, then the engine's load."""
    try:
        doc = json.loads((workdir / f"{program.stem}.json").read_text())
        ir_json = json.dumps(ir.to_json(bmv2json.load(doc, f"{program.stem}.json")))
        InProcessRun.load(ir_json)
    except bmv2json.Unsupported as exc:
        where, construct = exc.where, exc.construct
        return {"status": "unsupported", "where": where, "construct": construct, "message": str(exc)}, ""
    except (bmv2json.BMv2JsonError, ProgramError) as exc:
        return refusal(str(exc)), ""
    except Exception as exc:  # noqa: BLE001 - a bug of p4switch: reported, never fatal to the run
        return crash(exc), ""
    return {"status": "compiled"}, ir_json


def compare_p4info(compiled: Compiled, reference_p4info: Path) -> Result:
    try:
        diffs = p4info_diff.differences(compiled.p4info, p4info_diff.read_text(reference_p4info))
    except Exception as exc:  # noqa: BLE001 - an unreadable reference is reported with the program
        return {"compared": False, "message": f"{type(exc).__name__}: {exc}"}
    return {"compared": True, "differences": diffs}


def run_stf(ir_json: str, case: Path, engine: str = "python") -> Result:
    """`passed`, `wrong` (ran, output differs from the file), `failed` (a command could not be applied)
    or `crashed` (the engine raised inside a packet: counted as internal_error)."""
    try:
        commands = stf.load(case)
        run = InProcessRun.load(ir_json, p4c=True, engine=engine)
        mismatches = run.execute(commands)
    except (stf.StfError, StfFailure) as exc:
        return {"status": "failed", "message": str(exc)}
    except Exception as exc:  # noqa: BLE001 - a driver bug, reported with the case
        return crash(exc)
    errors = run.switch.stats.get("internal_error", 0)
    if errors:
        return {"status": "crashed", "message": f"{errors} frames hit an internal error of the engine"}
    return {"status": "wrong", "mismatches": mismatches} if mismatches else {"status": "passed"}


def check(job: dict[str, Any]) -> Iterator[Result]:
    """The phases of one job, each as soon as it is done."""
    program = Path(job["program"])
    reference_p4info = job.get("reference_p4info")
    if job.get("p4c"):
        ref = reference(program, job["p4c"], Path(job["workdir"]))
        yield {"phase": "reference", **ref}
        reference_p4info = ref.get("p4info")
        if job.get("bmv2_json"):
            yield from check_bmv2_json(job, bool(ref["accepted"]))
            return
    engine = job.get("engine", "python")
    result, compiled, ir_json = compile_program(program, engine)
    yield {"phase": "compile", **result}
    if compiled is not None and reference_p4info:
        yield {"phase": "p4info", **compare_p4info(compiled, Path(reference_p4info))}
    if job.get("stf") and compiled is not None:
        yield {"phase": "stf", **run_stf(ir_json, Path(job["stf"]), engine)}


def check_bmv2_json(job: dict[str, Any], accepted: bool) -> Iterator[Result]:
    """The corpus the other way: p4switch runs p4c-bm2-ss's BMv2 JSON of the program."""
    if not accepted:
        return
    result, ir_json = load_bmv2_json(Path(job["program"]), Path(job["workdir"]))
    yield {"phase": "compile", **result}
    if job.get("stf") and ir_json:
        yield {"phase": "stf", **run_stf(ir_json, Path(job["stf"]), job.get("engine", "python"))}


def main() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # whatever else prints cannot garble the answers
    for line in sys.stdin:
        for result in check(json.loads(line)):
            answers.write(json.dumps(result) + "\n")
            answers.flush()
        answers.write(json.dumps({"phase": "done"}) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
