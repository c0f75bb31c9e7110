"""Registers (P4Runtime RegisterEntry): one cell or all cells of a register array, as bit strings."""

from __future__ import annotations

from collections.abc import Iterator

from finsy.proto import p4d, p4r

from p4switch.runtime import codec
from p4switch.runtime.entity import EntityHandler, Pipeline, array_cells, cells, modify_only
from p4switch.runtime.errors import invalid


class Registers(EntityHandler):
    kind = "register_entry"

    def write(self, pipe: Pipeline, update_type: int, msg: p4r.RegisterEntry) -> None:
        modify_only(update_type, "RegisterEntry")
        array = pipe.index.register(msg.register_id)
        if msg.data.WhichOneof("data") != "bitstring":
            raise invalid(f"register {array.name} holds bit<{array.bitwidth}>: data must be a bitstring")
        value = codec.decode_uint(msg.data.bitstring, array.bitwidth, f"register {array.name} value")
        for i in cells(array, msg, pipe.switch.register_size):
            pipe.switch.register_write(array.name, i, value)

    def read(self, pipe: Pipeline, msg: p4r.RegisterEntry) -> Iterator[p4r.Entity]:
        for array, i in array_cells(pipe.index.registers, msg.register_id, pipe.index.register, msg,
                                    pipe.switch.register_size):
            value = pipe.switch.register_read(array.name, i)
            yield p4r.Entity(register_entry=p4r.RegisterEntry(
                register_id=array.id, index=p4r.Index(index=i),
                data=p4d.P4Data(bitstring=codec.encode_uint(value))))
