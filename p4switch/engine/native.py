"""The native engine: the program compiled to C (cgen.py), built with the system C compiler and loaded with
cffi (p4switch.native.build), behind the same engine API as the Python engine.

The control plane is control.ControlPlane's, validation included (tables.py); the classes below make
every change also reach the C side, where the lookup structures, direct and indirect counters, meters,
registers, parser value sets, multicast groups and clone sessions live. Packets run entirely in C, from
Python through ``process()`` or, in a p4switch process, in the native I/O thread (p4switch.native.io)
through ``native_pipeline``. What a packet makes for Python (digests, log_msg lines, failed assertions) comes
through an event queue: ``process()`` delivers what its packet made before it returns, the data plane's
event thread the rest.

``load()`` returns a NativeSwitch, or the Python engine when the C back end cannot run the program (a
construct it does not implement, no C compiler): the reason is logged once per process and kept in
``Switch.engine_note``."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from p4switch import ir
from p4switch.engine.api import ActionCall, GroupRef, MemberRef, MeterConfig, ProgramError, Switch, TableFull
from p4switch.engine.cgen import CCodegen, NativeUnsupported, Sites
from p4switch.engine.control import ControlPlane, profile_args
from p4switch.engine.externs import Counter, Meter, MeterArray, Register, ValueSet
from p4switch.engine.tables import ActionInfo, ActionProfile, KeyField, Slot, Table
from p4switch.native import build

DECLARATIONS = """
typedef struct np_switch np_switch;
typedef struct np_event { uint32_t kind; uint32_t port; uint32_t len; uint32_t aux; } np_event;
typedef struct np_meter_config { int set; uint64_t cir, cburst, pir, pburst; } np_meter_config;
np_switch *np_switch_new(double now, int manual_clock, const uint32_t *mt);
void np_switch_free(np_switch *sw);
const void *np_switch_pipeline(np_switch *sw);
void np_set_clock(np_switch *sw, double now);
int np_switch_event_fd(np_switch *sw);
int np_switch_next_event(np_switch *sw, np_event *ev, uint8_t *buf, uint32_t cap);
int np_stat_count(void);
void np_stats(np_switch *sw, uint64_t *out);
uint32_t np_process_frame(np_switch *sw, uint32_t port, const uint8_t *frame, uint32_t len);
const uint8_t *np_collected(np_switch *sw);
const uint32_t *np_collected_meta(np_switch *sw);
int np_table_insert(np_switch *sw, int table, const uint64_t *key, const uint64_t *mask, int prefix_len,
                    int32_t priority, uint64_t seq, int kind, int action, uint64_t ref_id,
                    const uint64_t *args, int nargs, uint64_t bytes, uint64_t packets,
                    const np_meter_config *meter);
int np_table_modify(np_switch *sw, int table, const uint64_t *key, const uint64_t *mask, int prefix_len,
                    int32_t priority, int kind, int action, uint64_t ref_id, const uint64_t *args, int nargs,
                    const uint64_t *counter, const np_meter_config *meter);
int np_table_delete(np_switch *sw, int table, const uint64_t *key, const uint64_t *mask, int prefix_len,
                    int32_t priority);
int np_table_counter(np_switch *sw, int table, const uint64_t *key, const uint64_t *mask, int prefix_len,
                     int32_t priority, uint64_t *counter, int set);
int np_table_meter_set(np_switch *sw, int table, const uint64_t *key, const uint64_t *mask, int prefix_len,
                       int32_t priority, const np_meter_config *config);
int np_table_set_default(np_switch *sw, int table, int action, const uint64_t *args, int nargs);
int np_member_set(np_switch *sw, int profile, uint64_t member_id, int action, const uint64_t *args,
                  int nargs);
