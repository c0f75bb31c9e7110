"""Indexed meters (P4Runtime MeterEntry) and direct meters (DirectMeterEntry, one per table entry, found by
the entry's key): v1model's two-rate three-colour meters."""

from __future__ import annotations

from collections.abc import Iterator

from finsy.proto import p4r

from p4switch.runtime import codec
from p4switch.runtime.entity import (
    EntityHandler,
    Pipeline,
    cells,
    chosen,
    direct_entry,
    direct_targets,
    modify_only,
    no_color_counters,
)


class Meters(EntityHandler):
    kind = "meter_entry"

    def write(self, pipe: Pipeline, update_type: int, msg: p4r.MeterEntry) -> None:
        modify_only(update_type, "MeterEntry")
        no_color_counters(msg)
        array = pipe.index.meter(msg.meter_id)
        config = codec.decode_meter_config(msg.config) if msg.HasField("config") else None
        for i in cells(array, msg, pipe.switch.meter_size):
            pipe.switch.meter_set(array.name, i, config)

    def read(self, pipe: Pipeline, msg: p4r.MeterEntry) -> Iterator[p4r.Entity]:
        no_color_counters(msg)
        for array in chosen(pipe.index.meters, msg.meter_id, pipe.index.meter):
            for i in cells(array, msg, pipe.switch.meter_size):
                out = p4r.MeterEntry(meter_id=array.id, index=p4r.Index(index=i))
                config = pipe.switch.meter_get(array.name, i)
                if config is not None:
                    out.config.CopyFrom(codec.encode_meter_config(config))
                yield p4r.Entity(meter_entry=out)


class DirectMeters(EntityHandler):
    kind = "direct_meter_entry"

    def write(self, pipe: Pipeline, update_type: int, msg: p4r.DirectMeterEntry) -> None:
        modify_only(update_type, "DirectMeterEntry")
        no_color_counters(msg)
        table, entry = direct_entry(pipe, msg.table_entry, "direct_meter_id")
        config = codec.decode_meter_config(msg.config) if msg.HasField("config") else None
        pipe.switch.direct_meter_set(table.name, entry, config)

    def read(self, pipe: Pipeline, msg: p4r.DirectMeterEntry) -> Iterator[p4r.Entity]:
        for table, entry in direct_targets(pipe, msg.table_entry, "direct_meter_id"):
            out = p4r.DirectMeterEntry(
                table_entry=codec.encode_entry(pipe.index, table, entry, counter=False, meter=False))
            config = pipe.switch.direct_meter_get(table.name, entry)
            if config is not None:
                out.config.CopyFrom(codec.encode_meter_config(config))
            yield p4r.Entity(direct_meter_entry=out)
