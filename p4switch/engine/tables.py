"""Match-action tables and action profiles/selectors: entry validation, the control-plane view
(api.TableEntry) and the per-packet lookup structures.

A lookup returns a ``Slot`` (the installed entry) or None on a miss. Each table picks the cheapest lookup
structure its match kinds allow: one dict for exact-only tables, one dict per prefix length for exact+lpm
tables, and a priority-ordered scan otherwise (ternary, range, optional, mixed).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from p4switch.engine.api import (
    ActionCall,
    ConstDefault,
    EntryExists,
    EntryNotFound,
    Exact,
    Group,
    GroupRef,
    InvalidEntry,
    Lpm,
    Match,
    Member,
    MemberRef,
    MeterConfig,
    Optional_,
    Range,
    TableEntry,
    TableFull,
    Ternary,
    UnknownName,
)
from p4switch.engine.externs import HASH_ALGORITHMS, Meter

ActionFn = Callable[..., Any]


@dataclass
class ActionInfo:
    """An action as tables see it: parameter names/widths and the compiled function (set after codegen)."""

    name: str
    params: list[tuple[str, int]]
    fn: ActionFn | None = None

    def bind(self, call: ActionCall, where: str) -> tuple[int, ...]:
        """Check ``call``'s parameters and return them in declaration order."""
        names = [name for name, _ in self.params]
        if set(call.params) != set(names):
            raise InvalidEntry(
                f"{where}: action {self.name} takes parameters {names}, got {sorted(call.params)}"
            )
        args = []
        for name, width in self.params:
            value = call.params[name]
            if not 0 <= value < 1 << width:
                raise InvalidEntry(
                    f"{where}: action {self.name} parameter {name} does not fit in {width} bits"
                )
            args.append(value)
        return tuple(args)


@dataclass(frozen=True)
class KeyField:
    name: str
    kind: str  # exact | ternary | lpm | range | optional
    width: int


class Slot:
    """One installed entry (or a table's default): what a lookup hands to the compiled code."""

    __slots__ = ("fn", "args", "action", "ref", "key", "priority", "counter", "meter", "const", "seq")

    def __init__(
        self, action: ActionCall | MemberRef | GroupRef, key: tuple[Any, ...], priority: int
    ) -> None:
        self.fn: ActionFn | None = None
        self.args: tuple[int, ...] = ()
        self.action = action
        self.ref = None if isinstance(action, ActionCall) else action
        self.key = key
        self.priority = priority
        self.counter = [0, 0]  # direct counter: [bytes, packets]
        self.meter: Meter | None = None
        self.const = False
        self.seq = 0


def _canonical(field: KeyField, match: Match | None, where: str) -> Any:
    """Validate one match value and return its canonical form (None = wildcard)."""
    limit = 1 << field.width
    expected = {"exact": Exact, "ternary": Ternary, "lpm": Lpm, "range": Range, "optional": Optional_}[
        field.kind
    ]
    if match is None:
        if field.kind == "exact":
            raise InvalidEntry(f"{where}: exact field {field.name} is mandatory")
        return None
    if not isinstance(match, expected):
        raise InvalidEntry(f"{where}: field {field.name} is {field.kind}, got {type(match).__name__}")
    if isinstance(match, Exact | Optional_):
        if not 0 <= match.value < limit:
            raise InvalidEntry(f"{where}: value of {field.name} does not fit in {field.width} bits")
        return match.value
    if isinstance(match, Ternary):
        if not (0 <= match.value < limit and 0 <= match.mask < limit):
            raise InvalidEntry(f"{where}: value/mask of {field.name} does not fit in {field.width} bits")
        if match.value & ~match.mask:
            raise InvalidEntry(f"{where}: ternary value of {field.name} has bits outside its mask")
        return (match.value, match.mask) if match.mask else None
    if isinstance(match, Lpm):
        if not 0 <= match.prefix_len <= field.width or not 0 <= match.value < limit:
            raise InvalidEntry(f"{where}: bad lpm value/prefix length for {field.name}")
        if match.value & ~_prefix_mask(field.width, match.prefix_len):
            raise InvalidEntry(f"{where}: lpm value of {field.name} has bits beyond its prefix length")
        return (match.value, match.prefix_len) if match.prefix_len else None
    assert isinstance(match, Range)
    if not 0 <= match.low <= match.high < limit:
        raise InvalidEntry(f"{where}: bad range for {field.name} (need 0 <= low <= high < 2^{field.width})")
    return None if (match.low, match.high) == (0, limit - 1) else (match.low, match.high)