int np_member_delete(np_switch *sw, int profile, uint64_t member_id);
int np_group_set(np_switch *sw, int profile, uint64_t group_id, const uint64_t *member_ids, uint32_t n);
int np_group_delete(np_switch *sw, int profile, uint64_t group_id);
int np_counter_access(np_switch *sw, int counter, uint64_t index, uint64_t *cell, int set);
int np_meter_set(np_switch *sw, int meter, uint64_t index, const np_meter_config *config);
int np_register_access(np_switch *sw, int reg, uint64_t index, uint64_t *words, int set);
int np_mcast_set(np_switch *sw, uint64_t group, const uint32_t *ports, const uint32_t *rids, uint32_t n);
int np_mcast_delete(np_switch *sw, uint64_t group);
int np_clone_set(np_switch *sw, uint64_t session, const uint32_t *ports, const uint32_t *rids, uint32_t n,
                 uint32_t truncate);
int np_clone_delete(np_switch *sw, uint64_t session);
int np_value_set_set(np_switch *sw, int vs, const uint64_t *words, uint32_t count);
uint32_t np_value_set_get(np_switch *sw, int vs, uint64_t *words, uint32_t cap);
"""

STATS = ("rx", "tx", "dropped", "digest", "clone", "mcast_copies", "clone_no_session", "assert_failed",
         "parser_reject", "internal_error", "resubmit", "recirculate", "resubmit_limit", "recirculate_limit")
"""np_switch.h's statistics, in order; the parser errors follow, one per error code."""
EV_DIGEST, EV_LOG_MSG, EV_ASSERT = 16, 17, 18
REF_KINDS = {ActionCall: 0, MemberRef: 1, GroupRef: 2}
MAX_EVENT = 65536
FLAGS = (*build.OPTIMIZE, "-fvisibility=hidden")

_ffi_lock = threading.Lock()
_ffi: Any = None
_libraries: dict[str, Any] = {}
_notes_logged: set[str] = set()


def ffi() -> Any:
    """The cffi declarations of every program library (the API is the same for all)."""
    global _ffi
    with _ffi_lock:
        if _ffi is None:
            import cffi

            _ffi = cffi.FFI()
            _ffi.cdef(DECLARATIONS)
        return _ffi


def compile_program(program: ir.Program) -> tuple[Any, CCodegen, str]:
    """The program's C library (built or taken from the cache), its code generator (what the generated
    code's ids mean) and the C source. Raises NativeUnsupported, build.NativeUnavailable, ProgramError."""
    gen = CCodegen(program)
    source = gen.generate()
    path = str(build.build("np_prog", {"program.c": source}, flags=FLAGS))
    with _ffi_lock:
        lib = _libraries.get(path)
    if lib is None:
        lib = ffi().dlopen(path)
        with _ffi_lock:
            lib = _libraries.setdefault(path, lib)
    return lib, gen, source


def words_of(value: int, width: int) -> list[int]:
    """A value as np_runtime.h's 64-bit words (low word first)."""
    value &= (1 << width) - 1
    return [value & (1 << 64) - 1] + ([value >> 64] if width > 64 else [])


def from_words(lo: int, hi: int, t: ir.Type) -> int:
    """The Python value of a (low, high) word pair C sent for a value of type t."""
    value = lo | hi << 64
    if isinstance(t, ir.TInt):
        value &= (1 << t.w) - 1
        if value >> (t.w - 1):
            value -= 1 << t.w
        return value
    if isinstance(t, ir.TBool):
        return int(value != 0)
    return value & (1 << 128) - 1


