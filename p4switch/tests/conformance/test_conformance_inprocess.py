"""In-process driver of the conformance cases: every <case>.stf beside its <case>.p4 in this folder is
compiled with the front end and run through the engine API (Switch.process and the control-plane
methods), with an injected clock for meters. The format is in p4switch/stf.py and README.md here."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from p4switch import stf
from p4switch.engine.api import ActionCall, GroupRef, MemberRef, Switch, TableEntry
from p4switch.engine.switch import V1Switch
from p4switch.frontend.cli import compile_file

CASES = Path(__file__).resolve().parent


class ManualClock:
    """Meters and timestamps read this; the `clock` command advances it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class InProcessRun:
    """Applies one case's commands to a fresh switch and checks its expectations."""

    def __init__(self, p4: Path) -> None:
        self.clock = ManualClock()
        self.switch = Switch.load(compile_file(p4).ir_json(), clock=self.clock)
        assert isinstance(self.switch, V1Switch)
        self.tables = self.switch.tables
        self.entries: list[tuple[str, TableEntry]] = []  # in `add` order, for entry numbers
        self.sent: dict[int, list[bytes]] = defaultdict(list)
        self.expected: dict[int, list[tuple[int, str]]] = defaultdict(list)
        self.digests: list[tuple[str, dict[str, int]]] = []
        self.switch.digest_sink = lambda name, fields: self.digests.append((name, dict(fields)))

    def entry(self, cmd: stf.Command) -> TableEntry:
        table = self.tables[cmd.table]
        kinds = {k.name: k for k in table.keys}
        match = {}
        for name, value in cmd.match.items():
            key = kinds.get(name)
            match[name] = stf.coerce(value, key.kind, key.width) if key else value
        assert cmd.action is not None
        return TableEntry(match, cmd.action, cmd.priority)

    def numbered(self, number: int) -> tuple[str, TableEntry]:
        return self.entries[number - 1]

    def run(self, cmd: stf.Command) -> None:
        sw = self.switch
        where = f"line {cmd.line}"
        if cmd.kind == "add":
            entry = self.entry(cmd)
            sw.table_insert(cmd.table, entry)
            self.entries.append((cmd.table, entry))
        elif cmd.kind == "setdefault":
            assert isinstance(cmd.action, ActionCall)
            sw.table_set_default(cmd.table, cmd.action)
        elif cmd.kind == "member":
            assert isinstance(cmd.action, ActionCall)
            sw.member_insert(cmd.name, cmd.index, cmd.action)
        elif cmd.kind == "group":
            sw.group_insert(cmd.name, cmd.index, cmd.members)
        elif cmd.kind == "mcast":
            sw.mcast_group_set(cmd.index, cmd.replicas)
        elif cmd.kind == "clone_session":
            sw.clone_session_set(cmd.index, cmd.replicas, packet_length_bytes=cmd.truncate)
        elif cmd.kind == "meter":
            sw.meter_set(cmd.name, cmd.index, cmd.meter)
        elif cmd.kind == "direct_meter":
            sw.direct_meter_set(*self.numbered(cmd.index), cmd.meter)
        elif cmd.kind == "register_write":
            sw.register_write(cmd.name, cmd.index, cmd.values["value"])
        elif cmd.kind == "clock":
            self.clock.now += cmd.seconds
        elif cmd.kind == "packet":
            for port, frame in sw.process(cmd.port, cmd.data):
                self.sent[port].append(frame)
        elif cmd.kind == "expect":
            self.expected[cmd.port].append((cmd.line, cmd.pattern))
        elif cmd.kind in ("check_counter", "check_direct_counter"):
            if cmd.kind == "check_counter":
                byte_count, packets = sw.counter_read(cmd.name, cmd.index)
            else:
                byte_count, packets = sw.direct_counter_read(*self.numbered(cmd.index))
            got = {"packets": packets, "bytes": byte_count}
            for key, value in cmd.values.items():
                assert got[key] == value, f"{where}: {cmd.name}[{cmd.index}] {key} = {got[key]}, not {value}"
        elif cmd.kind == "check_register":
            value = sw.register_read(cmd.name, cmd.index)
            assert value == cmd.values["value"], f"{where}: {cmd.name}[{cmd.index}] = {value}"
        elif cmd.kind == "check_digest":
            wanted = (cmd.name, cmd.values)
            assert wanted in self.digests, f"{where}: digest {wanted} not in {self.digests}"
            self.digests.remove(wanted)
        elif cmd.kind == "check_stat":
            value = sw.stats.get(cmd.name, 0)
            assert value == cmd.values["value"], f"{where}: stats[{cmd.name}] = {value}"
        else:
            raise AssertionError(f"{where}: command {cmd.kind} not handled by the in-process driver")

    def check_frames(self) -> None:
        for port in sorted(set(self.sent) | set(self.expected)):
            sent, expected = self.sent[port], self.expected[port]
            for frame, (line, pattern) in zip(sent, expected, strict=False):
                assert stf.frame_matches(pattern, frame), (
                    f"line {line}: port {port} sent\n  {frame.hex()}\nexpected\n  {pattern}"
                )
            assert len(sent) == len(expected), (
                f"port {port}: {len(sent)} frames sent, {len(expected)} expected: "
                f"{[f.hex() for f in sent[len(expected):]]}"
            )


CASE_FILES = sorted(CASES.glob("*.stf"))


def test_every_case_has_its_program() -> None:
    assert CASE_FILES, "no conformance cases found"
    for case in CASE_FILES:
        assert case.with_suffix(".p4").exists(), f"{case.name} has no {case.stem}.p4"


@pytest.mark.parametrize("case", CASE_FILES, ids=[c.stem for c in CASE_FILES])
def test_conformance_case(case: Path) -> None:
    run = InProcessRun(case.with_suffix(".p4"))
    for cmd in stf.load(case):
        run.run(cmd)
    run.check_frames()
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
    assert stf.frame_matches(cmds[11].pattern, bytes([0, 0x7F]))
    assert not stf.frame_matches(cmds[11].pattern, bytes([1, 0x7F]))
    assert cmds[12].values == {"packets": 2, "bytes": 100}
    with pytest.raises(stf.StfError, match="<stf>:1:"):
        stf.parse("bogus 1 2")
