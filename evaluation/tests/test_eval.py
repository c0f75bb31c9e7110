"""`make eval` with the quick profile, end to end: every CSV and figure, every table of the report filled
from this run, and what each mechanism guarantees on any machine, read from the switches' counters and
pcaps and the SM's events (a flood reaches the victim under policy none, DT and IF drop it at the first
switch, SIF's filter goes up on the attacker's port, lets nothing on that arrives after it and is flushed,
legitimate traffic loses no message, traceback is always right). Latency directions depend on the machine:
the report holds the run to them and says when the emulator, not the fabric, was the limit."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evaluation import fabric_eval, report
from evaluation.common import Section, busy_share, cpu_times

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = {"1", "2", "3", "4a", "4b", "5", "6"}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
RUN_TIMEOUT = 1200  # seconds: bounds a hung evaluation, not a slow one (a quick run took 440 s under load)
pytestmark = pytest.mark.timeout(RUN_TIMEOUT + 120)  # the first test sets the quick run up


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("eval")
    doc = out / "EVALUATION.md"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "evaluation",
            "--profile",
            "quick",
            "--out",
            str(out / "results"),
            "--doc",
            str(doc),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads((out / "results" / "results.json").read_text())
    return {"out": out / "results", "doc": doc.read_text(), "results": results, "stdout": done.stdout}


def sections(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["key"]: s for s in run["results"]["sections"]}


def test_every_experiment_ran_and_reported_progress(quick_run: dict[str, Any]) -> None:
    got = sections(quick_run)
    assert set(got) == EXPERIMENTS
    assert [k for k, s in got.items() if s["skipped"]] == []
    for key in EXPERIMENTS:
        assert f"] {key}: finished" in quick_run["stdout"]


def test_every_csv_and_figure_is_written(quick_run: dict[str, Any]) -> None:
    for section in sections(quick_run).values():
        assert section["csvs"] and section["figures"], section["key"]
        for name in section["csvs"]:
            with (quick_run["out"] / name).open() as stream:
                rows = list(csv.DictReader(stream))
            assert rows and all(all(v != "" for v in row.values()) for row in rows), name
        for name in section["figures"]:
            data = (quick_run["out"] / name).read_bytes()
            assert data.startswith(PNG_MAGIC) and len(data) > 10_000, name


def test_every_report_table_is_filled_from_this_run(quick_run: dict[str, Any]) -> None:
    doc = quick_run["doc"]
    assert quick_run["results"]["run_id"] in doc and "profile **quick**" in doc
    for section in sections(quick_run).values():
        assert f"## {section['key']}. " in doc
        for table in section["tables"]:
            assert table["rows"], table["caption"]
            for row in table["rows"]:
                assert len(row) == len(table["headers"])
                assert all(cell.strip() and "nan" not in cell.lower() for cell in row), row
                assert "| " + " | ".join(row) + " |" in doc
    for line in (ln for ln in doc.splitlines() if ln.startswith("| ")):
        assert not re.search(r"\|\s*\|", line), line  # no empty cell anywhere


def test_floods_reach_the_victim_unfiltered_under_policy_none(quick_run: dict[str, Any]) -> None:
    for row in read_csv(quick_run, "1_dos_impact.csv"):
        assert int(row["filters_installed"]) == 0, row
        assert (int(row["attack_frames_at_victim"]) > 0) == (int(row["attackers"]) > 0), row


def test_each_policy_does_to_the_flood_what_it_guarantees(quick_run: dict[str, Any]) -> None:
    """Counts of frames, counter cells and events; no timing. Frames dropped are the switches'
    pkey_violations counters; frames in, on and at the victim their pcaps."""
    policies = {r["policy"]: r for r in read_csv(quick_run, "3_policies.csv")}
    none, sif = policies["none"], policies["sif"]

    def count(row: dict[str, str], column: str) -> int:
        return int(row[column])

    assert count(none, "attack_frames_dropped_at_attacker_port") == 0
    assert count(none, "frames_dropped_elsewhere") == 0 and none["filter_port"] == "n/a"
    assert count(none, "attack_frames_forwarded") == count(none, "attack_frames_sent") > 0  # all goes on
    assert count(none, "attack_frames_reaching_victim") > 0
    for row in (policies["dt"], policies["if"]):
        assert count(row, "attack_frames_dropped_at_attacker_port") > 0, row
        assert count(row, "frames_dropped_elsewhere") == 0, row
        assert count(row, "attack_frames_forwarded") == count(row, "attack_frames_reaching_victim") == 0, row
    assert sif["filter_port"] == sif["attacker_port"] and sif["filter_flushed"] == "True", sif
    dropped = count(sif, "attack_frames_dropped_at_attacker_port")
    assert dropped > 0 and dropped + count(sif, "attack_frames_forwarded") == count(sif, "attack_frames_sent")
    assert count(sif, "frames_dropped_elsewhere") == 0
    assert count(sif, "attack_frames_passed_after_filter") == 0, sif
    assert count(sif, "attack_frames_reaching_victim_after_filter") == 0, sif
    assert float(sif["lookups_per_packet_no_attack"]) == 0.0
    for row in (policies["dt"], policies["if"], sif):
        assert count(row, "legit_messages") > 0 and count(row, "legit_unacked_after") == 0, row
        assert row["legit_qp_state"] == "RTS", row
    assert all(
        ok for claim, ok in sections(quick_run)["3"]["checks"].items() if "latency" not in claim
    ), sections(quick_run)["3"]["checks"]


def test_traceback_is_right_from_one_packet(quick_run: dict[str, Any]) -> None:
    got = sections(quick_run)
    tracebacks = read_csv(quick_run, "4a_tracebacks.csv")
    assert tracebacks and all(r["correct"] == "True" and r["packets_needed"] == "1" for r in tracebacks)
    assert got["4a"]["checks"]["traceback accuracy is 100 %"]
    assert all(got["4b"]["checks"].values()), got["4b"]["checks"]


FIDELITY_COLUMNS = ("busiest_switch", "busiest_cpu_max", "busiest_cpu_mean", "switch_drops",
                    "limited_by_emulator")


def test_every_fabric_experiment_reports_its_busiest_switch_and_drops(quick_run: dict[str, Any]) -> None:
    for name in ("1_dos_impact.csv", "3_policies.csv", "4a_tracebacks.csv", "4a_traceback_summary.csv"):
        rows = read_csv(quick_run, name)
        assert rows and all(row[c] for row in rows for c in FIDELITY_COLUMNS), name
        assert all(row["busiest_switch"].startswith("s") for row in rows), name
    got = sections(quick_run)
    for key in ("1", "3", "4a"):
        assert any(fabric_eval.BUSIEST_HEADER in t["headers"] for t in got[key]["tables"]), key
        assert any("limited by the emulator" in note.lower() for note in got[key]["notes"]), key


def test_the_emulator_is_named_the_limit_when_a_switch_saturates_or_drops() -> None:
    quiet = {"busiest_switch": "s0", "busiest_cpu_max": 0.2, "busiest_cpu_mean": 0.1, "switch_drops": 0,
             "limited_by_emulator": False}
    (note,) = fabric_eval.fidelity_notes([quiet, quiet], "points")
    assert note.startswith("Not limited by the emulator at any of the 2 points")
    busy = {**quiet, "busiest_switch": "s3", "busiest_cpu_max": 0.95, "switch_drops": 7,
            "limited_by_emulator": True}
    (note,) = fabric_eval.fidelity_notes([quiet, busy], "points")
    assert note.startswith("Limited by the emulator at 1 of 2 points") and "s3" in note and "7 frames" in note
    assert fabric_eval.busiest_cell(busy) == "s3 0.95 / 0.10"
    assert fabric_eval.emulator_columns({**busy, "samples": 3}) == busy


def test_a_latency_direction_that_fails_on_a_saturated_machine_names_the_emulator() -> None:
    checks = {fabric_eval.RAISES: True, fabric_eval.SIF_NEAR_BASELINE: False}
    rows = [{"policy": "sif", "cpu_busy_during_attack": 0.97, "attack_frames_passed_after_filter": 0}]
    section = Section("3", "policies", "paper", checks=checks, limits=fabric_eval.policy_limits(rows, checks))
    lines = report.section_lines(section, "results", [])
    assert f"- holds: {fabric_eval.RAISES}" in lines
    (failed,) = [line for line in lines if line.startswith("- DOES NOT HOLD")]
    assert fabric_eval.SIF_NEAR_BASELINE in failed
    assert "the emulator, not the fabric, was the limit" in failed and "97%" in failed
    assert "let on no frame" in failed
    rows[0]["cpu_busy_during_attack"] = 0.5  # not saturated: the failure stands on its own
    assert fabric_eval.policy_limits(rows, checks) == {}


def test_the_report_embeds_copies_of_its_figures_beside_itself(tmp_path: Path) -> None:
    """runs/ is not committed, so a figure the report cites by a path into it shows nothing to a reader of
    the repository: the report copies each figure to img/eval/ beside itself and embeds the copy, for the
    sections `make eval` writes and for one spliced in later."""
    out = tmp_path / "runs" / "eval-x"
    out.mkdir(parents=True)
    (out / "1_dos.png").write_bytes(PNG_MAGIC + b"dos")
    (out / "7_scale.png").write_bytes(PNG_MAGIC + b"scale")
    doc = tmp_path / "docs" / "EVALUATION.md"
    report.write(doc, out, [Section("1", "DoS", "paper", figures=["1_dos.png"])], "eval", "quick", REPO, "x")
    report.splice(doc, Section("7", "Scale", "paper", figures=["7_scale.png"]), out, REPO)
    text = doc.read_text()
    assert "![1_dos](img/eval/1_dos.png)" in text and "![7_scale](img/eval/7_scale.png)" in text
    assert (doc.parent / "img/eval/1_dos.png").read_bytes() == PNG_MAGIC + b"dos"
    assert (doc.parent / "img/eval/7_scale.png").read_bytes() == PNG_MAGIC + b"scale"
    assert re.findall(r"[\w/.-]+\.png", text) == ["img/eval/1_dos.png", "img/eval/7_scale.png"]


def test_cpu_busy_share_reads_the_machines_cpu_time(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3\n")
    before = cpu_times(stat)
    stat.write_text("cpu  250 0 100 850 50 0 0 0 0 0\n")
    assert before == (150, 1000)
    assert busy_share(before, cpu_times(stat)) == 200 / 250


def read_csv(run: dict[str, Any], name: str) -> list[dict[str, str]]:
    with (run["out"] / name).open() as stream:
        return list(csv.DictReader(stream))
