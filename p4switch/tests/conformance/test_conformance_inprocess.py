"""In-process driver of the conformance cases: every <case>.stf beside its <case>.p4 in this folder is
compiled with the front end and run through the engine API by p4switch.conformance.driver (strictly:
every frame expected, exact lengths), with an injected clock for meters, on both engines (the native
one must run every case in C, not fall back). The format is in p4switch/stf.py and README.md here."""

from __future__ import annotations

from pathlib import Path

import pytest

from p4switch import stf
from p4switch.conformance.driver import InProcessRun
from p4switch.engine.api import ActionCall, GroupRef, MemberRef, MeterConfig, Ternary

CASES = Path(__file__).resolve().parent
CASE_FILES = sorted(CASES.glob("*.stf"))


def test_every_case_has_its_program() -> None:
    assert CASE_FILES, "no conformance cases found"
    for case in CASE_FILES:
        assert case.with_suffix(".p4").exists(), f"{case.name} has no {case.stem}.p4"


@pytest.mark.parametrize("engine", ["python", "native"])
@pytest.mark.parametrize("case", CASE_FILES, ids=[c.stem for c in CASE_FILES])
def test_conformance_case(case: Path, engine: str) -> None:
    run = InProcessRun.compile(case.with_suffix(".p4"), engine=engine)
    assert run.switch.engine == engine, run.switch.engine_note
    mismatches = run.execute(stf.load(case))
    assert not mismatches, "\n".join(mismatches)
    assert not run.digests, f"digests nobody checked: {run.digests}"


def test_stf_parser_reads_every_command() -> None:
    text = """
        add t 10 f:0x0a000001/24 g:1&&&0xff h:1..5 k:* a(x:1, y:0b11)   # comment
        add t2 f:00:11:22:33:44:55 member(3)
        add t3 f:10.0.0.1 group(7)
        setdefault t a(x:2)
        member sel 1 fwd(port:2)
        group sel 7 1 2*3
        mcast 5 1:10 2
        clone_session 9 4 truncate 60
        meter m 0 1 2 3 4
        clock 0.5
        packet 1 00 11
        expect 2 00 **$
        check_counter c 3 packets 2 bytes 100
    """
    cmds = stf.parse(text)
    add = cmds[0]
    assert add.priority == 10 and add.action == ActionCall("a", {"x": 1, "y": 3})
    assert set(add.match) == {"f", "g", "h"}
    assert cmds[1].match["f"].value == 0x001122334455  # type: ignore[union-attr]
    assert cmds[1].action == MemberRef(3) and cmds[2].action == GroupRef(7)
    assert cmds[5].members == [(1, 1), (2, 3)]
    assert cmds[6].replicas == [(1, 10), (2, 0)]
    assert cmds[7].truncate == 60 and cmds[7].replicas == [(4, 0)]
    assert cmds[9].seconds == 0.5
    assert cmds[11].exact_length
    assert stf.frame_matches(cmds[11].pattern, bytes([0, 0x7F]))
    assert not stf.frame_matches(cmds[11].pattern, bytes([1, 0x7F]))
    assert cmds[12].values == {"packets": 2, "bytes": 100}
    with pytest.raises(stf.StfError, match="<stf>:1:"):
        stf.parse("bogus 1 2")


def test_stf_parser_reads_p4c_commands() -> None:
    """p4c's own syntax: wildcard digits, entry ids, bare and `$` expects, BMv2's CLI commands."""
    text = """
        ADD test1 503 data.f1:0x****0202 ingress.setb1(val:7, port:3) = A
        expect 2 00000101 ******** **** 7f 66
        expect 3
        check_counter cnt($A) packets == 2
        check_counter cnt(10) bytes > 64
        mc_node_create 400 6 7
        mc_node_associate 1113 0
        mirroring_add_mc 5 1113
        meter_set_rates m 3 0.5:10 1:20
        register_reset r
        counter_write c 2 7 700
        wait
    """
    cmds = stf.parse(text)
    add = cmds[0]
    assert (add.kind, add.priority, add.entry_id) == ("add", 503, "A")
    assert add.match["data.f1"] == Ternary(0x0202, 0xFFFF) and add.match_text["data.f1"] == "0x****0202"
    assert not cmds[1].exact_length and not cmds[1].any_frame and cmds[1].pattern.startswith("00000101*")
    assert cmds[2].any_frame
    assert (cmds[3].name, cmds[3].entry_id, cmds[3].values) == ("cnt", "A", {"packets": 2})
    assert (cmds[4].index, cmds[4].compare, cmds[4].values) == (10, ">", {"bytes": 64})
    assert (cmds[5].index, cmds[5].ports) == (400, [6, 7])
    assert (cmds[6].index, cmds[6].values) == (1113, {"node": 0})
    assert cmds[7].values == {"group": 1113}
    assert cmds[8].meter == MeterConfig(500_000, 10, 1_000_000, 20)  # BMv2 rates are per microsecond
    assert cmds[9].name == "r" and (cmds[10].index, cmds[10].values) == (2, {"packets": 7, "bytes": 700})
    assert cmds[11].kind == "wait"
    assert stf.frame_matches("00**", bytes([0, 1, 2]), exact_length=False)
    assert not stf.frame_matches("00**", bytes([0]), exact_length=False)


def test_p4c_plain_values_cover_the_digits_written() -> None:
    """p4c's runner: a ternary mask and an lpm prefix as long as the hex digits; decimal: whole field."""
    value = stf.parse_match("0x12")
    assert value is not None
    assert stf.p4c_match("0x12", value, "ternary", 16) == Ternary(0x12, 0xFF)
    assert stf.p4c_match("0x0a00", stf.Exact(0x0A00), "lpm", 32) == stf.Lpm(0x0A00, 16)
    assert stf.p4c_match("18", stf.Exact(18), "ternary", 16) == Ternary(18, 0xFFFF)
    assert stf.coerce(value, "ternary", 16) == Ternary(0x12, 0xFFFF)
