"""The corpus runner (python -m p4switch.conformance) on a small corpus of our own, laid out as p4c's
testdata/p4_16_samples with a manifest and p4c-reference/: every outcome it tells apart (passed, wrong
output, failed at run time, refused with the construct, rejected with an error, P4Info differences,
timed out), and the STF reading p4c's runner has (names by suffix, frames longer than written)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import text_format

from p4switch import stf
from p4switch.conformance import report
from p4switch.conformance.__main__ import main
from p4switch.conformance.driver import InProcessRun, StfFailure, resolve, resolve_key
from p4switch.conformance.runner import Outcome, Program
from p4switch.frontend.cli import compile_file

FORWARDER = """
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
struct headers_t { ethernet_t ethernet; }
struct metadata_t { }
parser FwdParser(packet_in packet, out headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    state start { packet.extract(hdr.ethernet); transition accept; }
}
control FwdVerify(inout headers_t hdr, inout metadata_t meta) { apply { } }
control FwdIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    action set_port(bit<9> port) { sm.egress_spec = port; }
    action flood() { sm.mcast_grp = 7; }
    table by_type {
        key = { hdr.ethernet.ether_type: ternary; hdr.ethernet.isValid(): exact; }
        actions = { set_port; flood; NoAction; }
        default_action = NoAction();
    }
    apply { sm.egress_spec = 511; by_type.apply(); }
}
control FwdEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    apply { hdr.ethernet.src = (bit<48>) sm.egress_rid; }
}
control FwdCompute(inout headers_t hdr, inout metadata_t meta) { apply { } }
control FwdDeparser(packet_out packet, in headers_t hdr) { apply { packet.emit(hdr.ethernet); } }
V1Switch(FwdParser(), FwdVerify(), FwdIngress(), FwdEgress(), FwdCompute(), FwdDeparser()) main;
"""

FRAME = "000000000001 000000000002 0800 c0ffee"
# p4c's names: table and action by suffix, the key as BMv2 names validity keys, a ternary value whose
# mask covers the digits written; frames may be longer than expected unless `$`; port 9 is not one of
# the STF's ports, so what goes there is lost (as on BMv2)
PASSING = f"""
add by_type 10 ether_type:0x0800 ethernet.valid:1 set_port(port:2)
add by_type 5 ether_type:0x08** ethernet.$valid$:1 FwdIngress.set_port(port:9)
add by_type 5 ether_type:0x86dd ethernet.valid:1 flood()
mc_mgrp_create 7
mc_node_create 40 3 4
mc_node_associate 7 0
packet 1 {FRAME}
expect 2 000000000001 000000000000 0800
packet 1 000000000001 000000000002 0806 00
packet 1 000000000001 000000000002 86dd 00
expect 3 000000000001 000000000028 86dd 00 $
expect 4
wait
"""


def write(corpus: Path, name: str, program: str, case: str | None) -> None:
    (corpus / f"{name}.p4").write_text(program)
    if case is not None:
        (corpus / f"{name}.stf").write_text(case)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("samples")
    corpus = root / "p4_16_samples"
    corpus.mkdir()
    write(corpus, "passes", FORWARDER, PASSING)
    write(
        corpus,
        "wrong",
        FORWARDER,
        f"add by_type 1 ether_type:0x0800 ethernet.valid:1 set_port(port:2)\n"
        f"packet 1 {FRAME}\nexpect 2 000000000001 0000000000ff 0800 c0ffee $\n",
    )
    write(corpus, "unknown_table", FORWARDER, "add no_such_table a(x:1)\n")
    macro = FORWARDER.replace(
        "struct metadata_t { }", "#define SAME(x) x\nstruct metadata_t { }"
    )
    write(corpus, "macro", macro, f"packet 1 {FRAME}\nexpect 2 {FRAME}\n")
    write(
        corpus,
        "typo",
        FORWARDER.replace("apply { sm.egress_spec = 511;", "apply { sm.egress_spec = 511"),
        None,
    )
    write(corpus, "p4c_rejects", FORWARDER.replace("bit<9> port", "bit<9> port, bit<9> port"), None)
    manifest = {name: {"p4c_bm2_ss_rc": 0} for name in ("passes", "wrong", "unknown_table", "macro", "typo")}
    manifest["p4c_rejects"] = {"p4c_bm2_ss_rc": 1}
    (root / "manifest.json").write_text(json.dumps(manifest))
    reference = corpus / "p4c-reference"
    reference.mkdir()
    info = compile_file(corpus / "passes.p4").p4info
    info.tables[0].size = 2048  # a difference the runner must report
    (reference / "passes.p4info.txtpb").write_text(text_format.MessageToString(info))
    (reference / "wrong.p4info.txtpb").write_text(
        text_format.MessageToString(compile_file(corpus / "wrong.p4").p4info)
    )
    return corpus


@pytest.fixture(scope="module")
def run(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict, Path]:
    out = tmp_path_factory.mktemp("report")
    status = main(
        [
            str(corpus),
            "--report",
            str(out),
            "--jobs",
            "2",
            "--docs",
            str(out / "conformance.md"),
            "--write-baseline",
            str(out / "baseline.json"),
        ]
    )
    return status, json.loads((out / "report.json").read_text()), out


def by_program(data: dict) -> dict[str, dict]:
    return {p["program"]: p for p in data["programs"]}


def test_every_outcome_is_told_apart(run: tuple[int, dict, Path]) -> None:
    status, data, _ = run
    programs = by_program(data)
    assert status == 1  # a wrong output fails the run
    assert programs["passes"]["stf_status"] == "passed"
    assert programs["wrong"]["stf_status"] == "wrong"
    assert "port 2 sent" in programs["wrong"]["stf"]["mismatches"][0]
    assert programs["unknown_table"]["stf_status"] == "failed"
    assert "no table no_such_table" in programs["unknown_table"]["stf"]["message"]
    macro = programs["macro"]
    compiled = macro["compile"]
    assert (compiled["status"], compiled["construct"]) == ("unsupported", "function-like macro")
    assert macro["compile"]["where"].endswith("macro.p4:6:1") and macro["stf_status"] == "not run"
    typo = programs["typo"]["compile"]
    assert typo["status"] == "rejected" and "syntax error" in typo["message"]
    assert programs["p4c_rejects"]["p4c_accepts"] is False
    summary = data["summary"]
    assert summary["p4c_accepts"] == 5 and summary["compile"]["compiled"] == 3
    assert summary["compile"]["unsupported"] == 1 and summary["compile"]["rejected"] == 1
    assert summary["stf"]["passed"] == 1 and summary["stf"]["wrong"] == 1 and summary["stf"]["failed"] == 1


def test_p4info_is_compared_with_p4cs(run: tuple[int, dict, Path]) -> None:
    programs = by_program(run[1])
    assert programs["passes"]["p4info"]["differences"] == [
        "tables['FwdIngress.by_type'].size: p4switch-cc '1024', p4c '2048'"  # int64 as P4Info's JSON has it
    ]
    assert programs["wrong"]["p4info"] == {"compared": True, "differences": []}
    assert run[1]["summary"]["p4info"] == {"compared": 2, "identical": 1, "differences": 1}


def test_reports_page_and_baseline(run: tuple[int, dict, Path]) -> None:
    _, data, out = run
    text = (out / "report.txt").read_text()
    assert "== macro" in text and "not supported: function-like macro" in text
    page = (out / "conformance.md").read_text()
    assert "| function-like macro | 1: macro |" in page and "| typo |" in page
    baseline = json.loads((out / "baseline.json").read_text())
    assert baseline["passes"] == {"compile": "compiled", "stf": "passed", "p4info": 1}


def test_regressions_against_a_baseline(run: tuple[int, dict, Path]) -> None:
    programs = run[1]["programs"]
    baseline = {p["program"]: {"compile": "compiled", "stf": "passed", "p4info": 0} for p in programs}
    outcomes = []
    for p in programs:
        case = Path(p["source"]).with_suffix(".stf") if p["stf_status"] else None
        program = Program(p["program"], Path(p["source"]), case, p["p4c_accepts"], None)
        outcomes.append(Outcome(program, compile=p["compile"], p4info=p["p4info"], stf=p["stf"]))
    found = report.regressions(outcomes, baseline)
    assert "macro: compiled before, now unsupported" in found
    assert "passes: P4Info differences 0 before, now 1" in found
    assert "wrong: STF passed before, now wrong" in found
    assert not any(line.startswith("passes: STF") for line in found)


def test_each_program_is_bounded_in_time(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main([str(corpus), "passes", "macro", "--timeout", "0.01", "--report", str(tmp_path)])
    data = by_program(json.loads((tmp_path / "report.json").read_text()))
    assert status == 1
    assert {data[n]["compile"]["status"] for n in ("passes", "macro")} == {"timed out"}
    assert "[2/2]" in capsys.readouterr().out


def test_the_largest_program_starts_first_and_the_report_keeps_name_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One worker: the progress lines show the order programs were taken in (biggest source first, so a
    long one never runs alone at the end); report.json lists them by name."""
    corpus = tmp_path / "p4_16_samples"
    corpus.mkdir()
    write(corpus, "a_small", FORWARDER, None)
    write(corpus, "b_big", FORWARDER + "// padding\n" * 50, None)
    write(corpus, "c_medium", FORWARDER + "// padding\n", None)
    main([str(corpus), "--jobs", "1", "--report", str(tmp_path / "report")])
    started = [line.split()[1] for line in capsys.readouterr().out.splitlines() if line.startswith("[")]
    assert started == ["b_big", "c_medium", "a_small"]
    data = json.loads((tmp_path / "report" / "report.json").read_text())
    assert [p["program"] for p in data["programs"]] == ["a_small", "b_big", "c_medium"]


