"""Table entries (P4Runtime TableEntry): inserts, modifies and deletes of one entry, the default entry,
one-shot entries given with an action set, and reads.

Every write or read of one entry goes to the engine by its key (match + priority), and what P4Runtime
keeps beside an entry that the engine has no use for (its opaque metadata, the hidden group of a one-shot
entry) is kept here by the same canonical key, as p4lang/PI's TableInfoStore does: so one entry costs the
same whatever the table holds. Only a wildcard read lists a table."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial

import grpc
from finsy.proto import p4r

from p4switch.engine import api as engine
from p4switch.runtime import codec
from p4switch.runtime.action_profiles import ActionProfiles
from p4switch.runtime.entity import NO_ACTION, EntityHandler, Pipeline, Update, chosen, found
from p4switch.runtime.errors import P4RuntimeError, already_exists, invalid, not_found
from p4switch.runtime.oneshot import HiddenGroup
from p4switch.runtime.p4info import Table

Match = dict[str, engine.Match]


@dataclass
class EntryInfo:
    """What P4Runtime returns with an entry and the engine does not hold."""

    controller_metadata: int = 0
    metadata: bytes = b""
    oneshot: HiddenGroup | None = None
    """the hidden group of an entry written with an action set"""

    def __bool__(self) -> bool:
        return bool(self.controller_metadata or self.metadata or self.oneshot)


class TableEntries(EntityHandler):
    kind = "table_entry"

    def __init__(self, profiles: ActionProfiles) -> None:
        self.profiles = profiles
        self._info: dict[codec.EntryKey, EntryInfo] = {}

    def reset(self) -> None:
        self._info.clear()

    # ------------------------------------------------------------------------------------ writes
    def write(self, pipe: Pipeline, update_type: int, msg: p4r.TableEntry) -> None:
        table = pipe.index.table(msg.table_id)
        if msg.is_default_action:
            _write_default(pipe, update_type, table, msg)
        elif table.is_const and (update_type != Update.MODIFY or msg.HasField("action")):
            raise P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED,
                                 f"table {table.name} is const: its entries cannot be changed")
        elif update_type != Update.DELETE and msg.action.WhichOneof("type") == "action_profile_action_set":
            self._write_oneshot(pipe, update_type, table, msg)
        elif update_type == Update.INSERT:
            self._insert(pipe, table, msg)
        elif msg.is_const:
            raise invalid("is_const must be false in a write")
        elif update_type == Update.DELETE:
            self._delete(pipe, table, msg)
        else:
            self._modify(pipe, table, msg)

    def _insert(self, pipe: Pipeline, table: Table, msg: p4r.TableEntry) -> None:
        entry = codec.decode_entry(pipe.index, msg)[1]
        self.profiles.check_reference(pipe, table, entry.action)
        pipe.switch.table_insert(table.name, entry)
        self._keep(pipe, codec.entry_key(table, entry.match, entry.priority), msg)

    def _delete(self, pipe: Pipeline, table: Table, msg: p4r.TableEntry) -> None:
        _, match, priority = codec.decode_key(pipe.index, msg)
        pipe.switch.table_delete(table.name, engine.TableEntry(match, NO_ACTION, priority))
        info = self._info.pop(codec.entry_key(table, match, priority), None)
        if info is not None and info.oneshot is not None:
            self.profiles.oneshots.release(pipe.switch, info.oneshot)

    def _modify(self, pipe: Pipeline, table: Table, msg: p4r.TableEntry) -> None:
        """A new action, or (no action given) new direct counter data / meter config for the entry."""
        _, match, priority = codec.decode_key(pipe.index, msg)
        key = codec.entry_key(table, match, priority)
        if msg.HasField("action"):
            action = codec.decode_table_action(pipe.index, table, msg)
        else:
            found = _lookup(pipe.switch, table, match, priority)
            if not found:
                raise not_found(f"no such entry in table {table.name}")
            action = found[0].action
        self.profiles.check_reference(pipe, table, action)
        counter, meter = codec.direct_state(table, msg)
        pipe.switch.table_modify(table.name, engine.TableEntry(match, action, priority, counter_data=counter,
                                                               meter_config=meter))
        self._keep(pipe, key, msg, keep_oneshot=not msg.HasField("action"))

    def _write_oneshot(self, pipe: Pipeline, update_type: int, table: Table, msg: p4r.TableEntry) -> None:
        """INSERT/MODIFY of an entry given with an action set: it points at a new hidden group."""
        _, match, priority = codec.decode_key(pipe.index, msg)
        exists = bool(_lookup(pipe.switch, table, match, priority))
        if update_type == Update.INSERT and exists:
            raise already_exists(f"the entry exists in table {table.name}")
        if update_type == Update.MODIFY and not exists:
            raise not_found(f"no such entry in table {table.name}")
        hidden = self.profiles.oneshot(pipe, table, msg.action.action_profile_action_set)
        counter, meter = codec.direct_state(table, msg)
        entry = engine.TableEntry(match, engine.GroupRef(hidden.group_id), priority, counter_data=counter,
                                  meter_config=meter)
        try:
            write = pipe.switch.table_insert if update_type == Update.INSERT else pipe.switch.table_modify
            write(table.name, entry)
        except engine.EngineError:
            self.profiles.oneshots.release(pipe.switch, hidden)
            raise
        self._keep(pipe, codec.entry_key(table, match, priority), msg, oneshot=hidden)

    def _keep(self, pipe: Pipeline, key: codec.EntryKey, msg: p4r.TableEntry, *,
              oneshot: HiddenGroup | None = None, keep_oneshot: bool = False) -> None:
        """Record what a write gave beside the engine's entry: its metadata (they replace the old ones)
        and its hidden group (``oneshot``, or the one it had with ``keep_oneshot``). A hidden group the
        entry no longer uses is released."""
        old = self._info.get(key, EntryInfo())
        info = EntryInfo(msg.controller_metadata, msg.metadata, old.oneshot if keep_oneshot else oneshot)
        if info:
            self._info[key] = info
        else:
            self._info.pop(key, None)
        if old.oneshot is not None and old.oneshot is not info.oneshot:
            self.profiles.oneshots.release(pipe.switch, old.oneshot)

    # ------------------------------------------------------------------------------------- reads
    def read(self, pipe: Pipeline, msg: p4r.TableEntry) -> Iterator[p4r.Entity]:
        switch, index = pipe.switch, pipe.index
        counter, meter = msg.HasField("counter_data"), msg.HasField("meter_config")
        key = codec.decode_key(index, msg)[1:] if msg.table_id and msg.match else None
        for table in chosen(index.tables, msg.table_id, index.table):
            if msg.is_default_action:
                default = engine.TableEntry({}, switch.table_get_default(table.name), is_default=True)
                yield p4r.Entity(table_entry=codec.encode_entry(index, table, default, counter=False,
                                                                meter=False))
                continue
            entries = switch.table_entries(table.name) if key is None else _lookup(switch, table, *key)
            for entry in entries:
                if not entry.is_default:
                    yield p4r.Entity(table_entry=self._encode(pipe, table, entry, counter, meter))

    def _encode(self, pipe: Pipeline, table: Table, entry: engine.TableEntry, counter: bool,
                meter: bool) -> p4r.TableEntry:
        out = codec.encode_entry(pipe.index, table, entry, counter=counter, meter=meter)
        info = self._info.get(codec.entry_key(table, entry.match, entry.priority))
        if info is not None:
            if info.oneshot is not None:
                out.action.action_profile_action_set.CopyFrom(info.oneshot.action_set)
            out.controller_metadata, out.metadata = info.controller_metadata, info.metadata
        return out


def _lookup(switch: engine.Switch, table: Table, match: Match, priority: int) -> list[engine.TableEntry]:
    """The entry with this key as the engine holds it (a lookup by key, never a listing), or none."""
    return found(partial(switch.table_entry, table.name, engine.TableEntry(match, NO_ACTION, priority)))


def _write_default(pipe: Pipeline, update_type: int, table: Table, msg: p4r.TableEntry) -> None:
    codec.decode_key(pipe.index, msg)
    if update_type != Update.MODIFY:
        raise invalid("the default entry can only be modified (no INSERT or DELETE)")
    if table.const_default_action_id:
        raise P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED,
                             f"the default action of table {table.name} is const")
    if not msg.HasField("action"):
        pipe.switch.table_reset_default(table.name)
        return
    if msg.action.WhichOneof("type") != "action":
        raise invalid("the default entry of an indirect table is a const NoAction")
    pipe.switch.table_set_default(table.name, codec.decode_action(pipe.index, table, msg.action.action,
                                                                  default=True))
