"""p4switch.bmv2json on BMv2 JSON written by the real p4c-bm2-ss (on PATH, or in ../shared/p4lang/bin
beside the project; skipped with the reason otherwise): our conformance cases compiled by p4c give the
same packets as from p4switch-cc (BMv2 JSON does not tell `reject` from `accept`: that count alone is
not checked), and the project's p4src/main.p4 loads with every P4Info name of p4c's."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from finsy.proto import p4r

from p4switch import bmv2json, ir, stf
from p4switch.conformance import p4info_diff
from p4switch.conformance.driver import InProcessRun
from p4switch.tests.runtime import harness
from p4switch.tests.runtime.stf_p4runtime import StfRun

ROOT = Path(__file__).resolve().parents[3]
SHARED_BIN = ROOT.parent / "shared" / "p4lang" / "bin"
CONFORMANCE = ROOT / "p4switch" / "tests" / "conformance"
CASES = sorted(CONFORMANCE.glob("*.stf"))
KNOWN = {
    # what does not hold yet from p4c's JSON (strict: a case that starts passing fails until listed off)
    # BMv2 JSON has no digest field names: a learn list's elements are p4c's temporaries (scalars.tmp,
    # tmp_0) and BMv2 sends digests positionally (so do P4Runtime's DigestLists, unaffected); p4c's own
    # STF runner (backends/bmv2/bmv2stf.py) has no check_digest. The names are only in p4c's P4Info
    # (type_info of a struct; none for a tuple, which p4c names tuple_0 where p4switch-cc says digest_0)
    "inlining": "check_digest by field name of a tuple digest: BMv2 JSON names neither list nor fields",
    "packet_io": "check_digest by field name: BMv2 JSON's learn list carries p4c's temporaries (tmp, tmp_0)",
    # p4c-bm2-ss writes `meta.saved = hdr.v.opt` as assign_VL to header "userMetadata.saved", an instance
    # its JSON does not declare (the varbit member's instance is "saved"): simple_switch refuses that JSON
    # too ("Invalid reference to object of type 'header'"), and so does the loader, naming the reference
    "varbit": "p4c's JSON copies the varbit into an undeclared header instance (userMetadata.saved)",
    "varbit_fields": "the same undeclared header instance of a varbit struct member (userMetadata.saved)",
}
RAISES = {"varbit": bmv2json.BMv2JsonError, "varbit_fields": bmv2json.BMv2JsonError}
"""The exception a known case fails with, where it is one the loader raises on purpose."""


NO_P4C = (f"p4c-bm2-ss is neither on PATH nor runnable in {SHARED_BIN} (its libraries: bash "
          "../shared/p4lang/install-runtime.sh)")


@functools.cache
def find_p4c() -> str | None:
    """p4c-bm2-ss on PATH, else in ../shared/p4lang/bin, if it runs here."""
    for found in (shutil.which("p4c-bm2-ss"), shutil.which("p4c-bm2-ss", path=str(SHARED_BIN))):
        if found and "p4switch" not in Path(found).resolve().name and _runs(found):
            return found
    return None


def _runs(p4c: str) -> bool:
    try:
        return subprocess.run([p4c, "--version"], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="module")
def p4c() -> str:
    found = find_p4c()
    if found is None:
        print(f"SKIP: {NO_P4C}")
        pytest.skip(NO_P4C)
    return found


def compile_with_p4c(p4c: str, source: Path, out: Path) -> tuple[dict, Path]:
    """p4c-bm2-ss's BMv2 JSON and P4Info (text) of ``source``."""
    json_path, p4info = out / f"{source.stem}.json", out / f"{source.stem}.p4info.txtpb"
    done = subprocess.run(
        [p4c, str(source), "-o", str(json_path), "--p4runtime-files", str(p4info)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "LC_ALL": "C"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(json_path.read_text()), p4info


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=KNOWN[c.stem], raises=RAISES.get(c.stem)))
     if c.stem in KNOWN else c for c in CASES],
    ids=[c.stem for c in CASES],
)
def test_conformance_case_from_p4c_json(p4c: str, case: Path, tmp_path: Path) -> None:
    doc, _ = compile_with_p4c(p4c, case.with_suffix(".p4"), tmp_path)
    run = InProcessRun.load(json.dumps(ir.to_json(bmv2json.load(doc, case.name))))
    # BMv2 JSON writes `transition reject` as the end of parsing (next_state null), as `accept`: the
    # packets are the same, but the engine's own parser_reject count cannot be told from it
    commands = [c for c in stf.load(case) if not (c.kind == "check_stat" and c.name == "parser_reject")]
    mismatches = run.execute(commands)
    assert not mismatches, "\n".join(mismatches)


def test_ibsec_main_p4_from_p4c_json_has_every_p4info_object(p4c: str, tmp_path: Path) -> None:
    doc, p4info_path = compile_with_p4c(p4c, ROOT / "p4src" / "main.p4", tmp_path)
    program = bmv2json.load(doc, "main.json")
    run = InProcessRun.load(json.dumps(ir.to_json(program)))
    p4info = p4info_diff.read_text(p4info_path)
    tables = {t.preamble.name for t in p4info.tables}
    assert tables and tables <= set(run.switch.tables)
    actions = {a.preamble.name for a in p4info.actions}
    assert actions <= {a.name for a in program.actions}
    externs = {e.name for e in program.externs}
    for group in (p4info.counters, p4info.meters, p4info.registers, p4info.direct_counters):
        assert {c.preamble.name for c in group} <= externs


def test_value_sets_from_p4c_json_are_set_over_p4runtime_as_p4cs_p4info_lists_them(
    p4c: str, tmp_path: Path
) -> None:
    """value_sets.p4 by p4c-bm2-ss, pushed with p4c's P4Info: the STF's value_set lines become
    ValueSetEntry writes by the P4Info's ids and match fields (pairs: one field per struct member), and
    the parser matches the members written."""
    program = harness.compile_program(CONFORMANCE / "value_sets.p4", tmp_path, p4c)
    commands = stf.parse("value_set ports 0x50 0x1bb\nvalue_set pairs 0x77,0x01\n")
    payload = bytes(range(0xF0, 0xFE))
    with harness.in_process_switch() as switch, harness.primary_client(switch.address, program) as client:
        run = StfRun(program, client, hosts={})
        for cmd in commands:
            run.do_value_set(cmd)
        for h, flags in ((bytes.fromhex("77 0050 01"), 3), (bytes.fromhex("78 01bb 01"), 1),
                         (bytes.fromhex("77 0051 02"), 0)):
            switch.inject(0, h + payload)
            assert switch.expect_sent() == (1, bytes([flags]) + h + payload)
        pairs = next(v for v in run.index.value_sets.values() if v.name == "VsParser.pairs")
        [read] = client.read(p4r.Entity(value_set_entry=p4r.ValueSetEntry(value_set_id=pairs.id)))
        members = read.value_set_entry.members
        assert [[(m.field_id, m.exact.value) for m in member.match] for member in members] == [
            [(1, b"\x77"), (2, b"\x01")]
        ]
