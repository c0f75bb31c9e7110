"""What the corpus runner reports: a progress line per program, the summary table, the reports
(report.json, report.txt), regressions against a baseline, and the coverage page (docs/conformance.md)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from p4switch.conformance.runner import Outcome

COMPILE_STATES = ("compiled", "unsupported", "rejected", "crashed", "timed out")
STF_STATES = ("passed", "wrong", "failed", "crashed", "timed out", "not run")
_RANK = {state: i for i, state in enumerate(("compiled", "unsupported", "rejected", "crashed", "timed out"))}


def p4info_count(outcome: Outcome) -> int | None:
    """Differences from p4c's P4Info (None: not compared)."""
    p4info = outcome.p4info
    if not p4info or not p4info.get("compared"):
        return None
    return len(p4info["differences"])


def progress_line(index: int, total: int, outcome: Outcome) -> str:
    compiled = outcome.compile["status"]
    parts = [compiled if compiled != "unsupported" else "refused"]
    if compiled in ("unsupported", "rejected"):
        parts[0] += f": {outcome.compile.get('where', '')} {short_reason(outcome.compile)}"
    if outcome.stf_status:
        parts.append(f"STF {outcome.stf_status}")
    count = p4info_count(outcome)
    if count is not None:
        parts.append(f"P4Info {count} difference{'s' if count != 1 else ''}")
    if outcome.accepted is False:
        parts.append("(p4c rejects it)")
    if outcome.compile.get("engine_note"):
        parts.append("(Python engine: the native one cannot run it)")
    width = len(str(total))
    return (
        f"[{index:{width}}/{total}] {outcome.program.name:<44} {' · '.join(parts)}  {outcome.seconds:.1f} s"
    )


def short_reason(result: dict[str, Any]) -> str:
    text = result.get("construct") or result.get("message", "")
    return f"{text[:100]} not supported" if result.get("construct") else text[:100]


def summarize(outcomes: list[Outcome]) -> dict[str, Any]:
    """Counts over the programs p4c accepts (all programs when that is not known)."""
    known = any(o.accepted is not None for o in outcomes)
    scope = [o for o in outcomes if o.accepted] if known else outcomes
    compile_counts = Counter(o.compile["status"] for o in scope)
    stf_counts = Counter(o.stf_status for o in scope if o.stf_status)
    compared = [c for o in scope if (c := p4info_count(o)) is not None]
    return {
        "programs": len(outcomes),
        "p4c_accepts": len(scope) if known else None,
        "compile": {state: compile_counts.get(state, 0) for state in COMPILE_STATES},
        "stf_cases": sum(stf_counts.values()),
        "stf": {state: stf_counts.get(state, 0) for state in STF_STATES},
        "p4info": {
            "compared": len(compared),
            "identical": sum(1 for c in compared if c == 0),
            "differences": sum(compared),
        },
        "engines": dict(Counter(o.compile["engine"] for o in scope if o.compile.get("engine"))),
        "fell_back": sum(1 for o in scope if o.compile.get("engine_note")),
        "p4c_rejects_p4switch_compiles": sorted(
            o.program.name for o in outcomes if o.accepted is False and o.compile["status"] == "compiled"
        ),
    }


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:5.1f} %" if whole else "      "


def summary_table(summary: dict[str, Any]) -> str:
    total = summary["p4c_accepts"] if summary["p4c_accepts"] is not None else summary["programs"]
    scope = (
        f"{summary['programs']} programs, {summary['p4c_accepts']} accepted by p4c-bm2-ss"
        if summary["p4c_accepts"] is not None
        else f"{summary['programs']} programs (p4c's verdict unknown: counts are over all)"
    )
    names = {
        "compiled": "compiled",
        "unsupported": "refused: construct not supported",
        "rejected": "rejected with an error (a bug)",
        "crashed": "crashed",
        "timed out": "timed out",
    }
    lines = [scope, "", f"  {'programs':<40} {'count':>6} {'share':>8}"]
    for state, name in names.items():
        lines.append(f"  {name:<40} {summary['compile'][state]:>6} {_pct(summary['compile'][state], total)}")
    cases = summary["stf_cases"]
    lines += ["", f"  {'STF cases':<40} {cases:>6}"]
    for state in STF_STATES:
        label = {"wrong": "wrong output (no error)", "failed": "failed (refused at run time)"}.get(
            state, state
        )
        lines.append(f"  {label:<40} {summary['stf'][state]:>6} {_pct(summary['stf'][state], cases)}")
    engines = summary.get("engines", {})
    if engines.get("native") or summary.get("fell_back"):  # a run with --engine native
        lines += ["", f"  native engine: {engines.get('native', 0)} programs ran in C, "
                  f"{summary['fell_back']} on the Python engine (the reason is in the report)"]
    p4info = summary["p4info"]
    lines += [
        "",
        f"  P4Info compared with p4c's: {p4info['compared']} programs, {p4info['identical']} identical, "
        f"{p4info['differences']} differences in the others",
    ]
    return "\n".join(lines)


