"""Tables and action profiles/selectors through the Table/ActionProfile objects: every match kind, the
priority rules, defaults, validation errors and selector spreading."""

from __future__ import annotations

import random
from typing import Any

import pytest

from p4switch.engine.api import (
    ActionCall,
    ConstDefault,
    EntryExists,
    EntryNotFound,
    Exact,
    GroupRef,
    InvalidEntry,
    Lpm,
    MemberRef,
    Optional_,
    Range,
    TableEntry,
    TableFull,
    Ternary,
)
from p4switch.engine.externs import pack_fields
from p4switch.engine.tables import ActionInfo, ActionProfile, KeyField, Slot, Table


def fn(*args: Any) -> None:
    """Stand-in for a compiled action."""


def actions() -> dict[str, ActionInfo]:
    return {"set": ActionInfo("set", [("port", 9)], fn), "drop": ActionInfo("drop", [], fn)}


def make(
    keys: list[tuple[str, str, int]],
    size: int = 16,
    const_default: bool = False,
    profile: ActionProfile | None = None,
) -> Table:
    acts = actions()
    return Table(
        "t",
        [KeyField(*k) for k in keys],
        acts,
        {"set": "all", "drop": "all"},
        ActionCall("drop"),
        const_default,
        size,
        profile,
    )


def port_of(table: Table, *key: int) -> int | None:
    slot = table.lookup(tuple(key))
    return None if slot is None else slot.args[0]


def pick(profile: ActionProfile, slot: Slot, selector: tuple[int, ...], widths: tuple[int, ...]) -> int:
    """The port parameter of the member the selector picks for these selector field values."""
    member = profile.resolve(slot)
    if isinstance(member, list):
        member = profile.pick(member, pack_fields(selector, widths))
    assert member is not None
    return member.args[0]


def entry(match: dict[str, Any], port: int, priority: int = 0) -> TableEntry:
    return TableEntry(match, ActionCall("set", {"port": port}), priority)


def test_exact_match_hits_and_misses() -> None:
    t = make([("a", "exact", 16), ("b", "exact", 8)])
    t.insert(entry({"a": Exact(5), "b": Exact(1)}, 3))
    assert port_of(t, 5, 1) == 3
    assert port_of(t, 5, 2) is None


def test_lpm_longest_prefix_wins_regardless_of_insert_order() -> None:
    t = make([("dst", "lpm", 32)])
    t.insert(entry({"dst": Lpm(0x0A000000, 8)}, 1))
    t.insert(entry({"dst": Lpm(0x0A010100, 24)}, 3))
    t.insert(entry({"dst": Lpm(0x0A010000, 16)}, 2))
    t.insert(entry({}, 9))  # /0 default route
    assert port_of(t, 0x0A010105) == 3
    assert port_of(t, 0x0A01FF01) == 2
    assert port_of(t, 0x0AFF0001) == 1
    assert port_of(t, 0x0B000001) == 9
    t.delete(entry({"dst": Lpm(0x0A010100, 24)}, 0))
    assert port_of(t, 0x0A010105) == 2


def test_ternary_higher_priority_wins() -> None:
    t = make([("f", "ternary", 16)])
    t.insert(entry({"f": Ternary(0x1200, 0xFF00)}, 1, priority=10))
    t.insert(entry({"f": Ternary(0x1234, 0xFFFF)}, 2, priority=20))
    t.insert(entry({}, 3, priority=1))
    assert port_of(t, 0x1234) == 2
    assert port_of(t, 0x12AA) == 1
    assert port_of(t, 0x9999) == 3


def test_range_and_optional_and_mixed_keys() -> None:
    t = make([("port", "range", 16), ("proto", "optional", 8), ("dst", "lpm", 32)])
    t.insert(entry({"port": Range(1000, 2000), "proto": Optional_(6)}, 1, priority=5))
    t.insert(entry({"port": Range(1500, 1600), "dst": Lpm(0x0A000000, 8)}, 2, priority=7))
    assert port_of(t, 1550, 6, 0x0A000001) == 2
    assert port_of(t, 1550, 6, 0x0B000001) == 1
    assert port_of(t, 1550, 17, 0x0B000001) is None
    assert port_of(t, 999, 6, 0) is None
    assert port_of(t, 2000, 6, 0) == 1


