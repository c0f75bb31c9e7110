"""v1model stateful externs and hash functions, as BMv2 simple_switch implements them.

Kept free of the IR: the compiled program calls these objects with plain ints.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable, Sequence

from p4switch.engine.api import GREEN, RED, YELLOW, InvalidEntry, MeterConfig

# ------------------------------------------------------------------------------------------- hashing


def _crc16_table() -> list[int]:
    """CRC-16/ARC (poly 0x8005, reflected, init 0, no final xor): BMv2's "crc16"."""
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC16 = _crc16_table()


@functools.lru_cache(maxsize=1 << 16)
def crc16(data: bytes) -> int:
    """Memoised: selector and hash inputs repeat per flow, and this byte loop is the slowest extern."""
    crc = 0
    table = _CRC16
    for byte in data:
        crc = (crc >> 8) ^ table[(crc ^ byte) & 0xFF]
    return crc


def crc32(data: bytes) -> int:
    """BMv2's "crc32" is the usual reflected CRC-32 (zlib)."""
    return zlib.crc32(data)


def csum16(data: bytes) -> int:
    """Internet checksum (RFC 1071): ones' complement of the ones' complement sum of 16-bit words;
    an odd trailing byte is padded with zero, as BMv2 does. Computed as the data's value modulo
    0xFFFF (2^16 = 1 mod 0xFFFF), which is the end-around-carry sum without a per-word loop."""
    if len(data) & 1:
        data += b"\0"
    value = int.from_bytes(data, "big")
    total = value % 0xFFFF
    if total == 0 and value:
        total = 0xFFFF  # a non-zero ones' complement sum is never +0
    return ~total & 0xFFFF


def identity(data: bytes) -> int:
    """BMv2's "identity": the first 8 bytes of the data as a big-endian number."""
    return int.from_bytes(data[:8], "big")


def xor16(data: bytes) -> int:
    """BMv2's "xor16": xor of the 16-bit words."""
    if len(data) & 1:
        data += b"\0"
    result = 0
    for i in range(0, len(data), 2):
        result ^= int.from_bytes(data[i : i + 2], "big")
    return result


HASH_ALGORITHMS: dict[str, Callable[[bytes], int]] = {
    "crc16": crc16,
    "crc32": crc32,
    "csum16": csum16,
    "identity": identity,
    "xor16": xor16,
}
"""Algorithms of v1model's HashAlgorithm the engine implements (crc16/32_custom and random are refused)."""