class Native:
    """The C side of one switch: the library, the np_switch object, and the encodings both need."""

    def __init__(self, lib: Any, gen: CCodegen, start: float, manual_clock: bool, rng: random.Random) -> None:
        self.lib = lib
        self.ffi = ffi()
        self.gen = gen
        state = rng.getstate()[1]  # Mersenne Twister: 624 words and the index
        mt = self.ffi.new("uint32_t[]", list(state))
        sw = lib.np_switch_new(start, int(manual_clock), mt)
        if sw == self.ffi.NULL:
            raise MemoryError("cannot create the native switch")
        self.sw = self.ffi.gc(sw, lib.np_switch_free)

    def u64s(self, values: Sequence[int]) -> Any:
        return self.ffi.new("uint64_t[]", list(values) or [0])

    def meter(self, config: MeterConfig | None) -> Any:
        if config is None:
            return self.ffi.new("np_meter_config *", {"set": 0})
        return self.ffi.new("np_meter_config *", {"set": 1, "cir": config.cir, "cburst": config.cburst,
                                                  "pir": config.pir, "pburst": config.pburst})

    def action(self, action: ActionCall | MemberRef | GroupRef, args: Sequence[int], info: ActionInfo | None
               ) -> tuple[int, int, int, Any, int]:
        """(ref kind, action id, member/group id, args words, word count) of an entry's action."""
        if isinstance(action, MemberRef):
            return 1, -1, action.member_id, self.u64s([]), 0
        if isinstance(action, GroupRef):
            return 2, -1, action.group_id, self.u64s([]), 0
        assert info is not None
        data = [w for v, (_, width) in zip(args, info.params, strict=True) for w in words_of(v, width)]
        return 0, self.gen.action_ids[action.name], 0, self.u64s(data), len(data)


class NativeTable(Table):
    """A table whose lookup structures, direct counters and direct meters are in C."""

    def __init__(self, native: Native, index: int, *args: Any, **kwargs: Any) -> None:
        self.native = native
        self.index = index
        super().__init__(*args, **kwargs)
        self._push_default()

    def _push_default(self) -> None:
        action = self.default.action
        assert isinstance(action, ActionCall)
        info = self.actions[action.name]
        _, action_id, _, data, count = self.native.action(action, self.default.args, info)
        self.native.lib.np_table_set_default(self.native.sw, self.index, action_id, data, count)

    def _key(self, slot: Slot) -> tuple[Any, Any, int, int]:
        """(key words, mask words, prefix length, priority) of an entry, as np_pipeline.h identifies it."""
        key: list[int] = []
        masks: list[int] = []
        prefix_len = 0
        for field, canon in zip(self.keys, slot.key, strict=True):
            value, mask, plen = _field_words(field, canon)
            key += words_of(value, field.width)
            masks += words_of(mask, field.width)
            if field.kind == "lpm":
                prefix_len = plen
        return self.native.u64s(key), self.native.u64s(masks), prefix_len, slot.priority

    def _action_of(self, slot: Slot) -> tuple[int, int, int, Any, int]:
        action = slot.action
        info = self.actions.get(action.name) if isinstance(action, ActionCall) else None
        return self.native.action(action, slot.args, info)

    def _index_add(self, slot: Slot) -> None:
        meter = self.native.meter(slot.meter.config if slot.meter is not None else None)
        rc = self.native.lib.np_table_insert(self.native.sw, self.index, *self._key(slot), slot.seq,
                                             *self._action_of(slot), slot.counter[0], slot.counter[1], meter)
        if rc < 0:
            del self.slots[(slot.key, slot.priority)]
            raise TableFull(f"table {self.name}: out of memory")

    def _index_remove(self, slot: Slot) -> None:
        self.native.lib.np_table_delete(self.native.sw, self.index, *self._key(slot))

    def modify(self, entry: Any) -> None:
        super().modify(entry)
        slot = self.find(entry)
        counter = self.native.ffi.NULL
        if entry.counter_data is not None:
            counter = self.native.u64s(entry.counter_data)
        meter = self.native.ffi.NULL
        if entry.meter_config is not None and slot.meter is not None:
            meter = self.native.meter(slot.meter.config)
        self.native.lib.np_table_modify(self.native.sw, self.index, *self._key(slot), *self._action_of(slot),
                                        counter, meter)

    def set_default(self, action: ActionCall) -> None:
        super().set_default(action)
        self._push_default()

    def read_counter(self, slot: Slot) -> tuple[int, int]:
        cell = self.native.u64s([0, 0])
        self.native.lib.np_table_counter(self.native.sw, self.index, *self._key(slot), cell, 0)
        return int(cell[0]), int(cell[1])

    def write_counter(self, slot: Slot, byte_count: int, packet_count: int) -> None:
        cell = self.native.u64s([byte_count, packet_count])
        self.native.lib.np_table_counter(self.native.sw, self.index, *self._key(slot), cell, 1)

    def configure_meter(self, slot: Slot, config: MeterConfig | None) -> None:
        super().configure_meter(slot, config)  # validates, keeps the configuration for reads
        meter = self.native.meter(config)
        self.native.lib.np_table_meter_set(self.native.sw, self.index, *self._key(slot), meter)


