"""Differential testing of the two engines: one program loaded on the Python and on the native engine,
the same random control-plane state written to both, the same random and mutated frames run through
both; every frame's output (ports, bytes, order), every digest, and at checkpoints every counter, direct
counter, register and statistic must be identical.

    python -m p4switch.native.differential [PROGRAM.p4 ...] [--frames N] [--seed S]

Without programs it runs p4src/main.p4 and the test programs (p4switch/tests/programs and
p4switch/tests/conformance). Tables are filled at random from the P4Info (every table, its match kinds and
actions, action profiles and selector groups), with key values taken from the seed frames so that entries
match; parser value sets (members from the seed frames too), multicast groups, clone sessions (some
truncating), meters and registers too. Both switches share a manual clock that moves between frames (meters)
and start from the same random state (v1model random()). Some entries are replaced while frames run."""

from __future__ import annotations

import argparse
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from p4switch.conformance.driver import ManualClock
from p4switch.engine import loader
from p4switch.engine.api import (
    ActionCall,
    EngineError,
    Exact,
    GroupRef,
    Lpm,
    Match,
    MemberRef,
    MeterConfig,
    Optional_,
    Range,
    Switch,
    TableEntry,
    Ternary,
)
from p4switch.native.fuzz import default_seeds, stf_frames

REPO = Path(__file__).resolve().parents[2]
CHECK_EVERY = 500
"""frames between two comparisons of every counter, register and statistic"""


@dataclass
class Outcome:
    """One program's run: frames through both engines, frames out, and what differed."""

    program: str
    frames: int = 0
    outputs: int = 0
    engine: str = ""
    differences: list[str] = field(default_factory=list)


def default_programs() -> list[Path]:
    tests = REPO / "p4switch" / "tests"
    return [REPO / "p4src" / "main.p4", *sorted((tests / "programs").glob("*.p4")),
            *sorted((tests / "conformance").glob("*.p4"))]