def test_entry_key_errors() -> None:
    t = make([("f", "ternary", 8)], size=2)
    with pytest.raises(InvalidEntry, match="priority"):
        t.insert(entry({"f": Ternary(1, 1)}, 1))
    with pytest.raises(InvalidEntry, match="outside its mask"):
        t.insert(entry({"f": Ternary(3, 1)}, 1, priority=1))
    with pytest.raises(InvalidEntry, match="does not fit"):
        t.insert(entry({"f": Ternary(256, 256)}, 1, priority=1))
    with pytest.raises(InvalidEntry, match="unknown match field"):
        t.insert(entry({"g": Ternary(1, 1)}, 1, priority=1))
    t.insert(entry({"f": Ternary(1, 1)}, 1, priority=1))
    with pytest.raises(EntryExists):
        t.insert(entry({"f": Ternary(1, 1)}, 2, priority=1))
    t.insert(entry({"f": Ternary(1, 1)}, 2, priority=2))  # same match, other priority: another entry
    with pytest.raises(TableFull):
        t.insert(entry({"f": Ternary(2, 2)}, 1, priority=1))
    with pytest.raises(EntryNotFound):
        t.delete(entry({"f": Ternary(2, 2)}, 1, priority=1))
    with pytest.raises(InvalidEntry, match="does not fit in 9 bits"):
        t.modify(entry({"f": Ternary(1, 1)}, 512, priority=1))
    with pytest.raises(InvalidEntry, match="takes parameters"):
        t.modify(TableEntry({"f": Ternary(1, 1)}, ActionCall("set", {}), 1))


def test_exact_fields_are_mandatory_and_lpm_bits_beyond_prefix_refused() -> None:
    with pytest.raises(InvalidEntry, match="mandatory"):
        make([("a", "exact", 8)]).insert(entry({}, 1))
    with pytest.raises(InvalidEntry, match="beyond its prefix"):
        make([("d", "lpm", 32)]).insert(entry({"d": Lpm(0x0A000001, 8)}, 1))


def test_modify_changes_action_and_entries_read_back() -> None:
    t = make([("a", "exact", 8)])
    t.insert(entry({"a": Exact(1)}, 1))
    t.modify(entry({"a": Exact(1)}, 7))
    assert port_of(t, 1) == 7
    (view,) = t.entries()
    assert view.match == {"a": Exact(1)} and view.action == ActionCall("set", {"port": 7})


def test_default_action_set_reset_and_const() -> None:
    t = make([("a", "exact", 8)])
    t.set_default(ActionCall("set", {"port": 4}))
    assert t.default.args == (4,)
    t.reset_default()
    assert t.default.action == ActionCall("drop")
    with pytest.raises(ConstDefault):
        make([("a", "exact", 8)], const_default=True).set_default(ActionCall("drop"))


def test_selector_sticks_one_flow_to_one_member_and_spreads_many_flows() -> None:
    profile = ActionProfile("sel", actions(), 16, "crc16", 8)
    for member in range(4):
        profile.member_insert(member, ActionCall("set", {"port": member}))
    profile.group_set(1, [(0, 1), (1, 1), (2, 1), (3, 1)], 0, insert=True)
    t = make([("a", "exact", 8)], profile=profile)
    t.insert(TableEntry({"a": Exact(1)}, GroupRef(1)))
    slot = t.lookup((1,))
    assert slot is not None
    chosen = {pick(profile, slot, (0x0A000001, 80), (32, 16)) for _ in range(5)}
    assert len(chosen) == 1
    flows = [random.Random(i).getrandbits(32) for i in range(400)]
    spread = [pick(profile, slot, (flow, 80), (32, 16)) for flow in flows]
    counts = [spread.count(port) for port in range(4)]
    assert min(counts) > 50, counts
    with pytest.raises(InvalidEntry, match="in use"):
        profile.member_delete(0)
    with pytest.raises(InvalidEntry, match="in use"):
        profile.group_delete(1)


