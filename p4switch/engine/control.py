"""The control-plane half of the engine interface (api.Switch) over the engine's own objects: tables and
action profiles (tables.py), counters, meters and registers (externs.py), multicast groups and clone
sessions. Every call takes the switch lock, so a packet never sees a half-applied write, and names one
object by its P4Info name; a call that names one entry finds it by key (see tables.py), never by a scan.

V1Switch (switch.py) fills these objects when it loads a program and adds the data plane."""

from __future__ import annotations

from typing import Any

from p4switch.engine.api import (
    ActionCall,
    CloneSession,
    EntryNotFound,
    Group,
    InvalidEntry,
    Member,
    MeterConfig,
    Replica,
    Switch,
    TableEntry,
)
from p4switch.engine.externs import Counter, MeterArray, Register
from p4switch.engine.tables import ActionProfile, Table, lookup_name


class ControlPlane(Switch):
    """Tables, action profiles, externs and the replication engine of one loaded program, written and read
    by name under ``self.lock``. Abstract: the subclass that loads a program fills the dicts and
    implements ``process``."""

    tables: dict[str, Table]
    profiles: dict[str, ActionProfile]
    counters: dict[str, Counter]
    meters: dict[str, MeterArray]
    registers: dict[str, Register]
    mcast: dict[int, list[tuple[int, int]]]
    """multicast group id -> (egress port, egress_rid) replicas"""
    sessions: dict[int, CloneSession]

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
            cell = lookup_name(self.counters, name, "counter").cell(index)
            return cell[0], cell[1]

    def counter_write(self, name: str, index: int, byte_count: int, packet_count: int) -> None:
        with self.lock:
            lookup_name(self.counters, name, "counter").cell(index)[:] = [byte_count, packet_count]

    def counter_size(self, name: str) -> int:
        return len(lookup_name(self.counters, name, "counter").cells)

    def _direct_slot(self, table: str, entry: TableEntry, what: str) -> Any:
        t = self._table(table)
        if what == "meter" and t.meter_factory is None:
            raise InvalidEntry(f"table {table} has no direct meter")
        return t.find(entry)

    def direct_counter_read(self, table: str, entry: TableEntry) -> tuple[int, int]:
        with self.lock:
            counter = self._direct_slot(table, entry, "counter").counter
            return counter[0], counter[1]

    def direct_counter_write(self, table: str, entry: TableEntry, byte_count: int, packet_count: int) -> None:
        with self.lock:
            self._direct_slot(table, entry, "counter").counter[:] = [byte_count, packet_count]

    def meter_set(self, name: str, index: int, config: MeterConfig | None) -> None:
        with self.lock:
            lookup_name(self.meters, name, "meter").cell(index).configure(config)

    def meter_get(self, name: str, index: int) -> MeterConfig | None:
        with self.lock:
            return lookup_name(self.meters, name, "meter").cell(index).config  # type: ignore[no-any-return]

    def meter_size(self, name: str) -> int:
        return len(lookup_name(self.meters, name, "meter").cells)

    def direct_meter_set(self, table: str, entry: TableEntry, config: MeterConfig | None) -> None:
        with self.lock:
            self._direct_slot(table, entry, "meter").meter.configure(config)

    def direct_meter_get(self, table: str, entry: TableEntry) -> MeterConfig | None:
        with self.lock:
            return self._direct_slot(table, entry, "meter").meter.config  # type: ignore[no-any-return]

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
        return len(lookup_name(self.registers, name, "register").cells)

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
