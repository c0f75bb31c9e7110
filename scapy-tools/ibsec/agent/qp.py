"""Queue pairs and partitions: the per-connection state of the channel adapter.

An RC QP talks to exactly one remote QP: it keeps the send PSN, the unacknowledged frames for
retransmission and the in-order receive PSN. A UD QP talks to any peer that resolved it with SIDR: per peer
it keeps the key and nonce bases agreed in SIDR_REQ/SIDR_REP (the transport keeps the replay window).
Delivered messages wait in the QP's receive queue until the application (the control socket) takes them.
"""

from __future__ import annotations

import enum
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

from ibsec import transport

PSN_MASK = 0xFFFFFF
QPN_MAX = 0xFFFFFF  # QPNs are 24 bits
RECV_QUEUE_DEPTH = 4096  # messages a QP keeps for its application; beyond: RNR NAK (RC), drop (UD)
RNR_SYNDROME = 0x20  # AETH syndrome bits 7-5 = 001: RNR NAK; bits 4-0: the RNR timer
NAK_MASK = 0xE0
RNR_INFINITE = 7  # IBA: an RNR retry count of 7 retries for ever
RNR_TIMER_MS = (655.36, 0.01, 0.02, 0.03, 0.04, 0.06, 0.08, 0.12, 0.16, 0.24, 0.32, 0.48, 0.64, 0.96,
                1.28, 1.92, 2.56, 3.84, 5.12, 7.68, 10.24, 15.36, 20.48, 30.72, 40.96, 61.44, 81.92, 122.88,
                163.84, 245.76, 327.68, 491.52)
"""IBA 9.7.5.2.8: the RNR NAK timer field's code -> milliseconds the requester waits before retrying."""


class AdapterError(Exception):
    """An operation the adapter refuses (no such QP, QP not connected, missing key, table full...)."""


class Service(enum.Enum):
    RC = "RC"
    UD = "UD"


class Scope(enum.Enum):
    """Which key protects a connection (DESIGN section 3: keys by scope)."""

    PARTITION = "partition"  # P_SK of the partition
    SESSION = "session"  # per-connection SK carried wrapped in CM PrivateData
    DERIVED = "derived"  # K(A,B) = PRF_P_SK(GID_A || QPN_A || GID_B || QPN_B)


class State(enum.Enum):
    INIT = "INIT"  # created, handshake not finished
    RTS = "RTS"  # ready to send and receive
    ERROR = "ERROR"  # retries exhausted or key retired


@dataclass
class Partition:
    """One P_Key table entry and its security settings (Nexus: security chosen per partition)."""

    pkey: int
    mode: int = 0
    scope: Scope = Scope.PARTITION

    @property
    def number(self) -> int:
        return self.pkey & 0x7FFF

    @property
    def full_member(self) -> bool:
        return bool(self.pkey & 0x8000)


def pkey_matches(table_pkey: int, packet_pkey: int) -> bool:
    """IBA 10.9.3: the low 15 bits must match and at least one side must be a full member."""
    return (
        (table_pkey & 0x7FFF) == (packet_pkey & 0x7FFF)
        and bool((table_pkey | packet_pkey) & 0x8000)
        and (packet_pkey & 0x7FFF) != 0
    )


@dataclass
class Security:
    """The crypto context of a connection: key bytes and the transport's per-direction state.

    ``sender`` seals our requests and responses (the transport keeps them on separate nonce streams);
    ``requests`` opens the peer's requests (in order for RC, a window for UD) and ``responses`` the ACKs
    of our own requests. Mode 0 has no key and the transport makes no crypto call for it.
    """

    mode: int
    key: bytes | None = field(default=None, repr=False)
    cache_id: tuple[int, int] | None = None  # session scope: the key lives in the session key cache
    sender: transport.Sender | None = None
    requests: transport.Receiver | None = None
    responses: transport.Receiver | None = None
    retired: bool = False


