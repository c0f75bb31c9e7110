"""Indexed meters (P4Runtime MeterEntry) and direct meters (DirectMeterEntry, one per table entry, found by
the entry's key): v1model's two-rate three-colour meters."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

from finsy.proto import p4r

from p4switch.engine import api as engine
from p4switch.runtime import codec
from p4switch.runtime.entity import (
    EntityHandler,
    Pipeline,
    array_cells,
    cells,
    direct_entry,
    direct_targets,
    modify_only,
    no_color_counters,
)

MeterMessage = TypeVar("MeterMessage", p4r.MeterEntry, p4r.DirectMeterEntry)


def written_config(msg: p4r.MeterEntry | p4r.DirectMeterEntry) -> engine.MeterConfig | None:
    """The rates a meter write sets; none given resets it (every packet GREEN)."""
    return codec.decode_meter_config(msg.config) if msg.HasField("config") else None


def with_config(out: MeterMessage, config: engine.MeterConfig | None) -> MeterMessage:
    """``out`` carrying ``config`` (an unconfigured meter reads back without one)."""
    if config is not None:
        out.config.CopyFrom(codec.encode_meter_config(config))
    return out


class Meters(EntityHandler):
    kind = "meter_entry"

    def write(self, pipe: Pipeline, update_type: int, msg: p4r.MeterEntry) -> None:
        modify_only(update_type, "MeterEntry")
        no_color_counters(msg)
        array = pipe.index.meter(msg.meter_id)
        config = written_config(msg)
        for i in cells(array, msg, pipe.switch.meter_size):
            pipe.switch.meter_set(array.name, i, config)

    def read(self, pipe: Pipeline, msg: p4r.MeterEntry) -> Iterator[p4r.Entity]:
        no_color_counters(msg)
        for array, i in array_cells(pipe.index.meters, msg.meter_id, pipe.index.meter, msg,
                                    pipe.switch.meter_size):
            out = p4r.MeterEntry(meter_id=array.id, index=p4r.Index(index=i))
            yield p4r.Entity(meter_entry=with_config(out, pipe.switch.meter_get(array.name, i)))


class DirectMeters(EntityHandler):
    kind = "direct_meter_entry"

    def write(self, pipe: Pipeline, update_type: int, msg: p4r.DirectMeterEntry) -> None:
        modify_only(update_type, "DirectMeterEntry")
        no_color_counters(msg)
        table, entry = direct_entry(pipe, msg.table_entry, "direct_meter_id")
        pipe.switch.direct_meter_set(table.name, entry, written_config(msg))

    def read(self, pipe: Pipeline, msg: p4r.DirectMeterEntry) -> Iterator[p4r.Entity]:
        for table, entry, key in direct_targets(pipe, msg.table_entry, "direct_meter_id"):
            yield p4r.Entity(direct_meter_entry=with_config(
                p4r.DirectMeterEntry(table_entry=key), pipe.switch.direct_meter_get(table.name, entry)))