def _field_words(field: KeyField, canon: Any) -> tuple[int, int, int]:
    """(value, mask, prefix length) of one canonical key field (tables._canonical): the mask is the range's
    high end for range fields, as np_scan_match reads it."""
    full = (1 << field.width) - 1
    if field.kind == "range":
        return (0, full, 0) if canon is None else (canon[0], canon[1], 0)
    if canon is None:
        return 0, 0, 0
    if field.kind in ("exact", "optional"):
        return canon, full, 0
    if field.kind == "ternary":
        return canon[0], canon[1], 0
    value, plen = canon  # lpm
    return value, ((1 << plen) - 1) << (field.width - plen), plen


class NativeProfile(ActionProfile):
    """An action profile or selector whose members and groups are also in C."""

    def __init__(self, native: Native, index: int, *args: Any) -> None:
        super().__init__(*args)
        self.native = native
        self.index = index

    def _push_member(self, member_id: int) -> None:
        slot = self.member_slots[member_id]
        assert isinstance(slot.action, ActionCall)
        info = self.actions[slot.action.name]
        _, action_id, _, data, count = self.native.action(slot.action, slot.args, info)
        self.native.lib.np_member_set(self.native.sw, self.index, member_id, action_id, data, count)

    def member_insert(self, member_id: int, action: ActionCall) -> None:
        super().member_insert(member_id, action)
        self._push_member(member_id)

    def member_modify(self, member_id: int, action: ActionCall) -> None:
        super().member_modify(member_id, action)
        self._push_member(member_id)

    def member_delete(self, member_id: int) -> None:
        super().member_delete(member_id)
        self.native.lib.np_member_delete(self.native.sw, self.index, member_id)

    def group_set(self, group_id: int, members: Sequence[tuple[int, int]], max_size: int,
                  insert: bool) -> None:
        super().group_set(group_id, members, max_size, insert)
        expanded = [member_id for member_id, weight in members for _ in range(weight)]
        self.native.lib.np_group_set(self.native.sw, self.index, group_id, self.native.u64s(expanded),
                                     len(expanded))

    def group_delete(self, group_id: int) -> None:
        super().group_delete(group_id)
        self.native.lib.np_group_delete(self.native.sw, self.index, group_id)


class NativeCounter(Counter):
    """An indirect counter whose cells are in C."""

    def __init__(self, native: Native, index: int, name: str, size: int) -> None:
        super().__init__(name, 0)
        self.native, self.index, self.length = native, index, size

    def _access(self, index: int, values: Sequence[int], set_: int) -> Any:
        from p4switch.engine.api import InvalidEntry

        cell = self.native.u64s(values)
        if not 0 <= index < self.length or self.native.lib.np_counter_access(
                self.native.sw, self.index, index, cell, set_) < 0:
            raise InvalidEntry(f"counter {self.name}: index {index} out of range 0..{self.length - 1}")
        return cell

    def read_cell(self, index: int) -> tuple[int, int]:
        cell = self._access(index, [0, 0], 0)
        return int(cell[0]), int(cell[1])

    def write_cell(self, index: int, byte_count: int, packet_count: int) -> None:
        self._access(index, [byte_count, packet_count], 1)

    def size(self) -> int:
        return self.length


