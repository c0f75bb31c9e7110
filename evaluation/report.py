"""docs/EVALUATION.md from one run: the machine, the commit, the command, and a table per experiment."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from .common import Section, Table

ORDER = ("1", "2", "3", "4a", "4b", "5", "6", "7")
CARRIED = ("7",)
"""Sections other commands write (7: ``make scale``): `make eval` keeps them as they are."""
HEADING = re.compile(r"^## (\w+)\. ", re.MULTILINE)
FIGURES = Path("img") / "eval"
"""Where the report's figures go, beside the report: it embeds them, and the results directory (runs/) is
not committed, so a path into it would show nothing to a reader of the repository."""


def machine() -> dict[str, str]:
    mem_kib = next(
        (
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal:")
        ),
        0,
    )
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "unknown",
    )
    return {
        "cpus (nproc)": str(os.cpu_count()),
        "cpu model": cpu,
        "memory": f"{mem_kib / 2**20:.1f} GiB",
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": platform.python_version(),
    }


def commit(repo: Path) -> str:
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
        return done.stdout.strip()

    sha = git("rev-parse", "--short=12", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return f"{sha} (work tree had uncommitted changes)" if dirty else sha


def markdown_table(table: Table) -> list[str]:
    lines = [
        f"*{table.caption}*",
        "",
        "| " + " | ".join(table.headers) + " |",
        "|" + "---|" * len(table.headers),
    ]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in table.rows]
    return [*lines, ""]


def publish(section: Section, out: Path, doc: Path) -> list[str]:
    """Copies the section's figures from the results directory ``out`` to FIGURES beside ``doc``; their
    paths relative to ``doc``."""
    folder = doc.parent / FIGURES
    for name in section.figures:
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out / name, folder / name)
    return [(FIGURES / name).as_posix() for name in section.figures]


def section_lines(section: Section, results: str, figures: list[str]) -> list[str]:
    """The section in Markdown; ``figures`` are its figures' paths relative to the report."""
    lines = [f"## {section.key}. {section.title}", "", f"**Paper:** {section.paper}", ""]
    if section.skipped:
        return [*lines, f"**Not run in this run:** {section.skipped}", ""]
    for table in section.tables:
        lines += markdown_table(table)
    for path in figures:
        lines += [f"![{Path(path).stem}]({path})", ""]
    if section.csvs:
        lines.append("Data: " + ", ".join(f"`{results}/{name}`" for name in section.csvs))
    lines.append("")
    if section.checks:
        lines.append("Checks (the direction the paper claims, held against this run):")
        lines += [check_line(section, claim, ok) for claim, ok in section.checks.items()]
        lines.append("")
    lines += [f"> {note}" + "\n" for note in section.notes]
    return lines


def check_line(section: Section, claim: str, ok: bool) -> str:
    """One check of the paper's claims; a failed one says what limited it, where the run could tell."""
    if ok:
        return f"- holds: {claim}"
    limit = section.limits.get(claim)
    return f"- DOES NOT HOLD: {claim}" + (f" -- {limit}" if limit else "")


def summary_lines(sections: list[Section]) -> list[str]:
    """One line per experiment: how many of the paper's directions hold in this run."""
    lines = ["| experiment | paper's claims that hold here |", "|---|---|"]
    for s in sections:
        held = "not run: " + s.skipped if s.skipped else f"{sum(s.checks.values())} of {len(s.checks)}"
        lines.append(f"| {s.key}. {s.title} | {held} |")
    return [*lines, ""]


def results_dir(out: Path, repo: Path) -> str:
    """The results directory as the report names it (relative to the repository when inside it)."""
    try:
        return str(out.resolve().relative_to(repo.resolve()))
    except ValueError:
        return str(out)


def blocks(text: str) -> dict[str, str]:
    """The report's sections by key, each from its ``## key.`` heading to the next one."""
    starts = [(m.group(1), m.start()) for m in HEADING.finditer(text)]
    ends = [start for _, start in starts[1:]] + [len(text)] * bool(starts)
    return {key: text[start:end].rstrip() + "\n" for (key, start), end in zip(starts, ends, strict=True)}


def splice(doc: Path, section: Section, out: Path, repo: Path) -> None:
    """Put ``section`` into ``doc`` in place of the section with the same key (at the end if none)."""
    lines = section_lines(section, results_dir(out, repo), publish(section, out, doc))
    block = "\n".join(lines).rstrip() + "\n"
    text = doc.read_text() if doc.exists() else ""
    old = blocks(text).get(section.key)
    text = text.replace(old, block) if old else text.rstrip() + "\n\n" + block
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(text)


def write(
    doc: Path, out: Path, sections: list[Section], command: str, profile: str, repo: Path, run_id: str
) -> None:
    """Write the report to ``doc`` and every section as JSON to ``out``/results.json; sections other
    commands write (CARRIED) are kept from the report as it was."""
    ordered = sorted(sections, key=lambda s: ORDER.index(s.key) if s.key in ORDER else len(ORDER))
    target = os.environ.get("TARGET", "p4switch")  # the fabric experiments' (topologies.run.RunOptions)
    results = results_dir(out, repo)
    kept = blocks(doc.read_text()) if doc.exists() else {}
    lines = [
        "# Evaluation: the papers' results and ours, side by side",
        "",
        "Generated by `make eval` (package `evaluation/`); do not edit by hand. Each experiment runs on "
        f"this project's own components (P4 switches on the `{target}` target, the subnet manager, host "
        "agents on veths in network namespaces, the wire library) and writes its CSV files and figures "
        f"to the results directory below; the figures shown here are copies in `{FIGURES.as_posix()}/`.",
        "",
        f"- run: `{run_id}`, profile **{profile}**, finished {datetime.now(UTC):%Y-%m-%d %H:%M UTC}",
        f"- command: `{command}`",
        f"- commit: {commit(repo)}",
        f"- results directory: `{results}`",
        "",
        "| machine | value |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in machine().items()),
        "",
    ]
    lines += summary_lines(ordered)
    for section in ordered:
        lines += section_lines(section, results, [] if section.skipped else publish(section, out, doc))
    produced = {s.key for s in ordered}
    lines += [kept[key] for key in CARRIED if key in kept and key not in produced]
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text("\n".join(lines).rstrip() + "\n")
    (out / "results.json").write_text(
        json.dumps(
            {
                "run_id": run_id,
                "profile": profile,
                "command": command,
                "sections": [asdict(s) for s in ordered],
            },
            indent=1,
        )
        + "\n"
    )
