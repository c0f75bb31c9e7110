"""The one table of InfiniBand BTH opcodes (IBA vol. 1, 9.2 and 9.3).

Every part that has to know what follows the BTH reads it from here: the Scapy layers bind extension
headers by it, the ICRC and the secure transport use it to find where the transport headers H end and
the payload P begins, and the replay check uses the transport service.

An opcode is three bits of transport service (RC, UC, RD, UD, CNP) and five bits of operation. Names follow
``scapy.contrib.roce`` (``RC_SEND_FIRST`` ...) so both tables read the same.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

BTH_LEN = 12
"""Length of the Base Transport Header in bytes."""


class Service(enum.Enum):
    """Transport service: the top three bits of the opcode."""

    RC = 0x00
    UC = 0x20
    RD = 0x40
    UD = 0x60
    CNP = 0x80


class Ext(enum.Enum):
    """Extension transport headers; the value is the header length in bytes."""

    RDETH = ("RDETH", 4)  # reliable datagram: EE context
    DETH = ("DETH", 8)  # datagram: Q_Key, source QP
    RETH = ("RETH", 16)  # RDMA: virtual address, R_Key, DMA length
    AtomicETH = ("AtomicETH", 28)  # atomic: VA, R_Key, swap/add data, compare data
    AETH = ("AETH", 4)  # acknowledge: syndrome, MSN
    AtomicAckETH = ("AtomicAckETH", 8)  # original remote data of an atomic
    ImmDt = ("ImmDt", 4)  # immediate data
    IETH = ("IETH", 4)  # invalidate: R_Key to invalidate
    CNPPad = ("CNPPad", 16)  # RoCEv2 CNP: 16 reserved bytes after the BTH

    @property
    def length(self) -> int:
        """Header length in bytes."""
        return int(self.value[1])


@dataclass(frozen=True)
class Opcode:
    """One BTH opcode: what follows the BTH, in wire order, and whether a payload follows them."""

    code: int
    name: str
    service: Service
    headers: tuple[Ext, ...]
    has_payload: bool

    @property
    def header_length(self) -> int:
        """Bytes of H: the BTH and every extension header this opcode calls for."""
        return BTH_LEN + sum(ext.length for ext in self.headers)

    @property
    def operation(self) -> str:
        """The operation name without the service prefix, e.g. ``SEND_ONLY`` (``CNP`` has none)."""
        return self.name.partition("_")[2] or self.name


class UnknownOpcode(ValueError):
    """The opcode is reserved or belongs to a service this table does not cover (e.g. XRC)."""

    def __init__(self, code: int) -> None:
        super().__init__(f"BTH opcode {code:#04x} is reserved or not supported")
        self.code = code


# Operation (low five bits) -> (name, extension headers after the service's own ones, payload follows).
_E = Ext
_OPERATIONS: dict[int, tuple[str, tuple[Ext, ...], bool]] = {
    0x00: ("SEND_FIRST", (), True),
    0x01: ("SEND_MIDDLE", (), True),
    0x02: ("SEND_LAST", (), True),
    0x03: ("SEND_LAST_WITH_IMMEDIATE", (_E.ImmDt,), True),
    0x04: ("SEND_ONLY", (), True),
    0x05: ("SEND_ONLY_WITH_IMMEDIATE", (_E.ImmDt,), True),
    0x06: ("RDMA_WRITE_FIRST", (_E.RETH,), True),
    0x07: ("RDMA_WRITE_MIDDLE", (), True),
    0x08: ("RDMA_WRITE_LAST", (), True),
    0x09: ("RDMA_WRITE_LAST_WITH_IMMEDIATE", (_E.ImmDt,), True),
    0x0A: ("RDMA_WRITE_ONLY", (_E.RETH,), True),
    0x0B: ("RDMA_WRITE_ONLY_WITH_IMMEDIATE", (_E.RETH, _E.ImmDt), True),
    0x0C: ("RDMA_READ_REQUEST", (_E.RETH,), False),
    0x0D: ("RDMA_READ_RESPONSE_FIRST", (_E.AETH,), True),
    0x0E: ("RDMA_READ_RESPONSE_MIDDLE", (), True),
    0x0F: ("RDMA_READ_RESPONSE_LAST", (_E.AETH,), True),
    0x10: ("RDMA_READ_RESPONSE_ONLY", (_E.AETH,), True),
    0x11: ("ACKNOWLEDGE", (_E.AETH,), False),
    0x12: ("ATOMIC_ACKNOWLEDGE", (_E.AETH, _E.AtomicAckETH), False),
    0x13: ("COMPARE_SWAP", (_E.AtomicETH,), False),
    0x14: ("FETCH_ADD", (_E.AtomicETH,), False),
    0x16: ("SEND_LAST_WITH_INVALIDATE", (_E.IETH,), True),
    0x17: ("SEND_ONLY_WITH_INVALIDATE", (_E.IETH,), True),
}

_RESPONSES = frozenset({0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x12})


def _service_prefix(service: Service, operation: int) -> tuple[Ext, ...]:
    """Headers a service puts between the BTH and the operation's own headers (IBA 9.2: RDETH, DETH)."""
    if service is Service.RD:
        return (_E.RDETH,) if operation in _RESPONSES else (_E.RDETH, _E.DETH)
    if service is Service.UD:
        return (_E.DETH,)
    return ()


def _build_table() -> dict[int, Opcode]:
    """RC has every operation; UC only SEND and WRITE; RD the RC ones plus RESYNC; UD SEND ONLY (+imm)."""
    allowed: dict[Service, frozenset[int]] = {
        Service.RC: frozenset(_OPERATIONS),
        Service.UC: frozenset(range(0x00, 0x0C)),
        Service.RD: frozenset(op for op in _OPERATIONS if op < 0x15),
        Service.UD: frozenset({0x04, 0x05}),
    }
    table: dict[int, Opcode] = {}
    for service, operations in allowed.items():
        for op in sorted(operations):
            name, headers, payload = _OPERATIONS[op]
            code = service.value | op
            full = _service_prefix(service, op) + headers
            table[code] = Opcode(code, f"{service.name}_{name}", service, full, payload)
    table[0x55] = Opcode(0x55, "RD_RESYNC", Service.RD, (_E.RDETH, _E.DETH), False)
    table[0x81] = Opcode(0x81, "CNP", Service.CNP, (_E.CNPPad,), False)
    return table


OPCODES: dict[int, Opcode] = _build_table()
"""Every supported opcode by its 8-bit code."""

BY_NAME: dict[str, Opcode] = {op.name: op for op in OPCODES.values()}
"""The same table by name, e.g. ``BY_NAME["UD_SEND_ONLY"].code == 0x64``."""


def lookup(code: int) -> Opcode:
    """The table entry for an 8-bit opcode; raises :class:`UnknownOpcode` for reserved or XRC codes."""
    try:
        return OPCODES[code]
    except KeyError:
        raise UnknownOpcode(code) from None


def header_length(code: int) -> int:
    """Length of H (BTH plus extension headers) for ``code``: where the payload starts after UDP."""
    return lookup(code).header_length