class NativeMeterArray(MeterArray):
    """An indirect meter: configurations validated and kept here for reads, token buckets in C."""

    def __init__(self, native: Native, index: int, *args: Any) -> None:
        super().__init__(*args)
        self.native, self.index = native, index

    def set_config(self, index: int, config: MeterConfig | None) -> None:
        super().set_config(index, config)
        self.native.lib.np_meter_set(self.native.sw, self.index, index, self.native.meter(config))


class NativeRegister(Register):
    """A register whose cells are in C."""

    def __init__(self, native: Native, index: int, name: str, size: int, width: int, signed: bool) -> None:
        super().__init__(name, 0, width, signed)
        self.native, self.index, self.length = native, index, size

    def check_index(self, index: int) -> None:
        from p4switch.engine.api import InvalidEntry

        if not 0 <= index < self.length:
            raise InvalidEntry(f"register {self.name}: index {index} out of range 0..{self.length - 1}")

    def read(self, index: int) -> int:
        cell = self.native.u64s([0, 0])
        if not 0 <= index < self.length or self.native.lib.np_register_access(
                self.native.sw, self.index, index, cell, 0) < 0:
            return 0
        return self.wrap(int(cell[0]) | int(cell[1]) << 64)

    def write(self, index: int, value: int) -> None:
        """Out-of-range writes are ignored; C reduces the value to the register's width."""
        if 0 <= index < self.length:
            cell = self.native.u64s(words_of(value, 128))
            self.native.lib.np_register_access(self.native.sw, self.index, index, cell, 1)

    def size(self) -> int:
        return self.length


class NativeValueSet(ValueSet):
    """A parser value set whose members are in C: ValueSet.set validates them and stores them through
    ``members``, which writes them into C (each value as two words, np_value_set) and reads them back."""

    __slots__ = ("native", "index")

    def __init__(self, native: Native, index: int, name: str, size: int, widths: tuple[int, ...]) -> None:
        self.native, self.index = native, index
        super().__init__(name, size, widths)

    @property
    def members(self) -> frozenset[tuple[int, ...]]:
        lib, sw, fields = self.native.lib, self.native.sw, len(self.widths)
        count = int(lib.np_value_set_get(sw, self.index, self.native.ffi.NULL, 0))
        words = self.native.u64s([0] * (2 * fields * count))
        lib.np_value_set_get(sw, self.index, words, count)
        values = [int(words[i]) | int(words[i + 1]) << 64 for i in range(0, 2 * fields * count, 2)]
        return frozenset(tuple(values[m:m + fields]) for m in range(0, len(values), fields))

    @members.setter
    def members(self, members: frozenset[tuple[int, ...]]) -> None:
        data = self.native.u64s([w for m in members for v in m for w in words_of(v, 128)])
        if self.native.lib.np_value_set_set(self.native.sw, self.index, data, len(members)) < 0:
            raise MemoryError(f"value set {self.name}: out of memory")


