"""Indexed counters (P4Runtime CounterEntry) and direct counters (DirectCounterEntry, one per table entry,
found by the entry's key)."""

from __future__ import annotations

from collections.abc import Iterator

from finsy.proto import p4r

from p4switch.runtime.entity import (
    EntityHandler,
    Pipeline,
    array_cells,
    cells,
    direct_entry,
    direct_targets,
    modify_only,
)


class Counters(EntityHandler):
    kind = "counter_entry"

    def write(self, pipe: Pipeline, update_type: int, msg: p4r.CounterEntry) -> None:
        modify_only(update_type, "CounterEntry")
        array = pipe.index.counter(msg.counter_id)
        if msg.HasField("data"):
            for i in cells(array, msg, pipe.switch.counter_size):
                pipe.switch.counter_write(array.name, i, msg.data.byte_count, msg.data.packet_count)

    def read(self, pipe: Pipeline, msg: p4r.CounterEntry) -> Iterator[p4r.Entity]:
        for array, i in array_cells(pipe.index.counters, msg.counter_id, pipe.index.counter, msg,
                                    pipe.switch.counter_size):
            byte_count, packet_count = pipe.switch.counter_read(array.name, i)
            yield p4r.Entity(counter_entry=p4r.CounterEntry(
                counter_id=array.id, index=p4r.Index(index=i),
                data=p4r.CounterData(byte_count=byte_count, packet_count=packet_count)))


class DirectCounters(EntityHandler):
    kind = "direct_counter_entry"

    def write(self, pipe: Pipeline, update_type: int, msg: p4r.DirectCounterEntry) -> None:
        modify_only(update_type, "DirectCounterEntry")
        table, entry = direct_entry(pipe, msg.table_entry, "direct_counter_id")
        if msg.HasField("data"):
            pipe.switch.direct_counter_write(table.name, entry, msg.data.byte_count, msg.data.packet_count)

    def read(self, pipe: Pipeline, msg: p4r.DirectCounterEntry) -> Iterator[p4r.Entity]:
        for table, entry, key in direct_targets(pipe, msg.table_entry, "direct_counter_id"):
            byte_count, packet_count = pipe.switch.direct_counter_read(table.name, entry)
            yield p4r.Entity(direct_counter_entry=p4r.DirectCounterEntry(
                table_entry=key, data=p4r.CounterData(byte_count=byte_count, packet_count=packet_count)))
