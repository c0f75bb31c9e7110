"""The opcode table against the IBA lists and against scapy.contrib.roce's names."""

import pytest
from ibsec import opcodes
from ibsec.opcodes import BTH_LEN, Ext, Service
from scapy.contrib.roce import _bth_opcodes


def test_every_scapy_opcode_is_in_the_table_with_the_same_name() -> None:
    for code, name in _bth_opcodes.items():
        assert opcodes.lookup(code).name == name


@pytest.mark.parametrize(
    ("name", "headers", "length"),
    [
        ("RC_SEND_ONLY", (), 12),
        ("RC_SEND_ONLY_WITH_IMMEDIATE", (Ext.ImmDt,), 16),
        ("RC_RDMA_WRITE_FIRST", (Ext.RETH,), 28),
        ("RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", (Ext.RETH, Ext.ImmDt), 32),
        ("RC_RDMA_READ_REQUEST", (Ext.RETH,), 28),
        ("RC_RDMA_READ_RESPONSE_MIDDLE", (), 12),
        ("RC_ACKNOWLEDGE", (Ext.AETH,), 16),
        ("RC_ATOMIC_ACKNOWLEDGE", (Ext.AETH, Ext.AtomicAckETH), 24),
        ("RC_COMPARE_SWAP", (Ext.AtomicETH,), 40),
        ("RC_SEND_ONLY_WITH_INVALIDATE", (Ext.IETH,), 16),
        ("UC_RDMA_WRITE_LAST_WITH_IMMEDIATE", (Ext.ImmDt,), 16),
        ("RD_SEND_ONLY", (Ext.RDETH, Ext.DETH), 24),
        ("RD_ACKNOWLEDGE", (Ext.RDETH, Ext.AETH), 20),
        ("RD_FETCH_ADD", (Ext.RDETH, Ext.DETH, Ext.AtomicETH), 52),
        ("UD_SEND_ONLY", (Ext.DETH,), 20),
        ("UD_SEND_ONLY_WITH_IMMEDIATE", (Ext.DETH, Ext.ImmDt), 24),
    ],
)
def test_headers_in_wire_order_and_lengths(name: str, headers: tuple[Ext, ...], length: int) -> None:
    op = opcodes.BY_NAME[name]
    assert op.headers == headers
    assert op.header_length == length == opcodes.header_length(op.code)


def test_codes_and_services() -> None:
    assert opcodes.BY_NAME["UD_SEND_ONLY"].code == 0x64
    assert opcodes.BY_NAME["UC_SEND_FIRST"].service is Service.UC
    assert opcodes.BY_NAME["RC_SEND_LAST_WITH_INVALIDATE"].code == 0x16
    assert not opcodes.BY_NAME["RC_ACKNOWLEDGE"].has_payload
    assert opcodes.BY_NAME["RC_RDMA_READ_RESPONSE_FIRST"].has_payload
    assert opcodes.BY_NAME["RC_SEND_ONLY"].operation == "SEND_ONLY"
    assert opcodes.BY_NAME["CNP"].operation == "CNP"
    # UC has no READ, ACK or atomics; UD only SEND ONLY (+imm)
    assert {op.code for op in opcodes.OPCODES.values() if op.service is Service.UC} == set(range(0x20, 0x2C))
    assert {op.code for op in opcodes.OPCODES.values() if op.service is Service.UD} == {0x64, 0x65}
    assert BTH_LEN == 12


@pytest.mark.parametrize("code", [0x15, 0x2C, 0x60, 0x66, 0xA0, 0xFF])
def test_reserved_codes_are_refused(code: int) -> None:
    with pytest.raises(opcodes.UnknownOpcode, match=f"{code:#04x}"):
        opcodes.lookup(code)