class NativeSwitch(ControlPlane):
    """The engine API on the native back end (see the module docstring)."""

    engine = "native"

    def __init__(self, program: ir.Program, lib: Any, gen: CCodegen, source: str, log: logging.Logger | None,
                 clock: Callable[[], float], rng: random.Random) -> None:
        super().__init__(program, log, clock)
        self.source = source
        """the generated C (handy when a program misbehaves)"""
        self.manual_clock = clock is not time.monotonic
        self.native = Native(lib, gen, self.start_time, self.manual_clock, rng)
        self.lib = lib
        self.ffi = self.native.ffi
        self.sites: Sites = gen.sites
        self.digests = list(program.digests)
        errors = list(program.errors)
        self.stat_names = list(STATS) + [f"parser_error:{errors[i] if i < len(errors) else i}"
                                         for i in range(len(gen.errors))]
        self._stats_buf = self.ffi.new("uint64_t[]", len(self.stat_names))
        self._event = self.ffi.new("np_event *")
        self._event_buf = self.ffi.new("uint8_t[]", MAX_EVENT)
        self.make_externs(gen.width)
        self.make_tables(gen.width, lambda t, a: None)

    # ----------------------------------------------------------------- where the state lives
    def new_counter(self, inst: ir.Counter) -> Counter:
        return NativeCounter(self.native, self.native.gen.counters[inst.name], inst.name, inst.size)

    def new_meter_array(self, inst: ir.Meter) -> MeterArray:
        index = self.native.gen.meters[inst.name]
        return NativeMeterArray(self.native, index, inst.name, inst.size, inst.unit == "bytes", self.clock)

    def new_register(self, inst: ir.Register, width: int) -> Register:
        index = self.native.gen.registers[inst.name]
        return NativeRegister(self.native, index, inst.name, inst.size, width, isinstance(inst.type, ir.TInt))

    def new_value_set(self, inst: ir.ValueSet) -> ValueSet:
        index = self.native.gen.value_sets[inst.name]
        return NativeValueSet(self.native, index, inst.name, inst.size, inst.widths)

    def new_profile(self, inst: ir.ActionProfile | ir.ActionSelector, actions: dict[str, ActionInfo]
                    ) -> ActionProfile:
        return NativeProfile(self.native, self.native.gen.profiles[inst.name], *profile_args(inst, actions))

    def new_table(self, t: ir.Table, keys: list[KeyField], actions: dict[str, ActionInfo],
                  default: ActionCall, meter_factory: Callable[[], Meter] | None) -> Table:
        return NativeTable(self.native, self.native.gen.table_ids[t.name], t.name, keys, actions,
                           {a.name: a.scope for a in t.actions}, default, t.default_action.const, t.size,
                           self.profiles.get(t.implementation or ""), meter_factory)

    # ---------------------------------------------------------------------------- data plane
    @property  # type: ignore[override]
    def stats(self) -> dict[str, int]:
        """The pipeline's counters (api.Switch.stats), read from C: those that are not zero."""
        self.lib.np_stats(self.native.sw, self._stats_buf)
        return {name: int(self._stats_buf[i]) for i, name in enumerate(self.stat_names) if self._stats_buf[i]}

    @stats.setter
    def stats(self, value: dict[str, int]) -> None:
        if value:
            raise AttributeError("the native engine's statistics are kept in C")

    @property
    def native_pipeline(self) -> Any:
        """The np_pipeline the native I/O thread runs frames through."""
        return self.lib.np_switch_pipeline(self.native.sw)

    def event_fd(self) -> int:
        """Readable when packets of the I/O thread made events (deliver them with ``deliver_events``)."""
        return int(self.lib.np_switch_event_fd(self.native.sw))

    def process(self, ingress_port: int, frame: bytes) -> list[tuple[int, bytes]]:
        with self.lock:
            if self.manual_clock:
                self.lib.np_set_clock(self.native.sw, self.clock())
            data = bytes(frame)
            count = self.lib.np_process_frame(self.native.sw, ingress_port, data, len(data))
            out = []
            if count:
                meta = self.lib.np_collected_meta(self.native.sw)
                base = self.lib.np_collected(self.native.sw)
                for i in range(count):
                    port, offset, length = meta[3 * i], meta[3 * i + 1], meta[3 * i + 2]
                    out.append((int(port), bytes(self.ffi.buffer(base + offset, length))))
            self._deliver_events()
            return out

    def deliver_events(self) -> None:
        """Digests, log_msg lines and failed assertions of packets the I/O thread ran."""
        with self.lock:
            self._deliver_events()

    def _deliver_events(self) -> None:
        ev, buf = self._event, self._event_buf
        while self.lib.np_switch_next_event(self.native.sw, ev, buf, MAX_EVENT):
            data = bytes(self.ffi.buffer(buf, min(ev.len, MAX_EVENT)))
            pairs = [(int.from_bytes(data[i:i + 8], "little"), int.from_bytes(data[i + 8:i + 16], "little"))
                     for i in range(0, len(data) - 15, 16)]
            try:
                self._event_of(int(ev.kind), int(ev.aux), pairs)
            except Exception:  # noqa: BLE001 - a sink's failure must not stop the others
                self.log.exception("delivering an event of the native engine failed")

    def _event_of(self, kind: int, aux: int, pairs: list[tuple[int, int]]) -> None:
        if kind == EV_DIGEST:
            digest = self.digests[aux]
            values = [from_words(lo, hi, f.type) for (lo, hi), f in zip(pairs, digest.fields, strict=False)]
            self.deliver_digest(digest.name, values)
        elif kind == EV_LOG_MSG:
            site = self.sites.logs[aux]
            text = site.format
            for (lo, hi), t in zip(pairs, site.types, strict=False):
                text = text.replace("{}", str(from_words(lo, hi, t)), 1)
            self.log.info("log_msg: %s", text)
        elif kind == EV_ASSERT:
            self.log.error("assertion failed at %s", self.sites.asserts[aux])

    # ---------------------------------------------------------------- replication engine
    def mcast_group_set(self, group_id: int, replicas: list[tuple[int, int]]) -> None:
        super().mcast_group_set(group_id, replicas)
        with self.lock:
            self._replicas(self.lib.np_mcast_set, group_id, self.mcast[group_id])

    def mcast_group_delete(self, group_id: int) -> None:
        super().mcast_group_delete(group_id)
        self.lib.np_mcast_delete(self.native.sw, group_id)

    def clone_session_set(self, session_id: int, replicas: list[tuple[int, int]], class_of_service: int = 0,
                          packet_length_bytes: int = 0) -> None:
        super().clone_session_set(session_id, replicas, class_of_service, packet_length_bytes)
        with self.lock:
            session = self.sessions[session_id]
            self._replicas(self.lib.np_clone_set, session_id, [(r.port, r.rid) for r in session.replicas],
                           packet_length_bytes)

    def clone_session_delete(self, session_id: int) -> None:
        super().clone_session_delete(session_id)
        self.lib.np_clone_delete(self.native.sw, session_id)

    def _replicas(self, setter: Any, key: int, replicas: list[tuple[int, int]], *extra: int) -> None:
        ports = self.ffi.new("uint32_t[]", [p for p, _ in replicas] or [0])
        rids = self.ffi.new("uint32_t[]", [r for _, r in replicas] or [0])
        setter(self.native.sw, key, ports, rids, len(replicas), *extra)