class Filler:
    """Random control-plane state from a program's P4Info, written identically to several switches."""

    def __init__(self, p4info: Any, rng: random.Random, frames: list[bytes]) -> None:
        self.p4info = p4info
        self.rng = rng
        self.frames = frames
        self.actions = {a.preamble.id: a for a in p4info.actions}
        self.profiles = {p.preamble.id: p for p in p4info.action_profiles}

    def value(self, width: int) -> int:
        """A key value: most often bytes of a seed frame near its start (header fields), else small or
        random numbers."""
        rng = self.rng
        choice = rng.randrange(4)
        if choice < 2:
            frame = rng.choice(self.frames)
            nbytes = (width + 7) // 8
            at = rng.randrange(1 + rng.randrange(64))
            if at + nbytes <= len(frame):
                return int.from_bytes(frame[at:at + nbytes], "big") >> (nbytes * 8 - width)
        if choice == 2:
            return rng.randrange(min(16, 1 << width))
        return rng.getrandbits(width)

    def member(self, widths: list[int]) -> tuple[int, ...]:
        """A value set member: values as table keys take them, or (half the time) fields read in order
        from one seed frame near its start, a few bytes apart, as a select over several header fields
        sees them (independent values would hardly ever match all of them at once)."""
        rng = self.rng
        if rng.randrange(2):
            return tuple(self.value(w) for w in widths)
        frame = rng.choice(self.frames)
        bits, whole = 8 * len(frame), int.from_bytes(frame, "big")
        at, values = 8 * rng.randrange(4), []
        for w in widths:
            values.append(whole >> (bits - at - w) & (1 << w) - 1 if at + w <= bits else self.value(w))
            at += w + 8 * rng.randrange(4)
        return tuple(values)

    def match(self, field: Any) -> Match | None:
        """A match for one field, or None (a wildcard) where the kind allows it."""
        rng, width = self.rng, field.bitwidth
        kind = field.match_type
        value = self.value(width)
        if kind == field.EXACT:
            return Exact(value)
        if rng.randrange(4) == 0:
            return None
        if kind == field.TERNARY:
            mask = rng.choice([(1 << width) - 1, rng.getrandbits(width)])
            return Ternary(value & mask, mask) if mask else None
        if kind == field.LPM:
            plen = rng.randrange(width + 1)
            return Lpm(value & (((1 << plen) - 1) << (width - plen)), plen) if plen else None
        if kind == field.RANGE:
            high = min(value + rng.randrange(1000), (1 << width) - 1)
            return Range(value, high)
        return Optional_(value)

    def action(self, ref_ids: list[int]) -> ActionCall:
        action = self.actions[self.rng.choice(ref_ids)]
        params = {p.name: self.value(p.bitwidth) if self.rng.randrange(2) else self.rng.randrange(
            min(16, 1 << p.bitwidth)) for p in action.params}
        return ActionCall(action.preamble.name, params)

    def entry_action(self, table: Any, allowed: list[int]) -> ActionCall | MemberRef | GroupRef:
        profile = self.profiles.get(table.implementation_id)
        if profile is None:
            return self.action(allowed)
        if profile.with_selector and self.rng.randrange(2):
            return GroupRef(self.rng.randrange(1, 6))
        return MemberRef(self.rng.randrange(1, 9))

    def fill(self, switches: list[Switch], entries_per_table: int) -> None:
        """Profiles, tables, defaults, value sets, multicast groups, clone sessions, meters, registers."""
        for profile in self.p4info.action_profiles:
            self.fill_profile(switches, profile)
        for table in self.p4info.tables:
            self.fill_table(switches, table, entries_per_table)
        rng = self.rng
        for value_set in self.p4info.value_sets:
            widths = [f.bitwidth for f in value_set.match]
            count = rng.randrange(min(value_set.size, 16) + 1)
            members = [self.member(widths) for _ in range(count)]
            apply(switches, "value_set_set", value_set.preamble.name, members)
        for group in range(1, 5):
            replicas = [(rng.randrange(10), rng.randrange(4)) for _ in range(rng.randrange(5))]
            apply(switches, "mcast_group_set", group, replicas)
        for session in range(0, 5):
            replicas = [(rng.randrange(10), rng.randrange(4)) for _ in range(rng.randrange(1, 3))]
            truncate = rng.choice([0, 0, rng.randrange(14, 80)])
            apply(switches, "clone_session_set", session, replicas, 0, truncate)
        for meter in self.p4info.meters:
            for index in range(min(meter.size, 8)):
                config = MeterConfig(rng.randrange(1, 50), rng.randrange(1, 5), rng.randrange(50, 100),
                                     rng.randrange(5, 10))
                apply(switches, "meter_set", meter.preamble.name, index, config)
        for reg in self.p4info.registers:
            width = reg.type_spec.bitstring.bit.bitwidth or reg.type_spec.bitstring.int.bitwidth or 1
            for index in range(min(reg.size, 8)):
                value = rng.getrandbits(width)
                apply(switches, "register_write", reg.preamble.name, index, value)

    def fill_profile(self, switches: list[Switch], profile: Any) -> None:
        allowed = sorted({ref.id for t in self.p4info.tables if t.implementation_id == profile.preamble.id
                          for ref in t.action_refs if ref.scope != ref.DEFAULT_ONLY})
        name = profile.preamble.name
        for member in range(1, 9):
            if allowed and self.rng.randrange(4):
                action = self.action(allowed)
                apply(switches, "member_insert", name, member, action)
        if not profile.with_selector:
            return
        members = [m.member_id for m in switches[0].members(name)]
        for group in range(1, 6):
            chosen = [(m, self.rng.randrange(1, 4)) for m in members if self.rng.randrange(3) == 0]
            apply(switches, "group_insert", name, group, chosen)

    def fill_table(self, switches: list[Switch], table: Any, count: int) -> None:
        name = table.preamble.name
        allowed = [r.id for r in table.action_refs if r.scope != r.DEFAULT_ONLY]
        defaults = [r.id for r in table.action_refs if r.scope != r.TABLE_ONLY]
        needs_priority = any(f.match_type in (f.TERNARY, f.RANGE, f.OPTIONAL) for f in table.match_fields)
        if defaults and not table.const_default_action_id and self.rng.randrange(2):
            action = self.action(defaults)
            apply(switches, "table_set_default", name, action)
        if table.is_const_table or not allowed:
            return
        for _ in range(count):
            match = {f.name: m for f in table.match_fields if (m := self.match(f)) is not None}
            priority = self.rng.randrange(1, 16) if needs_priority else 0
            entry = TableEntry(match, self.entry_action(table, allowed), priority)
            apply(switches, "table_insert", name, entry)


def apply(switches: list[Switch], method: str, *args: Any) -> None:
    """The same write (an api.Switch method) on every switch: all accept it, or all refuse it with the
    same error."""
    errors = []
    for switch in switches:
        try:
            getattr(switch, method)(*args)
            errors.append("")
        except EngineError as err:
            errors.append(f"{type(err).__name__}: {err}")
    if len(set(errors)) > 1:
        raise AssertionError(f"the engines disagree on a control-plane write: {errors}")


