"""Hash algorithms, counters, two-rate three-colour meters (with an injected clock) and registers."""

from __future__ import annotations

import pytest

from p4switch.engine.api import GREEN, RED, YELLOW, InvalidEntry, MeterConfig
from p4switch.engine.externs import (
    Counter,
    Meter,
    MeterArray,
    Register,
    crc16,
    crc32,
    csum16,
    hash_offset,
    identity,
    pack_fields,
)


def test_hash_algorithms_check_values() -> None:
    assert crc16(b"123456789") == 0xBB3D  # CRC-16/ARC, BMv2's crc16
    assert crc32(b"123456789") == 0xCBF43926
    assert identity(b"\x01\x02") == 0x0102
    ipv4 = bytes.fromhex("450000730000400040110000c0a80001c0a800c7")
    assert csum16(ipv4) == 0xB861
    assert csum16(bytes.fromhex("45000073000040004011b861c0a80001c0a800c7")) == 0


def test_field_lists_pack_bit_by_bit_and_hash_offset() -> None:
    assert pack_fields([0xA, 0xBC], [4, 8]) == bytes([0xAB, 0xC0])
    assert hash_offset(1000, 5, 7) == 5 + 1000 % 7
    assert hash_offset(1000, 5, 0) == 1005


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_trtcm_marks_green_yellow_red_and_refills_with_time() -> None:
    clock = FakeClock()
    meter = Meter(clock)
    assert meter.execute(1) == GREEN  # unconfigured
    meter.configure(MeterConfig(cir=10, cburst=2, pir=20, pburst=4))
    colours = [meter.execute(1) for _ in range(6)]
    assert colours == [GREEN, GREEN, YELLOW, YELLOW, RED, RED]
    clock.now += 0.125  # +1.25 committed tokens, +2.5 peak tokens
    assert [meter.execute(1) for _ in range(4)] == [GREEN, YELLOW, RED, RED]
    clock.now += 100
    assert meter.execute(1) == GREEN


def test_byte_meter_counts_bytes() -> None:
    clock = FakeClock()
    meters = MeterArray("m", 2, by_bytes=True, clock=clock)
    meters.cell(1).configure(MeterConfig(cir=1000, cburst=1500, pir=2000, pburst=3000))
    assert meters.execute(1, 1500) == GREEN
    assert meters.execute(1, 1000) == YELLOW
    assert meters.execute(1, 1000) == RED
    assert meters.execute(0, 9999) == GREEN
    with pytest.raises(InvalidEntry):
        meters.cell(2)
    with pytest.raises(InvalidEntry, match="peak rate"):
        meters.cell(0).configure(MeterConfig(cir=10, cburst=1, pir=5, pburst=1))


def test_counters_and_registers() -> None:
    c = Counter("c", 4)
    c.count(2, 100)
    c.count(2, 50)
    c.count(9, 50)  # out of range: ignored
    assert c.cell(2) == [150, 2]
    r = Register("r", 2, 8, signed=True)
    r.write(0, 0x1FF)
    assert r.read(0) == -1
    r.write(5, 1)
    assert r.read(5) == 0