@dataclass
class Unacked:
    frame: bytes
    sent_at: float
    tries: int = 1


@dataclass
class Rnr:
    """A requester told "receiver not ready": it waits until ``until``, then resends from ``epsn``."""

    epsn: int
    until: float
    frame: bytes  # the RNR NAK as received: the very same bytes again are the responder repeating it
    tries: int = 1
    waiting: bool = True  # False once the wait is over and the requests went out again


@dataclass
class UdPeer:
    """A remote UD QP resolved with SIDR: where to send and how to protect it."""

    gid: str
    qpn: int
    qkey: int
    mac: bytes
    security: Security
    next_psn: int = 0


@dataclass
class QueuePair:
    qpn: int
    service: Service
    partition: Partition
    mode: int
    scope: Scope
    qkey: int = 0
    pd: int = 0  # protection domain: RDMA WRITEs reach only regions of the same PD
    state: State = State.INIT
    remote_gid: str | None = None
    remote_qpn: int | None = None
    remote_mac: bytes = b""
    security: Security | None = None
    next_psn: int = 0  # extended (64-bit) send PSN; the wire carries its low 24 bits
    expected_psn: int = 0  # RC responder: next in-order request PSN (extended)
    msn: int = 0
    unacked: OrderedDict[int, Unacked] = field(default_factory=OrderedDict)
    last_ack: bytes | None = None  # cumulative ACK, re-sent as is for duplicates (no new nonce)
    peers: dict[tuple[str, int], UdPeer] = field(default_factory=dict)
    echo: bool = False
    comm_ids: tuple[int, int] | None = None  # RC: (our CM communication id, the peer's), for DREQ/DREP
    cm_key: bytes | None = field(default=None, repr=False)  # RTU, DREQ, DREP of a secure connection
    inbound: Any = None  # RC: the multi-packet message being received (receive.Inbound), if any
    recv_queue: deque[tuple[bytes, dict[str, Any]]] = field(default_factory=deque)
    rnr_nak: tuple[int, bytes] | None = None  # responder: (PSN, frame) of the last RNR NAK, resent as is
    rnr: Rnr | None = None  # requester: waiting after an RNR NAK
    # guards the send state (next_psn, unacked), the receive queue and the state; reentrant, so that
    # a holder may fail the QP
    cond: threading.Condition = field(default_factory=lambda: threading.Condition(threading.RLock()))
    created: float = field(default_factory=time.monotonic)

    def room(self) -> bool:
        """Can the receive queue keep one more message (counting one being gathered)?"""
        gathering = self.inbound is not None and getattr(self.inbound, "send", None) is not None
        return len(self.recv_queue) + gathering < RECV_QUEUE_DEPTH

    def deliver(self, data: bytes, meta: dict[str, Any]) -> None:
        """Queue a received message for the application and wake a waiting reader (the caller checked
        :meth:`room`)."""
        with self.cond:
            self.recv_queue.append((data, meta))
            self.cond.notify_all()

    def take(self, timeout: float) -> tuple[bytes, dict[str, Any]] | None:
        """The oldest received message, waiting up to ``timeout`` seconds for one."""
        with self.cond:
            if not self.cond.wait_for(lambda: bool(self.recv_queue), timeout):
                return None
            return self.recv_queue.popleft()

    def describe(self) -> dict[str, Any]:
        """What the control socket lists for this QP (never keys)."""
        return {
            "qpn": self.qpn,
            "service": self.service.value,
            "pkey": self.partition.pkey,
            "mode": self.mode,
            "scope": self.scope.value,
            "pd": self.pd,
            "state": self.state.value,
            "qkey": self.qkey,
            "remote_gid": self.remote_gid,
            "remote_qpn": self.remote_qpn,
            "next_psn": self.next_psn,
            "unacked": len(self.unacked),
            "queued": len(self.recv_queue),
            "echo": self.echo,
            "peers": [{"gid": p.gid, "qpn": p.qpn} for p in self.peers.values()],
        }