def mutate(frame: bytes, rng: random.Random, i: int) -> bytes:
    """Random garbage, a truncation, bit flips, overwritten bytes or an extension of a valid frame."""
    base = bytearray(frame)
    kind = i % 6
    if kind == 0:
        return rng.randbytes(rng.randrange(0, 160))
    if kind == 1:
        return bytes(base[: rng.randrange(0, len(base) + 1)])
    if kind == 2:
        for _ in range(rng.randrange(1, 8)):
            base[rng.randrange(len(base))] ^= 1 << rng.randrange(8)
        return bytes(base)
    if kind == 3:
        at = rng.randrange(len(base))
        base[at: at + 4] = rng.randbytes(4)
        return bytes(base[: rng.randrange(1, len(base) + 1)])
    if kind == 4:
        return bytes(base) + rng.randbytes(rng.randrange(0, 64))
    return bytes(base)


def snapshot(switch: Switch, p4info: Any) -> dict[str, Any]:
    """Everything of the switch's state a difference could show in."""
    state: dict[str, Any] = {"stats": {k: v for k, v in switch.stats.items() if v}}
    for counter in p4info.counters:
        name = counter.preamble.name
        state[name] = [switch.counter_read(name, i) for i in range(counter.size)]
    for reg in p4info.registers:
        state[reg.preamble.name] = [switch.register_read(reg.preamble.name, i) for i in range(reg.size)]
    for table in p4info.tables:
        state[table.preamble.name] = [e.counter_data for e in switch.table_entries(table.preamble.name)]
    for value_set in p4info.value_sets:
        state[value_set.preamble.name] = switch.value_set_get(value_set.preamble.name)
    return state


def run_program(path: Path, frames: int, seed: int, entries_per_table: int = 24) -> Outcome:
    """Both engines on one program (P4 source or IR JSON with its P4Info beside it)."""
    from p4switch.frontend.cli import compile_file

    compiled = compile_file(path)
    ir_json, p4info = compiled.ir_json(), compiled.p4info
    outcome = Outcome(path.name)
    clocks = [ManualClock(), ManualClock()]
    switches = [loader.load(ir_json, clock=clocks[0], rng=random.Random(seed), engine="python"),
                loader.load(ir_json, clock=clocks[1], rng=random.Random(seed), engine="native")]
    outcome.engine = switches[1].engine
    if switches[1].engine != "native":
        outcome.differences.append(f"not run on the native engine: {switches[1].engine_note}")
        return outcome
    digests: list[list[tuple[str, list[tuple[str, int]]]]] = [[], []]
    for switch, sink in zip(switches, digests, strict=True):
        switch.digest_sink = lambda name, fields, sink=sink: sink.append((name, fields))
    rng = random.Random(seed)
    seeds = default_seeds() + stf_frames(path.with_suffix(".stf"))
    filler = Filler(p4info, rng, seeds)
    filler.fill(switches, entries_per_table)
    ports = [*range(10), 64, 255, 510]
    for i in range(frames):
        if i % 2000 == 1999:
            filler.fill(switches, entries_per_table // 4)  # entries replaced while frames run
        step = rng.random() * 0.01
        for clock in clocks:
            clock.now += step
        frame = mutate(rng.choice(seeds), rng, i) if i % 7 else rng.choice(seeds)
        port = rng.choice(ports)
        outs = [s.process(port, frame) for s in switches]
        outcome.frames += 1
        outcome.outputs += len(outs[0])
        if outs[0] != outs[1]:
            outcome.differences.append(
                f"frame {i} (port {port}, {frame.hex()}): python {outs[0]!r} native {outs[1]!r}")
        if digests[0] != digests[1]:
            outcome.differences.append(f"frame {i}: digests python {digests[0]} native {digests[1]}")
        digests[0].clear()
        digests[1].clear()
        if i % CHECK_EVERY == CHECK_EVERY - 1 or i == frames - 1:
            states = [snapshot(s, p4info) for s in switches]
            for key in states[0]:
                if states[0][key] != states[1].get(key):
                    outcome.differences.append(f"after frame {i}: {key}: python {states[0][key]} native "
                                               f"{states[1].get(key)}")
        if len(outcome.differences) > 20:
            break
    return outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m p4switch.native.differential",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("programs", nargs="*", type=Path,
                        help="P4 programs (default: main.p4 and the tests')")
    parser.add_argument("--frames", type=int, default=10_000, help="frames per program (default 10000)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    total = different = 0
    for path in args.programs or default_programs():
        outcome = run_program(path, args.frames, args.seed)
        total += outcome.frames
        different += len(outcome.differences)
        print(f"{outcome.program:28s} {outcome.frames:7d} frames, {outcome.outputs:7d} out, "
              f"{len(outcome.differences)} differences", flush=True)
        for line in outcome.differences[:5]:
            print(f"    {line[:400]}")
    print(f"differential: {total} frames, {different} differences")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
