"""What every P4Runtime entity handler shares: the committed pipeline it works on, the handler interface
the service dispatches Write updates and Read entities to, and the small checks several kinds need.

One handler per entity kind (the ``Entity`` oneof field it serves), as p4lang/PI's DeviceMgr hands each
kind to its own manager: tables.py, action_profiles.py, counters.py, meters.py, registers.py,
value_sets.py, replication.py, digests.py. A handler raises P4RuntimeError (or an engine error, mapped
by the service) with a message that names the entity it refuses."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
from finsy.proto import p4r

from p4switch.engine import api as engine
from p4switch.runtime import codec
from p4switch.runtime.errors import P4RuntimeError, already_exists, invalid, not_found, unimplemented
from p4switch.runtime.p4info import Array, P4InfoIndex, Table

T = TypeVar("T")
Update = p4r.Update

NO_ACTION = engine.ActionCall("NoAction")
"""Placeholder action for entry keys: the engine ignores the action of a delete / keyed read."""


@dataclass(frozen=True)
class Pipeline:
    """A forwarding pipeline config with its P4Info index and the engine switch running its program."""

    config: p4r.ForwardingPipelineConfig
    index: P4InfoIndex
    switch: engine.Switch


class EntityHandler(ABC):
    """Writes and reads of one kind of entity (``kind``: the ``Entity`` oneof field name)."""

    kind: str

    @abstractmethod
    def write(self, pipe: Pipeline, update_type: int, msg: Any) -> None:
        """Apply one INSERT/MODIFY/DELETE of ``msg`` (the entity's message)."""

    @abstractmethod
    def read(self, pipe: Pipeline, msg: Any) -> Iterable[p4r.Entity]:
        """The entities ``msg`` names (unset ids are wildcards)."""

    def reset(self) -> None:  # noqa: B027 - a no-op for the handlers that keep nothing of their own
        """A new pipeline was committed: forget what belonged to the old one."""


def chosen(items: dict[int, T], wanted: int, lookup: Callable[[int], T]) -> list[T]:
    """What a read names: the object with id ``wanted`` (NOT_FOUND when unknown), or all for id 0."""
    return [lookup(wanted)] if wanted else list(items.values())


def found(lookup: Callable[[], T]) -> list[T]:
    """The object a keyed engine lookup returns, or none when it does not exist (a read that names
    something absent reads nothing, it is not an error)."""
    try:
        return [lookup()]
    except engine.EntryNotFound:
        return []


def modify_only(update_type: int, what: str) -> None:
    if update_type != Update.MODIFY:
        raise invalid(f"{what} can only be modified (no INSERT or DELETE)")


def check_existence(update_type: int, exists: bool, what: str) -> None:
    """ALREADY_EXISTS for an INSERT of something that exists, NOT_FOUND for a MODIFY/DELETE of nothing."""
    if update_type == Update.INSERT and exists:
        raise already_exists(f"{what} already exists")
    if update_type != Update.INSERT and not exists:
        raise not_found(f"{what} does not exist")


def cells(array: Array, msg: p4r.CounterEntry | p4r.MeterEntry | p4r.RegisterEntry,
          size_of: Callable[[str], int]) -> range:
    """The cells a counter/meter/register entry names: one (index set) or all."""
    size = array.size or size_of(array.name)
    if not msg.HasField("index"):
        return range(size)
    i = msg.index.index
    if i < 0:
        raise invalid(f"negative index {i} for {array.name}")
    if i >= size:
        raise P4RuntimeError(grpc.StatusCode.OUT_OF_RANGE, f"index {i} out of range for {array.name}")
    return range(i, i + 1)


def array_cells(arrays: dict[int, Array], wanted: int, lookup: Callable[[int], Array],
                msg: p4r.CounterEntry | p4r.MeterEntry | p4r.RegisterEntry, size_of: Callable[[str], int]
                ) -> Iterator[tuple[Array, int]]:
    """The (array, index) cells a counter/meter/register read names: those of the array ``wanted`` (of
    every array for id 0), one index or all (``cells``). One walk for the three indexed kinds."""
    for array in chosen(arrays, wanted, lookup):
        for i in cells(array, msg, size_of):
            yield array, i


def no_color_counters(msg: p4r.MeterEntry | p4r.DirectMeterEntry) -> None:
    if msg.HasField("counter_data"):
        raise unimplemented("per-colour meter counters are not supported by p4switch")


def direct_entry(pipe: Pipeline, msg: p4r.TableEntry, resource: str) -> tuple[Table, engine.TableEntry]:
    """The table and entry key a direct counter/meter entity names (``resource``: the Table attribute,
    ``direct_counter_id`` or ``direct_meter_id``)."""
    table, match, priority = codec.decode_key(pipe.index, msg)
    if msg.is_default_action:
        raise unimplemented("direct resources of the default entry are not supported by p4switch")
    if not getattr(table, resource):
        raise invalid(f"table {table.name} has no direct {resource.split('_')[1]}")
    return table, engine.TableEntry(match, NO_ACTION, priority)


def direct_targets(pipe: Pipeline, msg: p4r.TableEntry, resource: str
                   ) -> Iterator[tuple[Table, engine.TableEntry, p4r.TableEntry]]:
    """The entries a direct counter/meter read names (one by key, or all of one or every table), each
    with the key a direct counter/meter entity carries back (its TableEntry without action or data)."""
    if msg.table_id and msg.match:
        targets: Iterable[tuple[Table, engine.TableEntry]] = [direct_entry(pipe, msg, resource)]
    else:
        targets = ((table, entry) for table in chosen(pipe.index.tables, msg.table_id, pipe.index.table)
                   if getattr(table, resource)
                   for entry in pipe.switch.table_entries(table.name) if not entry.is_default)
    for table, entry in targets:
        yield table, entry, codec.encode_entry(pipe.index, table, entry, counter=False, meter=False)
