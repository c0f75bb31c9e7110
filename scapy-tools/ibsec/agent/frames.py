"""The agent's side of the secure transport: a connection's security state, and sealing in its mode.

Frames themselves are the wire library's: :mod:`ibsec.rocev2` reads received ones (a :class:`View` per
frame, handed on to the transport as it is), :mod:`ibsec.builder` builds them from templates.
"""

from __future__ import annotations

from ibsec import opcodes, transport

from .qp import Security

MODES = frozenset(int(m) for m in transport.Mode)
ACK_SYNDROME = 0x00  # AETH syndrome of a positive ACK
SERVICES = {"RC": opcodes.Service.RC, "UD": opcodes.Service.UD}


def seal(frame: bytes, security: Security, key: bytes | None) -> bytes:
    """Seal a :meth:`ibsec.builder.Builder.plain` frame in the connection's mode under ``key`` (None in
    mode 0)."""
    assert security.sender is not None
    return transport.seal(frame, key, security.sender)


def new_security(
    mode: int,
    key: bytes | None,
    cache_id: tuple[int, int] | None,
    service: str,
    tx_n0: bytes,
    rx_n0: bytes,
    initiator: bool,
    local_psn: int,
    remote_psn: int,
) -> Security:
    """The transport state of a new connection: our direction bit is 0 if we initiated it.

    Requests from the peer start at its PSN; the responses (ACKs) we receive carry our own PSNs.
    """
    tx_direction = 0 if initiator else 1
    tmode = transport.Mode(mode)
    svc = SERVICES[service]
    return Security(
        mode,
        key if mode else None,
        cache_id if mode else None,
        sender=transport.Sender(tmode, tx_n0, tx_direction),
        requests=transport.Receiver(tmode, svc, rx_n0, 1 - tx_direction, remote_psn),
        responses=transport.Receiver(tmode, svc, rx_n0, 1 - tx_direction, local_psn),
    )