def details(outcome: Outcome) -> list[str]:
    """The readable report of one program."""
    lines = [f"== {outcome.program.name} ({outcome.program.path})"]
    accepted = {True: "accepts it", False: "rejects it", None: "?"}[outcome.accepted]
    lines.append(f"p4c-bm2-ss: {accepted}")
    c = outcome.compile
    lines.append(f"p4switch-cc: {c['status']}" + (f" at {c['where']}" if c.get("where") else ""))
    if c.get("engine_note"):
        lines.append(f"  {c['engine_note']}")
    if c.get("construct"):
        lines.append(f"  not supported: {c['construct']}")
    elif c.get("message"):
        lines.append(f"  {c['message']}")
    if c.get("traceback"):
        lines += ["  " + line for line in c["traceback"].splitlines()]
    if outcome.p4info is not None:
        diffs = outcome.p4info.get("differences", [])
        lines.append(
            f"P4Info: {len(diffs)} differences from p4c's"
            if outcome.p4info.get("compared")
            else f"P4Info: not compared ({outcome.p4info.get('message')})"
        )
        lines += ["  " + d for d in diffs]
    if outcome.stf_status:
        lines.append(f"STF {outcome.program.stf.name if outcome.program.stf else ''}: {outcome.stf_status}")
        stf = outcome.stf or {}
        lines += ["  " + m for m in stf.get("mismatches", [])]
        if stf.get("message"):
            lines.append(f"  {stf['message']}")
    return lines


