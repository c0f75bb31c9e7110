"""The send path of the channel adapter: messages out as sealed path-MTU packets, and their retransmission.

RC messages keep at most ``SEND_WINDOW`` packets unacknowledged, resent go-back-N after the ACK timeout or
an RNR wait; UD messages are one packet to a peer SIDR resolved. The state it works on is the QPs' (next
PSN, unacknowledged frames, the RNR episode); it owns none of its own.
"""

from __future__ import annotations

import ipaddress
import time
from typing import TYPE_CHECKING

from . import frames
from .memory import proof_key
from .qp import AdapterError, QueuePair, Service, State, Unacked

if TYPE_CHECKING:
    from .adapter import Adapter

SEND_WINDOW = 64  # RC packets in flight at most (go-back-N resends them all after a loss)
WINDOW_PATIENCE = 60.0  # seconds a sender waits for room in the window before giving up


class SendPath:
    """The adapter's requester side: :meth:`post_send`, :meth:`post_write` (from control and application
    threads, and the receive thread when it echoes) and :meth:`retransmit` (the timer thread)."""

    def __init__(self, adapter: Adapter) -> None:
        self.adapter = adapter

    def _ready(self, qpn: int) -> QueuePair:
        qp = self.adapter.qp(qpn)
        if qp.state is not State.RTS or qp.security is None:
            raise AdapterError(f"QP {qpn:#x} is {qp.state.value}, not connected")
        return qp

    def post_send(
        self, qpn: int, data: bytes, dest: tuple[str, int] | None = None, block: bool = True
    ) -> None:
        """SEND ``data`` on an RC QP (in path-MTU packets), or on a UD QP to ``dest`` = (GID, QPN).

        ``block``: wait while the RC send window is full (the receive thread, which processes the ACKs,
        must not wait for them).
        """
        qp = self.adapter.qp(qpn)
        if qp.service is Service.UD:
            self._post_ud(qp, data, dest)
            return
        self._post_rc(self._ready(qpn), "RC_SEND", data, block=block)

    def post_write(self, qpn: int, va: int, r_key: int, data: bytes, memory_key: bytes | None = None) -> None:
        """RDMA WRITE ``data`` to remote ``va`` under ``r_key``; ``memory_key`` proves a (sub-)region key."""
        qp = self._ready(qpn)
        if memory_key is not None and qp.mode == 0:
            raise AdapterError("extended memory protection needs a security mode with a MAC (1-4)")
        self._post_rc(qp, "RC_RDMA_WRITE", data, reth=(va, r_key, len(data)), memory_key=memory_key)

    def _post_rc(
        self,
        qp: QueuePair,
        operation: str,
        data: bytes,
        reth: tuple[int, int, int] | None = None,
        memory_key: bytes | None = None,
        block: bool = True,
    ) -> None:
        """One message as path-MTU packets: ONLY, or FIRST (with the RETH), MIDDLEs and LAST; at most
        ``SEND_WINDOW`` packets unacknowledged when ``block``."""
        assert qp.security is not None and qp.remote_gid is not None and qp.remote_qpn is not None
        if qp.security.retired:
            raise AdapterError(f"QP {qp.qpn:#x}: key retired after repeated MAC failures")
        mtu = self.adapter.config.mtu
        chunks = [data[i : i + mtu] for i in range(0, len(data), mtu)] or [b""]
        with qp.cond:
            key = self.adapter.key_of(qp.security)
            key = key if memory_key is None or key is None else proof_key(key, memory_key)
            for n, chunk in enumerate(chunks):
                if block and not qp.cond.wait_for(
                    lambda: len(qp.unacked) < SEND_WINDOW or qp.state is not State.RTS, WINDOW_PATIENCE
                ):
                    raise AdapterError(f"QP {qp.qpn:#x}: send window stayed full")
                if qp.state is not State.RTS:
                    raise AdapterError(f"QP {qp.qpn:#x} failed while sending")
                epsn = qp.next_psn
                qp.next_psn += 1
                plain = self.adapter.builder.plain(
                    qp.remote_gid,
                    f"{operation}_{_segment(n, len(chunks))}",
                    qp.partition.pkey,
                    qp.remote_qpn,
                    epsn,
                    chunk,
                    ackreq=True,
                    src_qp=qp.qpn,
                    reth=reth if n == 0 else None,
                    dst_mac=qp.remote_mac,
                )
                frame = frames.seal(plain, qp.security, key)
                qp.unacked[epsn] = Unacked(frame, time.monotonic())
                if qp.rnr is None or not qp.rnr.waiting:  # else it leaves when the wait is over
                    self.adapter.transmit(frame)  # under the QP's lock: frames leave in PSN order
        self.adapter.counters.bump("tx_bytes", len(data))

    def _post_ud(self, qp: QueuePair, data: bytes, dest: tuple[str, int] | None) -> None:
        if dest is None:
            raise AdapterError("a UD send needs a destination (GID, QPN)")
        if len(data) > self.adapter.config.mtu:
            raise AdapterError(
                f"a UD message is one packet: at most the path MTU, {self.adapter.config.mtu} bytes"
            )
        peer = qp.peers.get((str(ipaddress.IPv6Address(dest[0])), dest[1]))
        if peer is None:
            raise AdapterError(f"destination {dest[0]} QP {dest[1]:#x} not resolved (run SIDR first)")
        with self.adapter.lock:
            epsn = peer.next_psn
            peer.next_psn += 1
            plain = self.adapter.builder.plain(
                peer.gid,
                "UD_SEND_ONLY",
                qp.partition.pkey,
                peer.qpn,
                epsn,
                data,
                src_qp=qp.qpn,
                deth=(peer.qkey, qp.qpn),
                dst_mac=peer.mac,
            )
            self.adapter.transmit(
                frames.seal(plain, peer.security, self.adapter.key_of(peer.security))
            )  # in PSN order
        self.adapter.counters.bump("tx_bytes", len(data))

    def retransmit(self, now: float) -> None:
        """Resend what waited longer than the ACK timeout, or whose RNR wait is over (go-back-N); put a QP
        whose retries are exhausted in error. Called by the adapter's timer (:meth:`Adapter.tick`)."""
        with self.adapter.lock:
            qps = [qp for qp in self.adapter.qps.values() if qp.unacked and qp.state is State.RTS]
        for qp in qps:
            with qp.cond:
                if qp.rnr is not None and qp.rnr.waiting:
                    if now >= qp.rnr.until:
                        self._resume(qp, now)
                    continue
                oldest = next(iter(qp.unacked.values()), None)
                if oldest is None or now - oldest.sent_at < self.adapter.config.ack_timeout:
                    continue
                if oldest.tries > self.adapter.config.retries:
                    self.adapter.fail(qp, "retries exhausted")
                    continue
                for item in qp.unacked.values():
                    item.sent_at, item.tries = now, item.tries + 1
                    self.adapter.transmit(item.frame)  # in PSN order, before a newer frame can be posted
                    self.adapter.counters.bump("retransmissions")

    def _resume(self, qp: QueuePair, now: float) -> None:
        """The RNR wait is over: resend everything unacknowledged from the NAKed request on (go-back-N),
        without counting it against the retransmission limit (the responder was busy, not gone)."""
        assert qp.rnr is not None
        qp.rnr.waiting = False
        for item in qp.unacked.values():
            item.sent_at = now
            self.adapter.transmit(item.frame)
            self.adapter.counters.bump("rnr_retries")


def _segment(index: int, count: int) -> str:
    """Which packet of a message this is: ONLY, FIRST, MIDDLE or LAST."""
    if count == 1:
        return "ONLY"
    return "FIRST" if index == 0 else "LAST" if index == count - 1 else "MIDDLE"
