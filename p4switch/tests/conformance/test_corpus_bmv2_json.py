"""The corpus runner's --bmv2-json mode: p4c-bm2-ss compiles each program and p4switch runs its STF case
from that BMv2 JSON (needs the real p4c-bm2-ss: skipped with the reason without it); and the section of
docs/conformance.md it writes, kept when the p4switch-cc run rewrites the page."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from p4switch.conformance import report
from p4switch.conformance.__main__ import main
from p4switch.tests.bmv2json.test_bmv2json_p4c import find_p4c

CASES = Path(__file__).resolve().parent


def test_bmv2_section_is_replaced_and_kept() -> None:
    page = "# page\n\nbody\n"
    section = f"{report.BMV2_HEADING}\n\nfigures 1\n"
    with_section = report.with_bmv2_section(page, section)
    assert with_section == page + "\n" + section
    newer = report.with_bmv2_section(with_section, section.replace("1", "2"))
    assert newer == page + "\n" + section.replace("1", "2")
    assert report.bmv2_section_of(newer) == section.replace("1", "2")
    assert report.with_bmv2_section("# other page\n", report.bmv2_section_of(newer)).endswith("figures 2\n")


def test_corpus_from_p4c_bmv2_json(tmp_path: Path) -> None:
    p4c = find_p4c()
    if p4c is None:
        print("SKIP: p4c-bm2-ss not found")
        pytest.skip("p4c-bm2-ss is neither on PATH nor in ../shared/p4lang/bin")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in ("arith", "match_kinds"):
        shutil.copy(CASES / f"{name}.p4", corpus)
        shutil.copy(CASES / f"{name}.stf", corpus)
    (corpus / "bad.p4").write_text("#include <v1model.p4>\nV1Switch(nothing) main;\n")
    docs = tmp_path / "conformance.md"
    docs.write_text("# the p4switch-cc page\n")
    status = main([str(corpus), "--bmv2-json", "--p4c", p4c, "--jobs", "2", "--timeout", "400",
                   "--report", str(tmp_path / "report"), "--docs", str(docs)])
    data = json.loads((tmp_path / "report" / "report.json").read_text())
    programs = {p["program"]: p for p in data["programs"]}
    assert status == 0
    assert programs["bad"]["p4c_accepts"] is False and programs["bad"]["stf_status"] is None
    for name in ("arith", "match_kinds"):
        assert programs[name]["compile"]["status"] == "compiled"
        assert programs[name]["stf_status"] == "passed"
    page = docs.read_text()
    assert page.startswith("# the p4switch-cc page\n") and report.BMV2_HEADING in page
    assert data["summary"]["stf"]["passed"] == 2 and data["summary"]["compile"]["compiled"] == 2
    assert report.summary_table(data["summary"]) in page