def _scan_order(item: tuple[Slot, Any]) -> tuple[int, int]:
    """Scan order of ternary/range tables: higher priority first, then older entries first."""
    return -item[0].priority, item[0].seq


def _prefix_mask(width: int, prefix_len: int) -> int:
    return ((1 << prefix_len) - 1) << (width - prefix_len)


def _api_match(field: KeyField, canon: Any) -> Match | None:
    if canon is None:
        return None
    if field.kind == "exact":
        return Exact(canon)
    if field.kind == "optional":
        return Optional_(canon)
    if field.kind == "ternary":
        return Ternary(*canon)
    if field.kind == "lpm":
        return Lpm(*canon)
    return Range(*canon)


class ActionProfile:
    """An action profile (members) or action selector (members and weighted groups; a packet picks a
    member of the group by the hash of the table's selector fields, so one flow sticks to one member)."""

    def __init__(
        self,
        name: str,
        actions: dict[str, ActionInfo],
        size: int,
        algorithm: str | None = None,
        max_group_size: int = 0,
    ) -> None:
        self.name = name
        self.actions = actions  # union of the actions of the tables using it
        self.size = size
        self.is_selector = algorithm is not None
        self.hash = HASH_ALGORITHMS[algorithm] if algorithm is not None else None
        self.max_group_size = max_group_size
        self.member_slots: dict[int, Slot] = {}
        self.group_members: dict[int, Group] = {}
        self.group_slots: dict[int, list[Slot]] = {}  # members repeated by weight, in order
        self.users: dict[tuple[str, int], int] = {}  # ("member"|"group", id) -> references from entries
        self.in_groups: dict[int, int] = {}  # member id -> groups that list it (a delete checks, not scans)

    # members
    def member_insert(self, member_id: int, action: ActionCall) -> None:
        if member_id in self.member_slots:
            raise EntryExists(f"action profile {self.name}: member {member_id} exists")
        if len(self.member_slots) >= self.size > 0:
            raise TableFull(f"action profile {self.name} is full ({self.size} members)")
        self.member_slots[member_id] = self._member_slot(member_id, action)

    def member_modify(self, member_id: int, action: ActionCall) -> None:
        slot = self._member(member_id)
        new = self._member_slot(member_id, action)
        slot.fn, slot.args, slot.action = new.fn, new.args, new.action  # groups share the slot object

    def member_delete(self, member_id: int) -> None:
        self._member(member_id)
        if self.users.get(("member", member_id)) or self.in_groups.get(member_id):
            raise InvalidEntry(f"action profile {self.name}: member {member_id} is still in use")
        del self.member_slots[member_id]

    def member(self, member_id: int) -> Member:
        return Member(member_id, self._member(member_id).action)  # type: ignore[arg-type]

    def members(self) -> list[Member]:
        return [Member(mid, slot.action) for mid, slot in self.member_slots.items()]  # type: ignore[arg-type]

    def _member(self, member_id: int) -> Slot:
        try:
            return self.member_slots[member_id]
        except KeyError:
            raise EntryNotFound(f"action profile {self.name}: no member {member_id}") from None

    def _member_slot(self, member_id: int, action: ActionCall) -> Slot:
        info = self.actions.get(action.name)
        if info is None:
            raise InvalidEntry(f"action profile {self.name}: action {action.name} not allowed")
        slot = Slot(action, (member_id,), 0)
        slot.args = info.bind(action, f"action profile {self.name} member {member_id}")
        slot.fn = info.fn
        return slot

    # groups
    def group_set(
        self, group_id: int, members: Sequence[tuple[int, int]], max_size: int, insert: bool
    ) -> None:
        if not self.is_selector:
            raise InvalidEntry(f"action profile {self.name} is not a selector: it has no groups")
        exists = group_id in self.group_members
        if insert and exists:
            raise EntryExists(f"action selector {self.name}: group {group_id} exists")
        if not insert and not exists:
            raise EntryNotFound(f"action selector {self.name}: no group {group_id}")
        limit = self.max_group_size
        if max_size and limit and max_size > limit:
            raise InvalidEntry(f"action selector {self.name}: max_size {max_size} exceeds {limit}")
        if limit and len(members) > limit or max_size and len(members) > max_size:
            raise InvalidEntry(f"action selector {self.name}: group {group_id} has too many members")
        expanded: list[Slot] = []
        for member_id, weight in members:
            if weight < 1:
                raise InvalidEntry(f"action selector {self.name}: weight of member {member_id} must be >= 1")
            if member_id not in self.member_slots:
                raise InvalidEntry(
                    f"action selector {self.name}: group {group_id} uses unknown member {member_id}"
                )
            expanded += [self.member_slots[member_id]] * weight
        if exists:
            self._count_in_groups(self.group_members[group_id], -1)
        self.group_members[group_id] = group = Group(group_id, tuple(members), max_size)
        self.group_slots[group_id] = expanded
        self._count_in_groups(group, 1)

    def _count_in_groups(self, group: Group, delta: int) -> None:
        for member_id, _ in group.members:
            self.in_groups[member_id] = self.in_groups.get(member_id, 0) + delta

    def group_delete(self, group_id: int) -> None:
        if group_id not in self.group_members:
            raise EntryNotFound(f"action selector {self.name}: no group {group_id}")
        if self.users.get(("group", group_id)):
            raise InvalidEntry(f"action selector {self.name}: group {group_id} is still in use")
        self._count_in_groups(self.group_members.pop(group_id), -1)
        del self.group_slots[group_id]

    def group(self, group_id: int) -> Group:
        try:
            return self.group_members[group_id]
        except KeyError:
            raise EntryNotFound(f"action selector {self.name}: no group {group_id}") from None

    def groups(self) -> list[Group]:
        return list(self.group_members.values())

    def check_ref(self, ref: MemberRef | GroupRef, where: str) -> None:
        if isinstance(ref, MemberRef) and ref.member_id not in self.member_slots:
            raise InvalidEntry(f"{where}: unknown member {ref.member_id}")
        if isinstance(ref, GroupRef) and ref.group_id not in self.group_members:
            raise InvalidEntry(f"{where}: unknown group {ref.group_id}")

    def count_ref(self, ref: MemberRef | GroupRef | None, delta: int) -> None:
        if ref is not None:
            key = ("member", ref.member_id) if isinstance(ref, MemberRef) else ("group", ref.group_id)
            self.users[key] = self.users.get(key, 0) + delta

    def resolve(self, slot: Slot) -> Slot | list[Slot] | None:
        """The member slot a packet uses when no hash is needed (a member entry, a one-member group), the
        group's members (repeated by weight) when the selector must pick one with ``pick()``, or None for
        an empty group (the table's default runs). Split so packets skip packing the selector fields in
        the common cases."""
        ref = slot.ref
        if isinstance(ref, MemberRef):
            return self.member_slots.get(ref.member_id)
        assert isinstance(ref, GroupRef)
        candidates = self.group_slots.get(ref.group_id)
        if not candidates:
            return None
        return candidates[0] if len(candidates) == 1 else candidates

    def pick(self, candidates: list[Slot], selector: bytes) -> Slot:
        """The member of a group for this flow: the hash of the selector fields (packed as a field list)
        modulo the group size, as BMv2 does, so one flow always takes the same member. The whole hash is
        used: BMv2 ignores action_selector's outputWidth (p4c-bm2-ss does not even write it to the JSON)."""
        assert self.hash is not None
        return candidates[self.hash(selector) % len(candidates)]


