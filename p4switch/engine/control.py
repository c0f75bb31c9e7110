"""The control-plane half of the engine interface (api.Switch), shared by both back ends: the program's
tables, action profiles, counters, meters, registers, multicast groups and clone sessions as the engine API
reads and writes them, with every entry validated the same way (tables.py). Every call takes the switch
lock, so a packet never sees a half-applied write, and names one object by its P4Info name; a call that
names one entry finds it by key (see tables.py), never by a scan.

A back end supplies where the data-plane state lives through a few factories: the Python engine
(switch.V1Switch) keeps it in the objects of tables.py and externs.py, which its generated code reads; the
native engine (native.NativeSwitch) subclasses them so that every write also reaches its C tables and
every counter, meter, register and parser value set lives in C.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from p4switch import ir
from p4switch.engine.api import (
    ActionCall,
    CloneSession,
    EngineError,
    EntryNotFound,
    Exact,
    Group,
    InvalidEntry,
    Lpm,
    Member,
    MeterConfig,
    Optional_,
    ProgramError,
    Range,
    Replica,
    Switch,
    TableEntry,
    Ternary,
)
from p4switch.engine.externs import HASH_ALGORITHMS, Counter, Meter, MeterArray, Register, ValueSet
from p4switch.engine.tables import ActionInfo, ActionProfile, KeyField, Table, lookup_name


def profile_args(inst: ir.ActionProfile | ir.ActionSelector, actions: dict[str, ActionInfo]
                 ) -> tuple[str, dict[str, ActionInfo], int, str | None, int]:
    """ActionProfile's arguments for the profile or selector ``inst`` running ``actions``."""
    selector = inst if isinstance(inst, ir.ActionSelector) else None
    return (inst.name, actions, inst.size, selector.algorithm if selector else None,
            selector.max_group_size if selector else 0)


def key_width(key: ir.TableKey, width: Callable[[ir.Type], int]) -> int:
    """Bits of a key; an error key holds the error's number (32 bits, as BMv2 stores errors)."""
    return 32 if isinstance(key.type, ir.TError) else width(key.type)


