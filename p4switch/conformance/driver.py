"""Runs one STF case (p4switch/stf.py) in-process: the program's engine (``loader.load``) with an injected
clock, every command through the engine API, the frames compared at the end.

A file is read one of two ways:

- as p4c's BMv2 runner reads it (``p4c=True``, backends/bmv2/bmv2stf.py with simple_switch): table and
  action names are the control-plane names or suffixes of them, key fields may be written as BMv2 names
  them (``h.valid``, ``h$0.f``), a plain ternary or lpm value covers the digits written, an expected
  frame may be longer than written unless it ends in ``$``, ``expect <port>`` alone accepts anything on
  that port, and only the ports that ``packet``/``expect`` name exist (BMv2's interfaces), so frames sent
  elsewhere are lost;
- as p4switch's own cases are written (``p4c=False``): the same names, every frame that leaves any port
  must be expected, lengths exactly.

A command the switch refuses (an unknown name, an entry the table rejects) raises ``StfFailure``; frames
and checks that differ from the file are listed by ``mismatches()``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from p4switch import stf
from p4switch.engine import loader
from p4switch.engine.api import ActionCall, EngineError, TableEntry
from p4switch.engine.control import ControlPlane
from p4switch.engine.tables import Table


class StfFailure(Exception):
    """A command of the case cannot be applied to the program (named by its line)."""


class ManualClock:
    """Meters and timestamps read this; the `clock` command advances it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def resolve(name: str, names: Iterable[str], what: str) -> str:
    """The control-plane name ``name`` stands for, as p4c's runner and BMv2's CLI find it: itself, else
    the one name ending with ``.name``, else the one name ending with ``name``."""
    names = list(names)
    if name in names:
        return name
    for found in ([n for n in names if n.endswith("." + name)], [n for n in names if n.endswith(name)]):
        if len(found) == 1:
            return found[0]
        if found:
            raise StfFailure(f"{what} {name} is ambiguous: {', '.join(sorted(found))}")
    raise StfFailure(f"no {what} {name}")


def bmv2_key_aliases(key: str) -> set[str]:
    """How BMv2's JSON may name a key field: validity keys as ``.$valid$``."""
    return {key, key.replace(".isValid()", ".$valid$")}


def resolve_key(name: str, keys: list[str]) -> str:
    """A key field as p4c's runner finds it (TableKeyInstance.set): ``h$0`` is ``h[0]``, ``h.valid`` is
    ``h.$valid$``, and a suffix after a dot names the one key ending with it."""
    m = re.fullmatch(r"(.*)\$([0-9]+)(.*)", name)
    if m:
        name = f"{m.group(1)}[{m.group(2)}]{m.group(3)}"
    aliases = {alias: key for key in keys for alias in bmv2_key_aliases(key)}
    wanted = [name, name + "$", name + ".$valid$"]
    if name.endswith(".valid"):
        wanted.append(name[: -len("valid")] + "$valid$")
    for candidate in wanted:
        if candidate in aliases:
            return aliases[candidate]
    tails = tuple("." + w for w in wanted) if name != "valid" else (".$valid$",)
    found = {key for alias, key in aliases.items() if alias.endswith(tails)}
    if len(found) == 1:
        return found.pop()
    raise StfFailure(
        f"no key field {name} (keys: {', '.join(keys)})" if not found else f"key {name} is ambiguous"
    )


@dataclass
class Replication:
    """BMv2's multicast nodes and groups as the mc_* commands build them (node handles from 0)."""

    nodes: list[tuple[int, list[int]]] = field(default_factory=list)  # (rid, ports)
    groups: dict[int, list[int]] = field(default_factory=dict)  # group -> node handles

    def replicas(self, group: int) -> list[tuple[int, int]]:
        """The group's (port, rid) copies: its nodes in association order, each node's ports ascending."""
        out = []
        for node in self.groups.get(group, []):
            rid, ports = self.nodes[node]
            out += [(port, rid) for port in sorted(ports)]
        return out