def load(program: ir.Program, log: logging.Logger | None = None, clock: Callable[[], float] = time.monotonic,
         rng: random.Random | None = None) -> NativeSwitch:
    """The program on the native back end. Raises NativeUnsupported or build.NativeUnavailable (the
    caller may run the Python engine instead), ProgramError."""
    lib, gen, source = compile_program(program)
    return NativeSwitch(program, lib, gen, source, log, clock, rng or random.Random())


def load_or_fallback(program: ir.Program, log: logging.Logger | None, clock: Callable[[], float],
                     rng: random.Random | None, python: Callable[[], Switch]) -> Switch:
    """The native switch, or ``python()`` when the C back end cannot run the program; the reason is
    logged once per process (as a warning) and kept in the switch's ``engine_note``."""
    logger = log or logging.getLogger("p4switch.engine")
    try:
        return load(program, log, clock, rng)
    except (NativeUnsupported, build.NativeUnavailable) as err:
        reason = str(err)
    except ProgramError:
        raise
    except Exception as err:  # noqa: BLE001 - a bug of the C back end must not stop the switch
        logger.exception("the native engine failed to load the program")
        reason = f"internal error of the native engine: {type(err).__name__}: {err}"
    switch = python()
    name = program.source or "this program"
    note = f"running the Python engine: the native engine cannot run {name}: {reason}"
    switch.engine_note = note
    if note not in _notes_logged:
        _notes_logged.add(note)
        logger.warning("%s", note)
    return switch