def pack_fields(values: Sequence[int], widths: Sequence[int]) -> bytes:
    """Concatenate fields bit by bit (as BMv2 builds a field-list buffer) and pad with zero bits at the
    end up to a whole byte."""
    acc = 0
    bits = 0
    for value, width in zip(values, widths, strict=True):
        acc = (acc << width) | (value & ((1 << width) - 1))
        bits += width
    pad = -bits % 8
    return (acc << pad).to_bytes((bits + pad) // 8, "big")


def hash_offset(h: int, base: int, max_: int) -> int:
    """v1model ``hash(out, algo, base, data, max)``: base + h % max (max 0 = base + h)."""
    return base + (h % max_ if max_ else h)


# ------------------------------------------------------------------------------------------ counters


class Counter:
    """An indirect counter array (packets, bytes or both are always kept; the unit only matters for
    what the P4Info advertises)."""

    __slots__ = ("name", "cells")

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.cells = [[0, 0] for _ in range(size)]  # [bytes, packets]

    def count(self, index: int, length: int) -> None:
        """Out-of-range indices are ignored, as BMv2 does (it logs an error)."""
        if 0 <= index < len(self.cells):
            cell = self.cells[index]
            cell[0] += length
            cell[1] += 1

    def cell(self, index: int) -> list[int]:
        if not 0 <= index < len(self.cells):
            raise InvalidEntry(f"counter {self.name}: index {index} out of range 0..{len(self.cells) - 1}")
        return self.cells[index]

    def read_cell(self, index: int) -> tuple[int, int]:
        """(bytes, packets) of one cell for the control plane. Raises InvalidEntry."""
        cell = self.cell(index)
        return cell[0], cell[1]

    def write_cell(self, index: int, byte_count: int, packet_count: int) -> None:
        self.cell(index)[:] = [byte_count, packet_count]

    def size(self) -> int:
        return len(self.cells)


# -------------------------------------------------------------------------------------------- meters


class Meter:
    """One two-rate three-colour marker cell (RFC 2698, colour-blind), as BMv2's Meter: the peak bucket
    is checked first (empty -> RED, nothing taken), then the committed bucket (empty -> YELLOW, peak
    tokens taken), else GREEN (both taken). Buckets start full. An unconfigured meter marks GREEN."""

    __slots__ = ("config", "clock", "c_tokens", "p_tokens", "last")

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.config: MeterConfig | None = None
        self.c_tokens = 0.0
        self.p_tokens = 0.0
        self.last = 0.0

    def configure(self, config: MeterConfig | None) -> None:
        if config is not None and (min(config.cir, config.cburst, config.pir, config.pburst) < 0):
            raise InvalidEntry("meter config: rates and bursts must be non-negative")
        if config is not None and config.pir < config.cir:
            raise InvalidEntry("meter config: the peak rate must not be below the committed rate (RFC 2698)")
        self.config = config
        if config is not None:
            self.c_tokens = float(config.cburst)
            self.p_tokens = float(config.pburst)
            self.last = self.clock()

    def execute(self, amount: int) -> int:
        config = self.config
        if config is None:
            return GREEN
        now = self.clock()
        elapsed = max(0.0, now - self.last)
        self.last = now
        self.p_tokens = min(float(config.pburst), self.p_tokens + elapsed * config.pir)
        self.c_tokens = min(float(config.cburst), self.c_tokens + elapsed * config.cir)
        if self.p_tokens < amount:
            return RED
        self.p_tokens -= amount
        if self.c_tokens < amount:
            return YELLOW
        self.c_tokens -= amount
        return GREEN


class MeterArray:
    """An indirect meter: ``size`` cells in packets or bytes."""

    __slots__ = ("name", "cells", "by_bytes")

    def __init__(self, name: str, size: int, by_bytes: bool, clock: Callable[[], float]) -> None:
        self.name = name
        self.by_bytes = by_bytes
        self.cells = [Meter(clock) for _ in range(size)]

    def execute(self, index: int, length: int) -> int:
        if not 0 <= index < len(self.cells):
            return GREEN
        return self.cells[index].execute(length if self.by_bytes else 1)

    def cell(self, index: int) -> Meter:
        if not 0 <= index < len(self.cells):
            raise InvalidEntry(f"meter {self.name}: index {index} out of range 0..{len(self.cells) - 1}")
        return self.cells[index]

    def set_config(self, index: int, config: MeterConfig | None) -> None:
        """Configure one cell (None: every packet GREEN). Raises InvalidEntry."""
        self.cell(index).configure(config)

    def size(self) -> int:
        return len(self.cells)


# ----------------------------------------------------------------------------------------- registers


class ValueSet:
    """A parser value set: at most ``size`` members, each a tuple of one value per field (``widths``),
    matched exactly; the control plane replaces them all at once."""

    __slots__ = ("name", "size", "widths", "members")

    def __init__(self, name: str, size: int, widths: tuple[int, ...]) -> None:
        self.name = name
        self.size = size
        self.widths = widths
        self.members: frozenset[tuple[int, ...]] = frozenset()

    def set(self, members: list[tuple[int, ...]]) -> None:
        """Raises ValueError for too many members or a value that does not fit its field."""
        if len(set(members)) > self.size:
            raise ValueError(
                f"value set {self.name} holds at most {self.size} members, got {len(set(members))}"
            )
        for m in members:
            if len(m) != len(self.widths) or any(
                not 0 <= v < 1 << w for v, w in zip(m, self.widths, strict=True)
            ):
                raise ValueError(f"member {m} does not fit value set {self.name} (widths {self.widths})")
        self.members = frozenset(tuple(m) for m in members)


class Register:
    """A register array of ``width``-bit cells (signed when ``signed``); out-of-range reads give 0 and
    writes are ignored, as BMv2 does."""

    __slots__ = ("name", "cells", "width", "signed")

    def __init__(self, name: str, size: int, width: int, signed: bool = False) -> None:
        self.name = name
        self.width = width
        self.signed = signed
        self.cells = [0] * size

    def read(self, index: int) -> int:
        return self.cells[index] if 0 <= index < len(self.cells) else 0

    def write(self, index: int, value: int) -> None:
        if 0 <= index < len(self.cells):
            self.cells[index] = self.wrap(value)

    def wrap(self, value: int) -> int:
        value &= (1 << self.width) - 1
        if self.signed and value >> (self.width - 1):
            value -= 1 << self.width
        return value

    def check_index(self, index: int) -> None:
        if not 0 <= index < len(self.cells):
            raise InvalidEntry(f"register {self.name}: index {index} out of range 0..{len(self.cells) - 1}")

    def size(self) -> int:
        return len(self.cells)