class Table:
    """One match-action table."""

    def __init__(
        self,
        name: str,
        keys: list[KeyField],
        actions: dict[str, ActionInfo],
        scopes: dict[str, str],
        default: ActionCall,
        default_const: bool,
        size: int,
        profile: ActionProfile | None = None,
        meter_factory: Callable[[], Meter] | None = None,
    ) -> None:
        self.name = name
        self.keys = keys
        self.actions = actions
        self.scopes = scopes
        self.size = size
        self.profile = profile
        self.meter_factory = meter_factory  # set when the table has a direct meter
        self.immutable = False  # set after loading `const entries`
        self.needs_priority = any(k.kind in ("ternary", "range", "optional") for k in keys)
        self.declared_default = default
        self.default_const = default_const
        self.default = self._default_slot(default)
        self.slots: dict[tuple[Any, int], Slot] = {}
        self.seq = 0
        kinds = {k.kind for k in keys}
        lpm_count = sum(k.kind == "lpm" for k in keys)
        if kinds <= {"exact"}:
            self.mode = "exact"
        elif kinds <= {"exact", "lpm"} and lpm_count == 1:
            self.mode = "lpm"
        else:
            self.mode = "scan"
        self.exact: dict[tuple[int, ...], Slot] = {}
        self.lpm_index = next((i for i, k in enumerate(keys) if k.kind == "lpm"), -1)
        self.by_len: dict[int, dict[tuple[int, ...], Slot]] = {}
        self.lpm_lens: list[tuple[int, dict[tuple[int, ...], Slot]]] = []  # (mask, bucket), longest first
        self.scan: list[tuple[Slot, tuple[tuple[int, int, int], ...]]] = []
        self.lookup: Callable[[tuple[int, ...]], Slot | None] = self._pick_lookup()

    # ------------------------------------------------------------------------------ lookup
    def _pick_lookup(self) -> Callable[[tuple[int, ...]], Slot | None]:
        if not self.keys:
            return lambda key: None
        if self.mode == "exact":
            return self.exact.get
        if self.mode == "lpm":
            return self._lookup_lpm_only if len(self.keys) == 1 else self._lookup_lpm
        return self._lookup_scan

    def _lookup_lpm(self, key: tuple[int, ...]) -> Slot | None:
        i = self.lpm_index
        for mask, bucket in self.lpm_lens:
            slot = bucket.get(key[:i] + (key[i] & mask,) + key[i + 1 :])
            if slot is not None:
                return slot
        return None

    def _lookup_lpm_only(self, key: tuple[int, ...]) -> Slot | None:
        """The common one-field lpm table: no key surgery, one dict probe per prefix length."""
        value = key[0]
        for mask, bucket in self.lpm_lens:
            slot = bucket.get((value & mask,))
            if slot is not None:
                return slot
        return None

    def _lookup_scan(self, key: tuple[int, ...]) -> Slot | None:
        for slot, checks in self.scan:
            for index, a, b in checks:  # a, b = (value, mask) when b >= 0... see _scan_checks
                v = key[index]
                if b < 0:
                    if not a <= v <= ~b:
                        break
                elif v & b != a:
                    break
            else:
                return slot
        return None

    def _scan_checks(self, canon: tuple[Any, ...]) -> tuple[tuple[int, int, int], ...]:
        """Per field: (index, value, mask) for masked compares, (index, low, ~high) for ranges (a
        negative third item marks a range)."""
        checks = []
        for index, (field, c) in enumerate(zip(self.keys, canon, strict=True)):
            if c is None:
                continue
            if field.kind in ("exact", "optional"):
                checks.append((index, c, (1 << field.width) - 1))
            elif field.kind == "ternary":
                checks.append((index, c[0], c[1]))
            elif field.kind == "lpm":
                checks.append((index, c[0], _prefix_mask(field.width, c[1])))
            else:
                checks.append((index, c[0], ~c[1]))
        return tuple(checks)

    def _index_add(self, slot: Slot) -> None:
        key = slot.key
        if self.mode == "exact":
            self.exact[key] = slot
        elif self.mode == "lpm":
            i = self.lpm_index
            canon = key[i]
            plen = 0 if canon is None else canon[1]
            value = 0 if canon is None else canon[0]
            bucket = self.by_len.get(plen)
            if bucket is None:  # a new prefix length: the probe order changes
                bucket = self.by_len[plen] = {}
                self._lpm_lengths(self.keys[i].width)
            bucket[key[:i] + (value,) + key[i + 1 :]] = slot
        else:
            bisect.insort(self.scan, (slot, self._scan_checks(key)), key=_scan_order)

    def _index_remove(self, slot: Slot) -> None:
        key = slot.key
        if self.mode == "exact":
            del self.exact[key]
        elif self.mode == "lpm":
            i = self.lpm_index
            canon = key[i]
            plen = 0 if canon is None else canon[1]
            value = 0 if canon is None else canon[0]
            bucket = self.by_len[plen]
            del bucket[key[:i] + (value,) + key[i + 1 :]]
            if not bucket:  # the last entry of its prefix length: one probe less per packet
                del self.by_len[plen]
                self._lpm_lengths(self.keys[i].width)
        else:  # the list is ordered by (-priority, seq) and seq is unique: bisect finds the slot
            at = bisect.bisect_left(self.scan, _scan_order((slot, None)), key=_scan_order)
            assert self.scan[at][0] is slot, "scan list out of order"
            del self.scan[at]

    def _lpm_lengths(self, width: int) -> None:
        self.lpm_lens[:] = [
            (_prefix_mask(width, plen), self.by_len[plen]) for plen in sorted(self.by_len, reverse=True)
        ]

    # ----------------------------------------------------------------------- control plane
    def _where(self) -> str:
        return f"table {self.name}"

    def _canonical_key(self, entry: TableEntry) -> tuple[Any, ...]:
        where = self._where()
        known = {k.name for k in self.keys}
        unknown = set(entry.match) - known
        if unknown:
            raise InvalidEntry(f"{where}: unknown match field(s) {sorted(unknown)}")
        return tuple(_canonical(k, entry.match.get(k.name), where) for k in self.keys)

    def _entry_key(self, entry: TableEntry, from_program: bool = False) -> tuple[Any, int]:
        canon = self._canonical_key(entry)
        priority = entry.priority
        if self.needs_priority:
            if priority <= 0:
                raise InvalidEntry(
                    f"{self._where()}: entries need a priority > 0 (ternary/range/optional keys)"
                )
        elif from_program:
            priority = 0
        elif priority != 0:
            raise InvalidEntry(f"{self._where()}: priority must be 0 (no ternary/range/optional keys)")
        return canon, priority

    def _bind_action(
        self, slot: Slot, action: ActionCall | MemberRef | GroupRef, default: bool = False
    ) -> None:
        where = self._where()
        if isinstance(action, ActionCall):
            if self.profile is not None and not default:
                raise InvalidEntry(
                    f"{where}: uses action profile {self.profile.name}: give a member or group"
                )
            info = self.actions.get(action.name)
            if info is None:
                raise InvalidEntry(f"{where}: action {action.name} is not an action of this table")
            scope = self.scopes[action.name]
            if default and scope == "table_only":
                raise InvalidEntry(f"{where}: action {action.name} is @tableonly, not allowed as default")
            if not default and scope == "default_only":
                raise InvalidEntry(f"{where}: action {action.name} is @defaultonly, not allowed in entries")
            slot.args = info.bind(action, where)
            slot.fn = info.fn
        else:
            if self.profile is None:
                raise InvalidEntry(f"{where}: has no action profile: give an action, not a member/group")
            self.profile.check_ref(action, where)
        slot.action = action
        slot.ref = None if isinstance(action, ActionCall) else action

    def _default_slot(self, action: ActionCall) -> Slot:
        slot = Slot(action, (), 0)
        self._bind_action(slot, action, default=True)
        return slot

    def _find(self, entry: TableEntry) -> Slot:
        key = self._entry_key(entry)
        slot = self.slots.get(key)
        if slot is None:
            raise EntryNotFound(f"{self._where()}: no entry with that match key and priority")
        return slot

    def insert(self, entry: TableEntry, const: bool = False) -> None:
        if self.immutable:
            raise InvalidEntry(f"{self._where()} has const entries and cannot be changed")
        key = self._entry_key(entry, from_program=const)
        if key in self.slots:
            raise EntryExists(f"{self._where()}: an entry with that match key and priority exists")
        if len(self.slots) >= self.size > 0:
            raise TableFull(f"{self._where()} is full ({self.size} entries)")
        slot = Slot(entry.action, key[0], key[1])
        self._bind_action(slot, entry.action)
        slot.const = const
        self.seq += 1
        slot.seq = self.seq
        if self.meter_factory is not None:
            slot.meter = self.meter_factory()
            slot.meter.configure(entry.meter_config)
        if entry.counter_data is not None:
            slot.counter = list(entry.counter_data)
        if self.profile is not None:
            self.profile.count_ref(slot.ref, 1)
        self.slots[key] = slot
        self._index_add(slot)

    def modify(self, entry: TableEntry) -> None:
        if self.immutable:
            raise InvalidEntry(f"{self._where()} has const entries and cannot be changed")
        slot = self._find(entry)
        old_ref = slot.ref
        self._bind_action(slot, entry.action)
        if self.profile is not None:
            self.profile.count_ref(old_ref, -1)
            self.profile.count_ref(slot.ref, 1)
        if entry.counter_data is not None:
            slot.counter[:] = entry.counter_data
        if entry.meter_config is not None and slot.meter is not None:
            slot.meter.configure(entry.meter_config)

    def delete(self, entry: TableEntry) -> None:
        if self.immutable:
            raise InvalidEntry(f"{self._where()} has const entries and cannot be changed")
        slot = self._find(entry)
        del self.slots[(slot.key, slot.priority)]
        self._index_remove(slot)
        if self.profile is not None:
            self.profile.count_ref(slot.ref, -1)

    def find(self, entry: TableEntry) -> Slot:
        return self._find(entry)

    def read_counter(self, slot: Slot) -> tuple[int, int]:
        """(bytes, packets) of the entry's direct counter."""
        return slot.counter[0], slot.counter[1]

    def write_counter(self, slot: Slot, byte_count: int, packet_count: int) -> None:
        slot.counter[:] = [byte_count, packet_count]

    def configure_meter(self, slot: Slot, config: MeterConfig | None) -> None:
        """Configure the entry's direct meter. Raises InvalidEntry for a bad configuration."""
        assert slot.meter is not None
        slot.meter.configure(config)

    def entry_view(self, slot: Slot) -> TableEntry:
        match = {}
        for field, canon in zip(self.keys, slot.key, strict=True):
            value = _api_match(field, canon)
            if value is not None:
                match[field.name] = value
        config: MeterConfig | None = slot.meter.config if slot.meter is not None else None
        return TableEntry(
            match,
            slot.action,
            slot.priority,
            counter_data=self.read_counter(slot),
            meter_config=config,
            is_const=slot.const,
        )

    def entries(self) -> list[TableEntry]:
        return [self.entry_view(slot) for slot in self.slots.values()]

    def set_default(self, action: ActionCall) -> None:
        if self.default_const:
            raise ConstDefault(f"{self._where()}: the default action is const")
        new = self._default_slot(action)
        self.default.fn, self.default.args, self.default.action = new.fn, new.args, new.action

    def reset_default(self) -> None:
        self.set_default(self.declared_default) if not self.default_const else None

    def describe(self, slot: Slot) -> str:
        """Entry text for trace logs, in the .stf notation: match fields and priority (no counters)."""
        parts = [
            f"{field.name}:{_match_text(field.kind, canon)}"
            for field, canon in zip(self.keys, slot.key, strict=True)
        ]
        text = " ".join(parts) or "(no key)"
        return f"{text} priority {slot.priority}" if self.needs_priority else text


def _match_text(kind: str, canon: Any) -> str:
    if canon is None:
        return "*"
    if kind == "ternary":
        return f"{canon[0]:#x}&&&{canon[1]:#x}"
    if kind == "lpm":
        return f"{canon[0]:#x}/{canon[1]}"
    if kind == "range":
        return f"{canon[0]:#x}..{canon[1]:#x}"
    return f"{canon:#x}"


def action_text(action: ActionCall | MemberRef | GroupRef) -> str:
    """``name(param:value, ...)``, ``member(id)`` or ``group(id)`` (the .stf notation)."""
    if isinstance(action, MemberRef):
        return f"member({action.member_id})"
    if isinstance(action, GroupRef):
        return f"group({action.group_id})"
    return f"{action.name}({', '.join(f'{k}:{v:#x}' for k, v in action.params.items())})"


def lookup_name(mapping: dict[str, Any], name: str, kind: str) -> Any:
    try:
        return mapping[name]
    except KeyError:
        raise UnknownName(f"no {kind} named {name!r}") from None