def test_selector_weights_and_member_entries() -> None:
    profile = ActionProfile("sel", actions(), 16, "crc32", 0)
    profile.member_insert(1, ActionCall("set", {"port": 1}))
    profile.member_insert(2, ActionCall("set", {"port": 2}))
    profile.group_set(5, [(1, 3), (2, 1)], 0, insert=True)
    t = make([("a", "exact", 8)], profile=profile)
    t.insert(TableEntry({"a": Exact(1)}, GroupRef(5)))
    t.insert(TableEntry({"a": Exact(2)}, MemberRef(2)))
    slot = t.lookup((1,))
    assert slot is not None
    flows = [random.Random(i).getrandbits(32) for i in range(800)]
    picks = [pick(profile, slot, (flow,), (32,)) for flow in flows]
    assert 0.6 < picks.count(1) / len(picks) < 0.9
    member_slot = t.lookup((2,))
    assert member_slot is not None and pick(profile, member_slot, (0,), (32,)) == 2
    with pytest.raises(InvalidEntry, match="give a member or group"):
        t.insert(entry({"a": Exact(3)}, 1))
    with pytest.raises(InvalidEntry, match="unknown member"):
        profile.group_set(6, [(9, 1)], 0, insert=True)


def test_ternary_delete_keeps_the_priority_order_of_the_rest() -> None:
    """Deleting from a priority-ordered table finds the entry by its (priority, age) place: with many
    entries of one priority, exactly the deleted ones go and the others keep their order."""
    t = make([("f", "ternary", 16)], size=0)
    t.insert(entry({}, 100, priority=1))  # the fallback every deleted key falls to
    for i in range(60):  # three priorities, twenty entries each, interleaved
        t.insert(entry({"f": Ternary(i, 0xFFFF)}, i % 9, priority=2 + i % 3))
    deleted = {4, 33, 58, 7, 0, 59}
    for i in deleted:
        t.delete(entry({"f": Ternary(i, 0xFFFF)}, 0, priority=2 + i % 3))
    assert [port_of(t, i) for i in range(60)] == [100 if i in deleted else i % 9 for i in range(60)]
    order = [(s.priority, s.seq) for s, _ in t.scan]
    assert len(order) == 55 and order == sorted(order, key=lambda p: (-p[0], p[1]))


def test_lpm_prefix_lengths_follow_inserts_and_deletes() -> None:
    t = make([("dst", "lpm", 32)])
    t.insert(entry({"dst": Lpm(0x0A000000, 8)}, 1))
    t.insert(entry({"dst": Lpm(0x0A010000, 16)}, 2))
    t.insert(entry({"dst": Lpm(0x0A020000, 16)}, 3))
    assert [mask for mask, _ in t.lpm_lens] == [0xFFFF0000, 0xFF000000]
    t.delete(entry({"dst": Lpm(0x0A010000, 16)}, 0))
    assert port_of(t, 0x0A010001) == 1 and port_of(t, 0x0A020001) == 3
    t.delete(entry({"dst": Lpm(0x0A020000, 16)}, 0))
    assert [mask for mask, _ in t.lpm_lens] == [0xFF000000]
    t.insert(entry({"dst": Lpm(0x0A020300, 24)}, 4))
    assert port_of(t, 0x0A020301) == 4 and port_of(t, 0x0A020401) == 1


def test_one_entry_member_and_group_by_key() -> None:
    profile = ActionProfile("sel", actions(), 16, "crc16", 8)
    profile.member_insert(1, ActionCall("set", {"port": 1}))
    profile.member_insert(2, ActionCall("set", {"port": 2}))
    profile.group_set(7, [(1, 1), (2, 2)], 0, insert=True)
    assert profile.member(2).action == ActionCall("set", {"port": 2})
    assert profile.group(7).members == ((1, 1), (2, 2))
    with pytest.raises(EntryNotFound):
        profile.member(3)
    with pytest.raises(EntryNotFound):
        profile.group(8)
    profile.group_set(7, [(1, 1)], 0, insert=False)  # member 2 leaves the group: it can go now
    profile.member_delete(2)
    with pytest.raises(InvalidEntry, match="in use"):
        profile.member_delete(1)
    profile.group_delete(7)
    profile.member_delete(1)
    assert profile.members() == [] and profile.groups() == []
    t = make([("a", "ternary", 8)])
    t.insert(entry({"a": Ternary(1, 1)}, 5, priority=3))
    (found,) = [t.entry_view(t.find(entry({"a": Ternary(1, 1)}, 0, priority=3)))]
    assert found.action == ActionCall("set", {"port": 5}) and found.priority == 3
    with pytest.raises(EntryNotFound):
        t.find(entry({"a": Ternary(1, 1)}, 0, priority=4))
