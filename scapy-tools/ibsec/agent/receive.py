"""The receive path of the channel adapter: every frame from the wire, checked and taken or dropped.

In the order a real CA checks, each failure counted under its own reason and never delivered: not RoCEv2 or
not for us (ignored) -> P_Key (trap 257) -> destination QP -> Q_Key for UD (trap 258) -> security mode of the
QP (a downgrade is refused) -> MAC / ICRC and replay (the wire library's transport) -> R_Key, bounds and
memory key for RDMA WRITE -> delivery, then the ACK. The state it works on is the QPs' (replay windows,
messages in progress, the last ACK) and the adapter's (counters, streaks, regions); it owns none of its own.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ibsec import addressing, keys, rocev2, transport

from . import frames
from .counters import Drop, Outcome, Taken
from .memory import Region, proof_key
from .qp import (
    NAK_MASK,
    PSN_MASK,
    RNR_INFINITE,
    RNR_SYNDROME,
    RNR_TIMER_MS,
    AdapterError,
    QueuePair,
    Rnr,
    Security,
    Service,
    State,
)

if TYPE_CHECKING:
    from .adapter import Adapter

log = logging.getLogger("ibsec.agent.adapter")  # the adapter's: its records keep the name they had

QP1 = 1
MAX_MESSAGE = 1 << 24  # bytes a multi-packet SEND may gather before it is refused
SEGMENTS = ("ONLY", "FIRST", "MIDDLE", "LAST")
Opened = tuple[bytes, transport.OpenInfo]  # a frame the transport verified: payload and what it learnt


class ReceivePath:
    """The adapter's receive path (:meth:`receive`), on the receive thread; it answers requests (ACK,
    RNR NAK) and ACKs the way IBA's responder does, and hands management frames (QP1) to the MAD agent."""

    def __init__(self, adapter: Adapter) -> None:
        self.adapter = adapter

    def receive(self, frame: bytes) -> None:
        """Handle one frame from the wire and count what became of it (exactly one drop reason or kind of
        frame taken). Survives anything: a frame that breaks a parser is malformed, and an exception no
        check foresaw is logged and counted as ``internal_errors`` (the fuzz suite requires none)."""
        self.adapter.counters.bump("rx_frames")
        try:
            outcome = self._receive(frame)
        except rocev2.FrameError:
            outcome = Drop.MALFORMED
        except Exception:
            log.exception("frame handling failed (counted as malformed)")
            self.adapter.counters.bump("internal_errors")
            outcome = Drop.MALFORMED
        self.adapter.counters.outcome(outcome)

    def _receive(self, frame: bytes) -> Outcome:
        view = rocev2.parse(frame)
        if view is None:
            return Taken.NOT_ROCE
        if addressing.mf_clear(view.dst_gid) != self.adapter.gid_bytes:
            return Taken.NOT_FOR_US
        if self.adapter.inject_drops and view.dqpn != QP1:
            self.adapter.inject_drops -= 1
            return Drop.INJECTED
        partition = self.adapter.partition(view.pkey)
        if partition is None:
            self.adapter.mads.trap_bad_pkey(view)
            return Drop.BAD_PKEY
        if view.dqpn == QP1:
            return self.adapter.mads.receive(view)
        qp = self.adapter.find_qp(view.dqpn)
        if qp is None or qp.state is not State.RTS:  # unknown, not yet connected, or in error
            return Drop.NO_QP
        if view.service != qp.service.value:
            return Drop.MALFORMED
        if view.mode != qp.mode:
            return Drop.BAD_MODE
        if qp.service is Service.UD:
            return self._receive_ud(qp, view)
        if view.opcode_name == "RC_ACKNOWLEDGE":
            return self._receive_ack(qp, view)
        return self._receive_request(qp, view)

    def _open(
        self,
        qp: QueuePair,
        view: rocev2.View,
        security: Security,
        receiver: transport.Receiver | None,
        key: bytes | None = None,
        trial: bool = False,
        commit: bool = True,
    ) -> Opened | Drop:
        """Verify (and decrypt) with the transport: what was opened, or why the frame is refused.

        ``key`` overrides the connection's key; a ``trial`` open (one candidate memory key among several)
        reports a MAC failure by raising it, so the caller can try the next key; without ``commit`` the
        frame's PSN is not taken (it is verified, not kept).
        """
        assert receiver is not None
        try:
            return transport.open_frame(view, key or self.adapter.key_of(security), receiver, commit)
        except transport.MacFailure:
            if trial:
                raise
            self._mac_failure(qp, view)
            return Drop.MAC_FAILURE
        except transport.SequenceError:
            return Drop.PSN_SEQUENCE
        except transport.ReplayError:
            if qp.service is Service.RC and receiver is security.requests and qp.last_ack is not None:
                self.adapter.transmit(qp.last_ack)  # a retransmitted request whose ACK was lost: ACK it again
            return Drop.REPLAY
        except (transport.ModeMismatch, transport.ReservedMode):
            return Drop.BAD_MODE
        except transport.IcrcError:
            return Drop.BAD_ICRC
        except (transport.TransportError, rocev2.WireError):
            return Drop.MALFORMED

    def _mac_failure(self, qp: QueuePair, view: rocev2.View) -> None:
        streak, trap, retire = self.adapter.streaks.failure(qp.qpn)
        if trap:
            self.adapter.mads.security_trap(qp, view, streak)
        if retire and qp.security is not None:
            qp.security.retired = True
            log.warning("QP %#x: key retired after %d consecutive MAC failures", qp.qpn, streak)
            self.adapter.fail(qp, "key retired")

    def _receive_request(self, qp: QueuePair, view: rocev2.View) -> Outcome:
        """An RC request: SEND or RDMA WRITE, one packet (ONLY) or one of a multi-packet message.

        Every packet is opened (replay window, MAC) before its place in a message is judged, so that a
        retransmitted packet whose ACK was lost is acknowledged again rather than called out of place.
        """
        operation, _, segment = view.opcode_name.removeprefix("RC_").rpartition("_")
        if segment not in SEGMENTS or operation not in ("SEND", "RDMA_WRITE"):
            return Drop.MALFORMED
        if operation == "SEND":
            return self._receive_send(qp, view, segment)
        if segment in ("ONLY", "FIRST"):
            return self._receive_write_start(qp, view, segment)
        return self._receive_write_more(qp, view, segment)

    @staticmethod
    def _in_place(qp: QueuePair, segment: str, kind: str) -> bool:
        """Does an opened packet fit the message in progress (ONLY/FIRST: none; MIDDLE/LAST: one of
        ``kind``)? An authentic packet out of place is a sender's bug: dropped as malformed."""
        inbound = qp.inbound
        if segment in ("ONLY", "FIRST"):
            return inbound is None
        return inbound is not None and (inbound.send is not None) == (kind == "SEND")

    def _receive_send(self, qp: QueuePair, view: rocev2.View, segment: str) -> Outcome:
        assert qp.security is not None
        if segment in ("ONLY", "FIRST") and not qp.echo and not qp.room():
            return self._not_ready(qp, view)
        opened = self._open(qp, view, qp.security, qp.security.requests)
        if isinstance(opened, Drop):
            return opened
        if not self._in_place(qp, segment, "SEND"):
            return Drop.MALFORMED
        payload, inbound = opened[0], qp.inbound
        gathered = len(inbound.send) if inbound is not None and inbound.send is not None else 0
        if gathered + len(payload) > MAX_MESSAGE:
            qp.inbound = None
            return Drop.MALFORMED
        self._accepted(qp, opened[1])
        if segment == "ONLY":
            self._deliver(qp, payload, {"psn": view.psn})
        elif segment == "FIRST":
            qp.inbound = Inbound(send=bytearray(payload))
        elif inbound is not None and inbound.send is not None:
            inbound.send += payload
            if segment == "LAST":
                qp.inbound = None
                self._deliver(qp, bytes(inbound.send), {"psn": view.psn})
        return Taken.DATA

    def _not_ready(self, qp: QueuePair, view: rocev2.View) -> Outcome:
        """A SEND that starts a message while the receive queue is full: never ACKed, never kept. If it is
        authentic it is answered with an RNR NAK for its PSN (the PSN stays expected, so the sender's retry
        is taken once there is room); the NAK for one PSN is sent again as the same bytes."""
        assert qp.security is not None
        opened = self._open(qp, view, qp.security, qp.security.requests, commit=False)
        if isinstance(opened, Drop):
            return opened
        epsn = opened[1].epsn
        if qp.rnr_nak is None or qp.rnr_nak[0] != epsn:
            qp.rnr_nak = (epsn, self._response(qp, epsn, RNR_SYNDROME | self.adapter.config.min_rnr_timer))
        self.adapter.transmit(qp.rnr_nak[1])
        self.adapter.counters.bump("rnr_naks_sent")
        return Drop.RNR

    def _receive_write_start(self, qp: QueuePair, view: rocev2.View, segment: str) -> Outcome:
        """RDMA WRITE (ONLY or FIRST): R_Key, bounds of the whole message, then the MAC (under a memory
        key if the region demands one), then the bytes."""
        assert qp.security is not None and view.reth is not None
        va, r_key, length = view.reth
        region = self.adapter.memory.lookup(r_key)
        if region is None:
            return Drop.BAD_RKEY
        admitted = region.admits(qp.pd, qp.mode)
        if not admitted:
            return Drop.WRONG_PD if admitted is None else Drop.UNAUTHENTICATED_WRITE
        fits = length == view.payload_length if segment == "ONLY" else view.payload_length < length
        if not region.contains(va, length) or not fits:
            return Drop.OUT_OF_BOUNDS
        if region.tree is not None:
            found = self._open_with_memory_key(qp, view, region)
        else:
            plain = self._open(qp, view, qp.security, qp.security.requests)
            found = plain if isinstance(plain, Drop) else (plain, None)
        if isinstance(found, Drop):
            return found
        opened, key = found
        if not self._in_place(qp, segment, "RDMA_WRITE"):
            return Drop.MALFORMED
        payload = opened[0]
        region.write(va, payload)
        if segment == "FIRST":
            qp.inbound = Inbound(region=region, va=va + len(payload), remaining=length - len(payload),
                                 key=key)
        self.adapter.counters.bump("rdma_write_bytes", len(payload))
        self._accepted(qp, opened[1])
        return Taken.DATA

    def _receive_write_more(self, qp: QueuePair, view: rocev2.View, segment: str) -> Outcome:
        """RDMA WRITE MIDDLE or LAST: under the key and into the place its FIRST packet set up."""
        assert qp.security is not None
        inbound = qp.inbound
        key = inbound.key if inbound is not None else None
        opened = self._open(qp, view, qp.security, qp.security.requests, key)
        if isinstance(opened, Drop):
            return opened
        if not self._in_place(qp, segment, "RDMA_WRITE"):
            return Drop.MALFORMED
        assert inbound is not None and inbound.region is not None
        payload = opened[0]
        if len(payload) > inbound.remaining or (segment == "LAST") != (len(payload) == inbound.remaining):
            qp.inbound = None
            return Drop.OUT_OF_BOUNDS
        inbound.region.write(inbound.va, payload)
        inbound.va += len(payload)
        inbound.remaining -= len(payload)
        if segment == "LAST":
            qp.inbound = None
        self.adapter.counters.bump("rdma_write_bytes", len(payload))
        self._accepted(qp, opened[1])
        return Taken.DATA

    def _accepted(self, qp: QueuePair, info: transport.OpenInfo) -> None:
        """A request verified: the connection is established (if it was half-open), the MAC-failure
        streak ends and the request is acknowledged."""
        self.adapter.admission.established(qp.qpn)
        self.adapter.streaks.success(qp.qpn)
        self._acknowledge(qp, info)

    def _open_with_memory_key(
        self, qp: QueuePair, view: rocev2.View, region: Region
    ) -> tuple[Opened, bytes | None] | Drop:
        """Open a write to an extended-protection region: its MAC must prove the key of a tree node that
        contains the whole write (at most depth + 1 tries). Returns what was opened and the proof key
        (the rest of the message must verify under it), or why it was refused."""
        assert qp.security is not None and view.reth is not None
        connection_key = self.adapter.key_of(qp.security)
        if connection_key is None or region.key is None or region.tree is None:
            return Drop.MEMORY_KEY
        va, _, length = view.reth
        for start, size in region.candidate_nodes(va, length):
            node_key = keys.derive_subregion_key(region.key, region.tree, start, size).material
            proof = proof_key(connection_key, node_key)
            try:
                opened = self._open(qp, view, qp.security, qp.security.requests, proof, trial=True)
            except transport.MacFailure:
                continue
            return opened if isinstance(opened, Drop) else (opened, proof)
        self._mac_failure(qp, view)
        return Drop.MEMORY_KEY

    def _acknowledge(self, qp: QueuePair, info: transport.OpenInfo) -> None:
        """Cumulative ACK of the request just accepted; kept to be re-sent as is for duplicates."""
        with self.adapter.lock:
            qp.msn = (qp.msn + 1) & PSN_MASK
            qp.last_ack = self._response(qp, info.epsn, frames.ACK_SYNDROME)
        self.adapter.transmit(qp.last_ack)

    def _response(self, qp: QueuePair, epsn: int, syndrome: int) -> bytes:
        """An ACKNOWLEDGE for request ``epsn`` with AETH ``syndrome`` (ACK or RNR NAK), sealed."""
        assert qp.security is not None and qp.remote_gid is not None and qp.remote_qpn is not None
        plain = self.adapter.builder.plain(
            qp.remote_gid,
            "RC_ACKNOWLEDGE",
            qp.partition.pkey,
            qp.remote_qpn,
            epsn,
            b"",
            src_qp=qp.qpn,
            aeth=(syndrome, qp.msn),
            dst_mac=qp.remote_mac,
        )
        return frames.seal(plain, qp.security, self.adapter.key_of(qp.security))

    def _receive_ack(self, qp: QueuePair, view: rocev2.View) -> Outcome:
        """An ACK (cumulative), or an RNR NAK: the responder had no room for the request at its PSN."""
        assert qp.security is not None and view.aeth is not None
        syndrome = view.aeth[0] & NAK_MASK
        if syndrome == RNR_SYNDROME:
            return self._receive_rnr(qp, view)
        if syndrome:  # a NAK kind our responders never send
            return Drop.MALFORMED
        opened = self._open(qp, view, qp.security, qp.security.responses)
        if isinstance(opened, Drop):
            return opened
        acked = opened[1].epsn
        with qp.cond:
            for epsn in [p for p in qp.unacked if p <= acked]:
                del qp.unacked[epsn]
            if qp.rnr is not None and acked >= qp.rnr.epsn:
                qp.rnr = None  # the responder took it: the RNR episode is over
            qp.cond.notify_all()
        return Taken.ACK

    def _receive_rnr(self, qp: QueuePair, view: rocev2.View) -> Outcome:
        """RNR NAK: everything before its PSN is acknowledged; wait the RNR timer, then resend from it. The
        same bytes as the last RNR NAK (the responder repeating it) count once per resend; more RNR NAKs in
        a row than the RNR retry count (7: no limit) put the QP in error."""
        assert qp.security is not None and view.aeth is not None
        rnr = qp.rnr
        if rnr is not None and view.data == rnr.frame:
            if rnr.waiting:
                return Drop.REPLAY  # a copy while we already wait
            epsn, tries = rnr.epsn, rnr.tries + 1
        else:
            opened = self._open(qp, view, qp.security, qp.security.responses)
            if isinstance(opened, Drop):
                return opened
            epsn = opened[1].epsn
            tries = rnr.tries + 1 if rnr is not None and rnr.epsn == epsn else 1
        wait = RNR_TIMER_MS[view.aeth[0] & 0x1F] / 1000
        with qp.cond:
            for acked in [p for p in qp.unacked if p < epsn]:
                del qp.unacked[acked]
            for item in qp.unacked.values():
                item.tries = 1  # the responder answered: the timeout retries start again (IBA)
            qp.rnr = Rnr(epsn, time.monotonic() + wait, view.data, tries)
            qp.cond.notify_all()
        self.adapter.counters.bump("rnr_naks_received")
        if self.adapter.config.rnr_retries != RNR_INFINITE and tries > self.adapter.config.rnr_retries:
            self.adapter.fail(qp, "RNR retries exhausted")
        return Taken.RNR_NAK

    def _receive_ud(self, qp: QueuePair, view: rocev2.View) -> Outcome:
        if view.deth is None or view.deth[0] != qp.qkey:
            self.adapter.mads.trap_bad_qkey(view)
            return Drop.BAD_QKEY
        peer = qp.peers.get((str(ipaddress.IPv6Address(view.src_gid)), view.deth[1]))
        if peer is None:
            return Drop.NO_QP
        if not qp.echo and not qp.room():  # UD has no acknowledgement: dropped, as IBA's UD does
            return Drop.RNR
        opened = self._open(qp, view, peer.security, peer.security.requests)
        if isinstance(opened, Drop):
            return opened
        self.adapter.admission.established(qp.qpn)
        self.adapter.streaks.success(qp.qpn)
        self._deliver(qp, opened[0], {"src_gid": peer.gid, "src_qp": peer.qpn}, reply_to=(peer.gid, peer.qpn))
        return Taken.DATA

    def _deliver(
        self, qp: QueuePair, payload: bytes, meta: dict[str, Any], reply_to: tuple[str, int] | None = None
    ) -> None:
        self.adapter.counters.bump("rx_messages")
        self.adapter.counters.bump("rx_bytes", len(payload))
        if qp.echo:
            try:
                self.adapter.post_send(qp.qpn, payload, reply_to, block=False)  # this is the receive thread
            except AdapterError as exc:
                log.warning("echo on QP %#x failed: %s", qp.qpn, exc)
            return
        qp.deliver(payload, meta)


@dataclass
class Inbound:
    """A multi-packet RC message being received: a SEND's bytes so far, or where a WRITE goes on."""

    send: bytearray | None = None
    region: Region | None = None
    va: int = 0
    remaining: int = 0
    key: bytes | None = None  # extended memory protection: the proof key the FIRST packet verified under