class InProcessRun:
    """Applies one case's commands to a fresh switch and collects what differs from the file."""

    def __init__(self, switch: ControlPlane, ir: dict[str, Any], clock: ManualClock,
                 p4c: bool = False) -> None:
        self.switch = switch
        self.clock = clock
        self.p4c = p4c
        self.tables: dict[str, Table] = switch.tables
        self.direct_counters = {
            e["name"]: e["table"]
            for e in ir.get("externs", [])
            if e["kind"] == "direct_counter" and e.get("table")
        }
        self.entries: list[tuple[str, TableEntry]] = []  # in `add` order, for entry numbers
        self.entry_ids: dict[str, tuple[str, TableEntry]] = {}
        self.sent: dict[int, list[bytes]] = defaultdict(list)
        self.expected: dict[int, list[stf.Command]] = defaultdict(list)
        self.ports: set[int] = set()  # the ports packet/expect name: BMv2's interfaces
        self.failed_checks: list[str] = []
        self.digests: list[tuple[str, dict[str, int]]] = []
        self.replication = Replication()
        switch.digest_sink = lambda name, fields: self.digests.append((name, dict(fields)))

    @classmethod
    def load(cls, ir_json: str, p4c: bool = False, engine: str = "python") -> InProcessRun:
        """A run on a fresh switch for the program (IR JSON) on ``engine`` (loader.load); raises the
        engine's ProgramError."""
        import json

        clock = ManualClock()
        switch = loader.load(ir_json, clock=clock, engine=engine)
        assert isinstance(switch, ControlPlane)
        return cls(switch, json.loads(ir_json), clock, p4c)

    @classmethod
    def compile(cls, p4: Path, p4c: bool = False, engine: str = "python") -> InProcessRun:
        from p4switch.frontend.cli import compile_file

        return cls.load(compile_file(p4).ir_json(), p4c, engine)

    # ------------------------------------------------------------------------------------ running
    def execute(self, commands: list[stf.Command]) -> list[str]:
        """Run every command, then compare the frames: the differences (StfFailure if one cannot run)."""
        for cmd in commands:
            self.run(cmd)
        return self.mismatches()

    def run(self, cmd: stf.Command) -> None:
        handler: Callable[[stf.Command], None] | None = getattr(self, "do_" + cmd.kind, None)
        if handler is None:
            raise StfFailure(f"line {cmd.line}: command {cmd.kind} is not handled by the in-process driver")
        try:
            handler(cmd)
        except EngineError as exc:
            raise StfFailure(f"line {cmd.line}: {cmd.kind}: {exc}") from None
        except StfFailure as exc:
            raise StfFailure(f"line {cmd.line}: {exc}") from None

    def table(self, name: str) -> str:
        return resolve(name, self.tables, "table")

    def action(self, table: str, call: ActionCall) -> ActionCall:
        return ActionCall(resolve(call.name, self.tables[table].actions, "action"), call.params)

    def entry(self, cmd: stf.Command) -> tuple[str, TableEntry]:
        table = self.table(cmd.table)
        keys = {k.name: k for k in self.tables[table].keys}
        match = {}
        for name, value in cmd.match.items():
            key = keys[resolve_key(name, list(keys))]
            if self.p4c:
                match[key.name] = stf.p4c_match(cmd.match_text[name], value, key.kind, key.width)
            else:
                match[key.name] = stf.coerce(value, key.kind, key.width)
        action = self.action(table, cmd.action) if isinstance(cmd.action, ActionCall) else cmd.action
        assert action is not None
        priority = cmd.priority
        if self.p4c:  # p4c's runner gives BMv2 a priority only for ternary tables, where one is needed
            priority = max(priority, 1) if self.tables[table].needs_priority else 0
        return table, TableEntry(match, action, priority)

    def numbered(self, number: int) -> tuple[str, TableEntry]:
        return self.entries[number - 1]

    # --------------------------------------------------------------------------- control plane
    def do_add(self, cmd: stf.Command) -> None:
        table, entry = self.entry(cmd)
        self.switch.table_insert(table, entry)
        self.entries.append((table, entry))
        if cmd.entry_id:
            self.entry_ids[cmd.entry_id] = (table, entry)

    def do_setdefault(self, cmd: stf.Command) -> None:
        assert isinstance(cmd.action, ActionCall)
        table = self.table(cmd.table)
        self.switch.table_set_default(table, self.action(table, cmd.action))

    def do_member(self, cmd: stf.Command) -> None:
        assert isinstance(cmd.action, ActionCall)
        self.switch.member_insert(cmd.name, cmd.index, cmd.action)

    def do_group(self, cmd: stf.Command) -> None:
        self.switch.group_insert(cmd.name, cmd.index, cmd.members)

    def do_mcast(self, cmd: stf.Command) -> None:
        self.switch.mcast_group_set(cmd.index, cmd.replicas)

    def do_clone_session(self, cmd: stf.Command) -> None:
        self.switch.clone_session_set(cmd.index, cmd.replicas, packet_length_bytes=cmd.truncate)

    def do_mc_mgrp_create(self, cmd: stf.Command) -> None:
        self.replication.groups[cmd.index] = []
        self.switch.mcast_group_set(cmd.index, [])

    def do_mc_node_create(self, cmd: stf.Command) -> None:
        self.replication.nodes.append((cmd.index, cmd.ports))

    def do_mc_node_update(self, cmd: stf.Command) -> None:
        rid, _ = self.replication.nodes[cmd.index]
        self.replication.nodes[cmd.index] = (rid, cmd.ports)
        for group, nodes in self.replication.groups.items():
            if cmd.index in nodes:
                self.switch.mcast_group_set(group, self.replication.replicas(group))

    def do_mc_node_associate(self, cmd: stf.Command) -> None:
        if not 0 <= cmd.values["node"] < len(self.replication.nodes):
            raise StfFailure(f"no multicast node {cmd.values['node']}")
        self.replication.groups.setdefault(cmd.index, []).append(cmd.values["node"])
        self.switch.mcast_group_set(cmd.index, self.replication.replicas(cmd.index))

    def do_mirroring_add(self, cmd: stf.Command) -> None:
        self.switch.clone_session_set(cmd.index, [(cmd.values["port"], 0)])

    def do_mirroring_add_mc(self, cmd: stf.Command) -> None:
        self.switch.clone_session_set(cmd.index, self.replication.replicas(cmd.values["group"]))

    def do_mirroring_delete(self, cmd: stf.Command) -> None:
        self.switch.clone_session_delete(cmd.index)

    def counter(self, name: str) -> str:
        return resolve(name, self.switch.counters, "counter")

    def register(self, name: str) -> str:
        return resolve(name, self.switch.registers, "register")

    def do_value_set(self, cmd: stf.Command) -> None:
        self.switch.value_set_set(resolve(cmd.name, self.switch.value_sets, "value set"), cmd.tuples)

    def meter(self, name: str) -> str:
        return resolve(name, self.switch.meters, "meter")

    def do_counter_write(self, cmd: stf.Command) -> None:
        self.switch.counter_write(
            self.counter(cmd.name), cmd.index, cmd.values["bytes"], cmd.values["packets"]
        )

    def do_register_write(self, cmd: stf.Command) -> None:
        self.switch.register_write(self.register(cmd.name), cmd.index, cmd.values["value"])

    def do_register_reset(self, cmd: stf.Command) -> None:
        name = self.register(cmd.name)
        for index in range(self.switch.register_size(name)):
            self.switch.register_write(name, index, 0)

    def do_meter(self, cmd: stf.Command) -> None:
        self.switch.meter_set(self.meter(cmd.name), cmd.index, cmd.meter)

    do_meter_set_rates = do_meter

    def do_meter_array_set_rates(self, cmd: stf.Command) -> None:
        name = self.meter(cmd.name)
        for index in range(self.switch.meter_size(name)):
            self.switch.meter_set(name, index, cmd.meter)

    def do_direct_meter(self, cmd: stf.Command) -> None:
        self.switch.direct_meter_set(*self.numbered(cmd.index), cmd.meter)

    def do_clock(self, cmd: stf.Command) -> None:
        self.clock.now += cmd.seconds

    def do_nothing(self, cmd: stf.Command) -> None:
        """Reads whose result p4c's runner does not check; `wait` (each packet runs to completion here);
        `remove all`, which p4c's BMv2 runner does not send to the switch."""

    do_wait = do_remove = do_mirroring_get = do_counter_read = do_register_read = do_meter_get_rates = (
        do_nothing
    )

    # ---------------------------------------------------------------------------------- packets
    def do_packet(self, cmd: stf.Command) -> None:
        self.ports.add(cmd.port)
        for port, frame in self.switch.process(cmd.port, cmd.data):
            self.sent[port].append(frame)

    def do_expect(self, cmd: stf.Command) -> None:
        self.ports.add(cmd.port)
        self.expected[cmd.port].append(cmd)

    # ----------------------------------------------------------------------------------- checks
    def check(self, ok: bool, cmd: stf.Command, text: str) -> None:
        if not ok:
            self.failed_checks.append(f"line {cmd.line}: {text}")

    def do_check_counter(self, cmd: stf.Command) -> None:
        if cmd.entry_id:
            if cmd.entry_id not in self.entry_ids:
                raise StfFailure(f"no entry {cmd.entry_id}")
            byte_count, packets = self.switch.direct_counter_read(*self.entry_ids[cmd.entry_id])
        else:
            byte_count, packets = self.switch.counter_read(self.counter(cmd.name), cmd.index)
        self.check_counts(cmd, {"packets": packets, "bytes": byte_count})

    def do_check_direct_counter(self, cmd: stf.Command) -> None:
        byte_count, packets = self.switch.direct_counter_read(*self.numbered(cmd.index))
        self.check_counts(cmd, {"packets": packets, "bytes": byte_count})

    def check_counts(self, cmd: stf.Command, got: dict[str, int]) -> None:
        compare: dict[str, Callable[[int, int], bool]] = {
            "==": int.__eq__,
            "!=": int.__ne__,
            "<": int.__lt__,
            "<=": int.__le__,
            ">": int.__gt__,
            ">=": int.__ge__,
        }
        for key, value in cmd.values.items():
            self.check(
                compare[cmd.compare](got[key], value),
                cmd,
                f"{cmd.name}[{cmd.entry_id or cmd.index}] {key} = {got[key]}, not {cmd.compare} {value}",
            )

    def do_check_register(self, cmd: stf.Command) -> None:
        value = self.switch.register_read(self.register(cmd.name), cmd.index)
        self.check(value == cmd.values["value"], cmd, f"{cmd.name}[{cmd.index}] = {value}")

    def do_check_digest(self, cmd: stf.Command) -> None:
        wanted = (cmd.name, cmd.values)
        self.check(wanted in self.digests, cmd, f"digest {wanted} not in {self.digests}")
        if wanted in self.digests:
            self.digests.remove(wanted)

    def do_check_stat(self, cmd: stf.Command) -> None:
        value = self.switch.stats.get(cmd.name, 0)
        self.check(value == cmd.values["value"], cmd, f"stats[{cmd.name}] = {value}")

    # ----------------------------------------------------------------------------------- frames
    def mismatches(self) -> list[str]:
        """Frames (and checks) that differ from the file, one line each; empty when the case passes."""
        out = list(self.failed_checks)
        ports = self.ports if self.p4c else set(self.sent) | set(self.expected)
        for port in sorted(ports):
            expected = self.expected[port]
            if self.p4c and any(cmd.any_frame for cmd in expected):
                continue
            out += self.port_mismatches(port, self.sent[port], expected)
        return out

    def port_mismatches(self, port: int, sent: list[bytes], expected: list[stf.Command]) -> list[str]:
        out = []
        for frame, cmd in zip(sent, expected, strict=False):
            exact = cmd.exact_length or not self.p4c
            if not stf.frame_matches(cmd.pattern, frame, exact):
                out.append(
                    f"line {cmd.line}: port {port} sent {frame.hex()}, expected {cmd.pattern}"
                    + ("$" if exact else "")
                )
        for cmd in expected[len(sent) :]:
            out.append(f"line {cmd.line}: port {port}: expected {cmd.pattern}, nothing came")
        for frame in sent[len(expected) :]:
            out.append(f"port {port} sent {frame.hex()}, not expected")
        return out