def test_names_resolve_as_p4cs_runner() -> None:
    tables = ["Ingress.t", "Ingress.sub.t2", "Egress.t2"]
    assert resolve("t", tables, "table") == "Ingress.t"
    assert resolve("sub.t2", tables, "table") == "Ingress.sub.t2"
    with pytest.raises(StfFailure, match="ambiguous"):
        resolve("t2", tables, "table")
    with pytest.raises(StfFailure, match="no table"):
        resolve("x", tables, "table")
    keys = ["hdr.h.isValid()", "hdr.s[0].f", "meta.port"]
    assert resolve_key("h.valid", keys) == "hdr.h.isValid()"
    assert resolve_key("hdr.s$0.f", keys) == "hdr.s[0].f"
    assert resolve_key("port", keys) == "meta.port"


def test_p4c_reading_ignores_ports_the_case_never_names(tmp_path: Path) -> None:
    """Frames to a port no packet/expect names are lost on BMv2; p4switch's own cases count them."""
    program = tmp_path / "fwd.p4"
    program.write_text(FORWARDER)
    case = stf.parse("add by_type 1 ether_type:0x0800 ethernet.valid:1 set_port(port:9)\npacket 1 " + FRAME)
    assert InProcessRun.compile(program, p4c=True).execute(case) == []
    strict = InProcessRun.compile(program).execute(case)
    assert len(strict) == 1 and strict[0].startswith("port 9 sent")