class ControlPlane(Switch):
    """The engine API's control-plane half (see api.Switch); back ends add ``process``."""

    def __init__(self, program: ir.Program, log: logging.Logger | None, clock: Callable[[], float]) -> None:
        super().__init__()
        if log is not None:
            self.log = log
        self.program = program
        self.clock = clock
        self.start_time = clock()
        self.mcast: dict[int, list[tuple[int, int]]] = {}
        self.sessions: dict[int, CloneSession] = {}
        self.digest_fields = {d.name: [f.name for f in d.fields] for d in program.digests}
        self.errors: list[str] = list(program.errors)
        self.counters: dict[str, Counter] = {}
        self.meters: dict[str, MeterArray] = {}
        self.registers: dict[str, Register] = {}
        self.value_sets: dict[str, ValueSet] = {}
        self.tables: dict[str, Table] = {}
        self.profiles: dict[str, ActionProfile] = {}

    # -------------------------------------------------------------------------- back-end factories
    def new_counter(self, inst: ir.Counter) -> Counter:
        return Counter(inst.name, inst.size)

    def new_meter_array(self, inst: ir.Meter) -> MeterArray:
        return MeterArray(inst.name, inst.size, inst.unit == "bytes", self.clock)

    def new_register(self, inst: ir.Register, width: int) -> Register:
        return Register(inst.name, inst.size, width, isinstance(inst.type, ir.TInt))

    def new_value_set(self, inst: ir.ValueSet) -> ValueSet:
        return ValueSet(inst.name, inst.size, inst.widths)

    def new_profile(self, inst: ir.ActionProfile | ir.ActionSelector, actions: dict[str, ActionInfo]
                    ) -> ActionProfile:
        return ActionProfile(*profile_args(inst, actions))

    def new_table(self, t: ir.Table, keys: list[KeyField], actions: dict[str, ActionInfo],
                  default: ActionCall, meter_factory: Callable[[], Meter] | None) -> Table:
        return Table(
            t.name,
            keys,
            actions,
            {a.name: a.scope for a in t.actions},
            default,
            t.default_action.const,
            t.size,
            self.profiles.get(t.implementation or ""),
            meter_factory,
        )

    # ------------------------------------------------------------------------------ building
    def make_externs(self, width: Callable[[ir.Type], int]) -> dict[str, Any]:
        """Counters, meters, registers and action profiles of the program; returns every extern instance's
        object by name (None for those that have none), for the generated code to reach."""
        objects: dict[str, Any] = {}
        for inst in self.program.externs:
            obj: Any = None
            if isinstance(inst, ir.Counter):
                obj = self.counters[inst.name] = self.new_counter(inst)
            elif isinstance(inst, ir.Meter):
                obj = self.meters[inst.name] = self.new_meter_array(inst)
            elif isinstance(inst, ir.Register):
                obj = self.registers[inst.name] = self.new_register(inst, width(inst.type))
            elif isinstance(inst, ir.ValueSet):
                obj = self.value_sets[inst.name] = self.new_value_set(inst)
            elif isinstance(inst, ir.ActionSelector) and inst.algorithm not in HASH_ALGORITHMS:
                raise ProgramError(
                    f"{inst.src or inst.name}: action_selector algorithm {inst.algorithm} is not supported "
                    "by p4switch"
                )
            objects[inst.name] = obj
        return objects

    def make_tables(self, width: Callable[[ir.Type], int],
                    action_fn: Callable[[ir.Table, ir.Action], Callable[..., Any] | None]) -> None:
        """Tables with their const entries, and the action profiles they use. ``action_fn`` gives the back
        end's function of an action in a table (None when the back end dispatches by name)."""
        actions = {a.name: a for a in self.program.actions}
        infos: dict[str, dict[str, ActionInfo]] = {}
        for t in self.program.tables:
            acts = {}
            for ref in t.actions:
                a = actions[ref.name]
                params = [(p.name, width(p.type)) for p in a.params]
                acts[a.name] = ActionInfo(a.name, params, action_fn(t, a))
            infos[t.name] = acts
        for inst in self.program.externs:
            if isinstance(inst, ir.ActionProfile | ir.ActionSelector):
                union: dict[str, ActionInfo] = {}
                for tname in inst.tables:
                    union.update(infos.get(tname, {}))
                self.profiles[inst.name] = self.new_profile(inst, union)
        for t in self.program.tables:
            keys = [KeyField(k.name, k.match, key_width(k, width)) for k in t.keys if k.match != "selector"]
            for k in keys:
                if k.kind not in ("exact", "ternary", "lpm", "range", "optional"):
                    raise ProgramError(f"{t.src}: match kind {k.kind} is not supported by p4switch")
            d = t.default_action
            default = self._action_call(infos[t.name], d.name, d.args, t)
            meters = self._new_meter if t.direct_meter else None
            table = self.new_table(t, keys, infos[t.name], default, meters)
            for e in t.entries:
                try:
                    table.insert(self._const_entry(t, keys, infos[t.name], e), const=True)
                except EngineError as exc:
                    raise ProgramError(f"{e.src or t.src}: {exc}") from None
            table.immutable = t.entries_const
            self.tables[t.name] = table

    def _new_meter(self) -> Meter:
        return Meter(self.clock)

    def _action_call(
        self, acts: dict[str, ActionInfo], name: str, args: Sequence[int], t: ir.Table
    ) -> ActionCall:
        info = acts.get(name)
        if info is None:
            raise ProgramError(f"{t.src}: table {t.name}: action {name} is not in its actions")
        return ActionCall(name, {p: int(v) for (p, _), v in zip(info.params, args, strict=True)})

    def _const_entry(
        self, t: ir.Table, keys: list[KeyField], acts: dict[str, ActionInfo], e: ir.Entry
    ) -> TableEntry:
        match: dict[str, Any] = {}
        for k, m in zip(keys, e.match, strict=True):
            if isinstance(m, ir.MatchExact):
                # const entries of optional/ternary keys may be written as plain values
                value = m.value
                match[k.name] = {
                    "exact": Exact(value),
                    "optional": Optional_(value),
                    "ternary": Ternary(value, (1 << k.width) - 1),
                    "lpm": Lpm(value, k.width),
                    "range": Range(value, value),
                }[k.kind]
            elif isinstance(m, ir.MatchTernary):
                match[k.name] = Ternary(m.value & m.mask, m.mask)
            elif isinstance(m, ir.MatchLpm):  # bits beyond the prefix do not matter; P4Runtime wants them 0
                plen = m.prefix_len
                match[k.name] = Lpm(m.value & (((1 << plen) - 1) << (k.width - plen)), plen)
            elif isinstance(m, ir.MatchRange):
                match[k.name] = Range(m.low, m.high)
            elif isinstance(m, ir.MatchOptional):
                match[k.name] = Optional_(m.value)
        action = self._action_call(acts, e.action.name, e.action.args, t)
        return TableEntry(match, action, e.priority or 1)

    def deliver_digest(self, name: str, values: Sequence[int]) -> None:
        """Hand one digest to the sink with its field names."""
        names = self.digest_fields.get(name) or [f"f{i}" for i in range(len(values))]
        sink = self.digest_sink
        if sink is not None:
            sink(name, [(n, int(v)) for n, v in zip(names, values, strict=False)])

    # -------------------------------------------------------------------------------- tables
    def _table(self, name: str) -> Table:
        return lookup_name(self.tables, name, "table")  # type: ignore[no-any-return]

    def table_insert(self, table: str, entry: TableEntry) -> None:
        with self.lock:
            self._table(table).insert(entry)

    def table_modify(self, table: str, entry: TableEntry) -> None:
        with self.lock:
            self._table(table).modify(entry)

    def table_delete(self, table: str, entry: TableEntry) -> None:
        with self.lock:
            self._table(table).delete(entry)

    def table_entry(self, table: str, entry: TableEntry) -> TableEntry:
        with self.lock:
            t = self._table(table)
            return t.entry_view(t.find(entry))

    def table_entries(self, table: str) -> list[TableEntry]:
        with self.lock:
            return self._table(table).entries()

    def table_set_default(self, table: str, action: ActionCall) -> None:
        with self.lock:
            self._table(table).set_default(action)

    def table_reset_default(self, table: str) -> None:
        with self.lock:
            self._table(table).reset_default()

    def table_get_default(self, table: str) -> ActionCall:
        with self.lock:
            action = self._table(table).default.action
            assert isinstance(action, ActionCall)
            return action

    # ------------------------------------------------------------------------------ profiles
    def _profile(self, name: str) -> ActionProfile:
        return lookup_name(self.profiles, name, "action profile")  # type: ignore[no-any-return]

    def member_insert(self, profile: str, member_id: int, action: ActionCall) -> None:
        with self.lock:
            self._profile(profile).member_insert(member_id, action)

    def member_modify(self, profile: str, member_id: int, action: ActionCall) -> None:
        with self.lock:
            self._profile(profile).member_modify(member_id, action)

    def member_delete(self, profile: str, member_id: int) -> None:
        with self.lock:
            self._profile(profile).member_delete(member_id)

    def member(self, profile: str, member_id: int) -> Member:
        with self.lock:
            return self._profile(profile).member(member_id)

    def members(self, profile: str) -> list[Member]:
        with self.lock:
            return self._profile(profile).members()

    def group_insert(
        self, profile: str, group_id: int, members: list[tuple[int, int]], max_size: int = 0
    ) -> None:
        with self.lock:
            self._profile(profile).group_set(group_id, members, max_size, insert=True)

    def group_modify(
        self, profile: str, group_id: int, members: list[tuple[int, int]], max_size: int = 0
    ) -> None:
        with self.lock:
            self._profile(profile).group_set(group_id, members, max_size, insert=False)

    def group_delete(self, profile: str, group_id: int) -> None:
        with self.lock:
            self._profile(profile).group_delete(group_id)

    def group(self, profile: str, group_id: int) -> Group:
        with self.lock:
            return self._profile(profile).group(group_id)

    def groups(self, profile: str) -> list[Group]:
        with self.lock:
            return self._profile(profile).groups()

    # ---------------------------------------------------------- counters, meters, registers
    def counter_read(self, name: str, index: int) -> tuple[int, int]:
        with self.lock:
            return lookup_name(self.counters, name, "counter").read_cell(index)  # type: ignore[no-any-return]

    def counter_write(self, name: str, index: int, byte_count: int, packet_count: int) -> None:
        with self.lock:
            lookup_name(self.counters, name, "counter").write_cell(index, byte_count, packet_count)

    def counter_size(self, name: str) -> int:
        return lookup_name(self.counters, name, "counter").size()  # type: ignore[no-any-return]

    def _direct_slot(self, table: str, entry: TableEntry, what: str) -> tuple[Table, Any]:
        t = self._table(table)
        if what == "meter" and t.meter_factory is None:
            raise InvalidEntry(f"table {table} has no direct meter")
        return t, t.find(entry)

    def direct_counter_read(self, table: str, entry: TableEntry) -> tuple[int, int]:
        with self.lock:
            t, slot = self._direct_slot(table, entry, "counter")
            return t.read_counter(slot)

    def direct_counter_write(self, table: str, entry: TableEntry, byte_count: int, packet_count: int) -> None:
        with self.lock:
            t, slot = self._direct_slot(table, entry, "counter")
            t.write_counter(slot, byte_count, packet_count)

    def meter_set(self, name: str, index: int, config: MeterConfig | None) -> None:
        with self.lock:
            lookup_name(self.meters, name, "meter").set_config(index, config)

    def meter_get(self, name: str, index: int) -> MeterConfig | None:
        with self.lock:
            return lookup_name(self.meters, name, "meter").cell(index).config  # type: ignore[no-any-return]

    def meter_size(self, name: str) -> int:
        return lookup_name(self.meters, name, "meter").size()  # type: ignore[no-any-return]

    def direct_meter_set(self, table: str, entry: TableEntry, config: MeterConfig | None) -> None:
        with self.lock:
            t, slot = self._direct_slot(table, entry, "meter")
            t.configure_meter(slot, config)

    def direct_meter_get(self, table: str, entry: TableEntry) -> MeterConfig | None:
        with self.lock:
            return self._direct_slot(table, entry, "meter")[1].meter.config  # type: ignore[no-any-return]

    def register_read(self, name: str, index: int) -> int:
        with self.lock:
            reg = lookup_name(self.registers, name, "register")
            reg.check_index(index)
            return reg.read(index)  # type: ignore[no-any-return]

    def register_write(self, name: str, index: int, value: int) -> None:
        with self.lock:
            reg = lookup_name(self.registers, name, "register")
            reg.check_index(index)
            reg.write(index, value)

    def register_size(self, name: str) -> int:
        return lookup_name(self.registers, name, "register").size()  # type: ignore[no-any-return]

    def value_set_set(self, name: str, members: list[tuple[int, ...]]) -> None:
        with self.lock:
            vs = lookup_name(self.value_sets, name, "value set")
            try:
                vs.set(members)
            except ValueError as exc:
                raise InvalidEntry(str(exc)) from None

    def value_set_get(self, name: str) -> list[tuple[int, ...]]:
        with self.lock:
            return sorted(lookup_name(self.value_sets, name, "value set").members)

    # ---------------------------------------------------------------- replication engine
    def mcast_group_set(self, group_id: int, replicas: list[tuple[int, int]]) -> None:
        if not 0 < group_id < 1 << 16:
            raise InvalidEntry(f"multicast group id {group_id} must be in 1..65535")
        with self.lock:
            self.mcast[group_id] = [(int(p), int(r)) for p, r in replicas]

    def mcast_group_delete(self, group_id: int) -> None:
        with self.lock:
            if self.mcast.pop(group_id, None) is None:
                raise EntryNotFound(f"no multicast group {group_id}")

    def mcast_groups(self) -> dict[int, list[tuple[int, int]]]:
        with self.lock:
            return {g: list(r) for g, r in self.mcast.items()}

    def clone_session_set(
        self,
        session_id: int,
        replicas: list[tuple[int, int]],
        class_of_service: int = 0,
        packet_length_bytes: int = 0,
    ) -> None:
        if session_id < 0 or packet_length_bytes < 0:
            raise InvalidEntry("clone session id and packet_length_bytes must be >= 0")
        with self.lock:
            self.sessions[session_id] = CloneSession(
                session_id, tuple(Replica(p, r) for p, r in replicas), class_of_service, packet_length_bytes
            )

    def clone_session_delete(self, session_id: int) -> None:
        with self.lock:
            if self.sessions.pop(session_id, None) is None:
                raise EntryNotFound(f"no clone session {session_id}")

    def clone_sessions(self) -> list[CloneSession]:
        with self.lock:
            return list(self.sessions.values())