def write_reports(outcomes: list[Outcome], summary: dict[str, Any], directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    data = {"summary": summary, "programs": [o.to_json() for o in outcomes]}
    (directory / "report.json").write_text(json.dumps(data, indent=1) + "\n")
    text = [summary_table(summary), ""]
    for outcome in outcomes:
        text += details(outcome) + [""]
    (directory / "report.txt").write_text("\n".join(text))


def baseline_of(outcomes: list[Outcome]) -> dict[str, Any]:
    """Per program: what a later run must not fall below."""
    return {
        o.program.name: {"compile": o.compile["status"], "stf": o.stf_status, "p4info": p4info_count(o)}
        for o in outcomes
    }


def regressions(outcomes: list[Outcome], baseline: dict[str, Any]) -> list[str]:
    """Programs that compiled and no longer do, STF cases that passed and no longer do, P4Info with more
    differences than before."""
    out = []
    for o in outcomes:
        before = baseline.get(o.program.name)
        if before is None:
            continue
        now = o.compile["status"]
        if _RANK.get(now, 9) > _RANK.get(before["compile"], 9) and before["compile"] == "compiled":
            out.append(f"{o.program.name}: compiled before, now {now}")
        if before.get("stf") == "passed" and o.stf_status != "passed":
            out.append(f"{o.program.name}: STF passed before, now {o.stf_status}")
        count = p4info_count(o)
        if before.get("p4info") is not None and count is not None and count > before["p4info"]:
            out.append(f"{o.program.name}: P4Info differences {before['p4info']} before, now {count}")
    return out


def failures(outcomes: list[Outcome]) -> list[str]:
    """What fails a run whatever the baseline: wrong outputs, crashes and hangs."""
    out = []
    for o in outcomes:
        if o.compile["status"] in ("crashed", "timed out"):
            out.append(f"{o.program.name}: p4switch-cc {o.compile['status']}: {o.compile.get('message', '')}")
        if o.stf_status in ("wrong", "crashed", "timed out"):
            out.append(f"{o.program.name}: STF {o.stf_status}")
    return out


_NAMED_BY = {
    "struct",
    "header",
    "enum",
    "extern",
    "type",
    "instance",
    "function",
    "property",
    "method",
    "algorithm",
}
_KEYWORDS = _NAMED_BY | {"bit", "int", "bool", "varbit", "error", "string", "tuple", "void", "field", "stack"}


def construct_group(text: str) -> str:
    """A refusal's construct with the program's own names left out, to group programs by it
    (`header field of type struct row_t` -> `header field of type struct …`)."""
    words = text.split(" ")
    for i in range(1, len(words)):
        word = words[i]
        named = words[i - 1] in _NAMED_BY and word not in _KEYWORDS
        if named and re.fullmatch(r"[A-Za-z_][\w.]*(\[\d+\])?", word):
            words[i] = "…"
    return " ".join(words)


def refused_table(scope: list[Outcome], heading: str) -> list[str]:
    """The table of refused programs grouped by construct, the largest group first."""
    groups: dict[str, list[str]] = {}
    for o in scope:
        if o.compile["status"] == "unsupported":
            groups.setdefault(construct_group(o.compile["construct"]), []).append(o.program.name)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    rows = [f"| {_cell(what)} | {len(names)}: {', '.join(sorted(names))} |" for what, names in ordered]
    if not rows:
        return ["None: nothing is refused."]
    return [f"| {heading} | programs |", "|---|---|", *rows]


def coverage_page(outcomes: list[Outcome], summary: dict[str, Any], corpus: str) -> str:
    """docs/conformance.md: what compiles, what is refused and why, by construct."""
    scope = [o for o in outcomes if o.accepted is not False]
    lines = [
        "# p4switch on p4c's v1model test corpus",
        "",
        f"Generated by `make conformance-docs` (`python -m p4switch.conformance {corpus} --docs ...`): every",
        "program of p4c's `testdata/p4_16_samples` in that directory through p4switch-cc, p4switch's engine",
        "and its STF case (packets in, the packets BMv2 sends out), and p4switch-cc's P4Info against",
        "p4c-bm2-ss's. Counts are over the programs p4c-bm2-ss accepts. `make conformance` runs the same",
        "and fails on a wrong output, a crash, a hang, or a program doing worse than docs/conformance.json.",
        "",
        "```",
        summary_table(summary),
        "```",
        "",
        "## Refused, by construct",
        "",
        "A refusal names the construct p4switch does not implement, at its `file:line:col`.",
        "",
        *refused_table(scope, "construct"),
    ]
    rejected = [o for o in scope if o.compile["status"] in ("rejected", "crashed", "timed out")]
    if rejected:
        lines += [
            "",
            "## Rejected with an error, crashed or timed out (bugs: p4c accepts these programs)",
            "",
            "| program | where | error |",
            "|---|---|---|",
        ]
        for o in rejected:
            where = Path(o.compile.get("where", "")).name
            lines.append(f"| {o.program.name} | {_cell(where)} | {_cell(o.compile.get('message', ''))} |")
    lines += [
        "",
        "## Every program",
        "",
        "| program | p4switch-cc | STF | P4Info differences |",
        "|---|---|---|---|",
    ]
    for o in scope:
        state = o.compile["status"] if o.compile["status"] != "unsupported" else "refused"
        count = p4info_count(o)
        lines.append(
            f"| {o.program.name} | {state} | {o.stf_status or ''} | {'' if count is None else count} |"
        )
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")[:200]


BMV2_HEADING = "## The corpus both ways: p4c-bm2-ss's BMv2 JSON on p4switch"


def bmv2_section(outcomes: list[Outcome], summary: dict[str, Any], corpus: str) -> str:
    """The section of docs/conformance.md on the other way round: p4switch loading p4c-bm2-ss's JSON."""
    scope = [o for o in outcomes if o.accepted]
    lines = [
        BMV2_HEADING,
        "",
        f"Generated by `make conformance-bmv2-docs` (`python -m p4switch.conformance {corpus} --bmv2-json",
        "--docs ...`): the real p4c-bm2-ss compiles every program, p4switch loads the BMv2 JSON it",
        "writes (p4switch/bmv2json) and runs the program's STF case from it. \"compiled\" is \"loaded\"",
        "here; counts are over the programs p4c-bm2-ss accepts. `make conformance-bmv2` runs the same and",
        "fails on a wrong output, a crash, a hang, or a program doing worse than docs/conformance-bmv2.json.",
        "",
        "```",
        summary_table(summary),
        "```",
        "",
        *refused_table(scope, "refused construct"),
    ]
    others = [o for o in scope if o.compile["status"] in ("rejected", "crashed", "timed out")]
    others += [o for o in scope if o.stf_status in ("wrong", "failed", "crashed", "timed out")]
    if others:
        lines += ["", "| program | load | STF | message |", "|---|---|---|---|"]
        for o in others:
            message = o.compile.get("message") or (o.stf or {}).get("message") or ""
            status = f"{o.compile['status']} | {o.stf_status or ''}"
            lines.append(f"| {o.program.name} | {status} | {_cell(message)} |")
    return "\n".join(lines) + "\n"


def bmv2_section_of(page: str) -> str:
    """The BMv2 JSON section of an existing page ("" when it has none)."""
    at = page.find(BMV2_HEADING)
    return page[at:] if at >= 0 else ""


def with_bmv2_section(page: str, section: str) -> str:
    """``page`` with its BMv2 JSON section (always the last one) replaced by ``section``."""
    at = page.find(BMV2_HEADING)
    head = page[:at].rstrip("\n") + "\n" if at >= 0 else page
    return head + ("\n" + section if section else "")
