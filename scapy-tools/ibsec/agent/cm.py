"""Connection management on QP1 (IBA chapter 12) carrying the keys of seed 000 section 5.1.5.

RC: the active side sends REQ with its QPN, starting PSN, security mode, its nonce base N0 and, for
session scope, a fresh session key SK wrapped under CA_SK_ij (the key it shares with the passive CA); the
passive side unwraps it, creates a QP, answers REP with its QPN, PSN and N0; the active side confirms with
RTU. UD: SIDR_REQ / SIDR_REP carry the same, plus (in our PrivateData) the requester's QPN, Q_Key and PSN,
because both ends keep a key and a replay window per remote UD QP. Refusals (unknown partition, a
downgrade to mode 0 in a secure partition, a key that does not unwrap, no pairwise key) are answered with
REJ (or SIDR_REP status 2) and logged with the reason, never with key bytes.

Key scope travels in the ServiceID's low byte (``IBSEC_SERVICE_ID | scope``); the QPN a UD requester
wants resolved (0: a new QP) in bits 8-31.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import struct
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scapy.packet import Packet

from ibsec import keys, layers

from .counters import Drop, Outcome, Taken
from .keyring import MissingKey
from .qp import PSN_MASK, QPN_MAX, AdapterError, QueuePair, Scope, Service
from .traps import RateLimiter

if TYPE_CHECKING:
    from . import frames
    from .adapter import Adapter

log = logging.getLogger("ibsec.agent.cm")

IBSEC_SERVICE_ID = 0x1B5E_C000_0000_0000
SCOPE_CODES = {Scope.PARTITION: 0, Scope.SESSION: 1, Scope.DERIVED: 2}
SCOPES = {code: scope for scope, code in SCOPE_CODES.items()}
REJ_CONSUMER = 28  # IBA 12.6.7.2: Consumer Reject
SIDR_REJECTED = 2
CM_RETRIES = 3
UD_EXTRA = struct.Struct("!III")  # after IbsecPrivateData in SIDR PrivateData: QPN, Q_Key, start PSN


class Refused(Exception):
    """The passive side refuses a connection; the message goes to the log, the peer gets a REJ."""


@dataclass
class Pending:
    """An active connection attempt waiting for REP / SIDR_REP."""

    qp: QueuePair
    remote_gid: str
    n0: bytes
    session: tuple[int, int] | None  # session key cache id of the session key, if any
    done: threading.Event = field(default_factory=threading.Event)
    reply: Any = None
    error: str | None = None
    mac: bytes = b""  # where the reply came from: the peer's frames go there


class ConnectionManager:
    """The CM agent of one port: active connects, passive accepts, duplicate REQs answered again."""

    def __init__(self, adapter: Adapter) -> None:
        self.adapter = adapter
        self._pending: dict[int, Pending] = {}
        self._accepted: dict[tuple[str, int], bytes] = {}  # (peer GID, its comm/request id) -> our reply
        self._lock = threading.Lock()
        self._log_limiter = RateLimiter(window=1.0)  # a flood of refused requests is not a flood of lines

    # ------------------------------------------------------------------ active side

    def connect(
        self,
        remote_gid: str,
        service: Service,
        pkey: int,
        mode: int | None,
        scope: Scope | None,
        timeout: float,
        qpn: int | None = None,
        remote_qpn: int | None = None,
        pd: int | None = None,
    ) -> QueuePair:
        """Connect a QP to ``remote_gid``, wait for the handshake; AdapterError on REJ or timeout."""
        remote_gid = str(ipaddress.IPv6Address(remote_gid))
        ad = self.adapter
        qp = ad.qp(qpn) if qpn is not None else ad.create_qp(service, pkey, mode, scope, pd=pd)
        comm_id = int.from_bytes(os.urandom(4), "big")
        n0 = os.urandom(layers.NONCE_BASE_LEN)
        session = None
        wrapped = bytes(keys.WRAPPED_KEY_LEN)
        if qp.mode and qp.scope is Scope.SESSION:
            sk = keys.Key.generate(keys.KeyType.SK, self._sk_owner(ad.gid, qp.qpn, remote_gid))
            wrapped = keys.wrap_key(ad.keyring.pairwise_key(_guid(remote_gid)), sk)
            session = ad.session_id(qp, comm_id)
            ad.store_session_key(session, sk)
        private = layers.IbsecPrivateData(secmode=qp.mode, n0=n0, wrapped_key=wrapped)
        service_id = IBSEC_SERVICE_ID | SCOPE_CODES[qp.scope]
        if service is Service.RC:
            body: Packet = layers.CmReq(
                local_comm_id=comm_id,
                service_id=service_id,
                local_ca_guid=ad.guid,
                local_qpn=qp.qpn,
                starting_psn=qp.next_psn & PSN_MASK,
                partition_key=qp.partition.pkey,
                primary_local_gid=ad.gid,
                primary_remote_gid=remote_gid,
                primary_local_lid=ad.config.lid,
                private_data=private,
            )
            attr = layers.CmAttr.REQ
        else:
            extra = UD_EXTRA.pack(qp.qpn, qp.qkey, qp.next_psn & PSN_MASK)
            body = layers.CmSidrReq(
                request_id=comm_id,
                partition_key=qp.partition.pkey,
                service_id=service_id | ((remote_qpn or 0) << 8),
                private_data=(bytes(private) + extra).ljust(216, b"\0"),
            )
            attr = layers.CmAttr.SIDR_REQ
        pending = Pending(qp, remote_gid, n0, session)
        with self._lock:
            self._pending[comm_id] = pending
        frame = ad.builder.mad_frame(remote_gid, qp.partition.pkey, bytes(self._mad(attr, body)))
        try:
            for _ in range(CM_RETRIES):
                ad.transmit(frame)
                if pending.done.wait(timeout / CM_RETRIES):
                    break
        finally:
            with self._lock:
                self._pending.pop(comm_id, None)
        try:
            if pending.error is not None:
                raise AdapterError(f"connection to {remote_gid} refused: {pending.error}")
            if pending.reply is None:
                raise AdapterError(f"no CM reply from {remote_gid} within {timeout:.1f}s")
            self._finish_active(pending, comm_id, service)
        except BaseException:
            if qpn is None:  # a QP made for this attempt goes with it
                ad.destroy_qp(qp)
            raise
        return qp

    def _finish_active(self, pending: Pending, comm_id: int, service: Service) -> None:
        ad, qp, reply = self.adapter, pending.qp, pending.reply
        private = layers.IbsecPrivateData(bytes(reply.private_data)[: len(layers.IbsecPrivateData())])
        if service is Service.RC:
            remote_qpn, remote_psn = reply.local_qpn, reply.starting_psn
            security = ad.security_for(
                qp,
                pending.remote_gid,
                remote_qpn,
                pending.session,
                True,
                (pending.n0, private.n0),
                remote_psn,
            )
            ad.connected(qp, pending.remote_gid, remote_qpn, security, pending.mac)
            qp.comm_ids = (comm_id, reply.local_comm_id)
            rtu = layers.CmRtu(local_comm_id=comm_id, remote_comm_id=reply.local_comm_id)
            rtu_mad = bytes(self._mad(layers.CmAttr.RTU, rtu))
            ad.transmit(ad.builder.mad_frame(pending.remote_gid, qp.partition.pkey, rtu_mad, pending.mac))
        else:
            remote_psn = UD_EXTRA.unpack_from(bytes(reply.private_data), len(private))[2]
            security = ad.security_for(
                qp,
                pending.remote_gid,
                reply.qpn,
                pending.session,
                True,
                (pending.n0, private.n0),
                remote_psn,
            )
            ad.add_ud_peer(qp, pending.remote_gid, reply.qpn, reply.qkey, security, pending.mac)

    # ------------------------------------------------------------------ receiving CM MADs

    def receive(self, view: frames.View, mad: Packet, payload: bytes) -> Outcome:
        """A CM MAD arrived on QP1 (``payload``: the MAD as received); what became of it."""
        attr = mad.attribute_id
        body = mad.payload
        src_gid = str(ipaddress.IPv6Address(view.src_gid))
        if attr == layers.CmAttr.REQ and isinstance(body, layers.CmReq):
            return self._on_request(src_gid, view, body, body.local_comm_id, Service.RC)
        if attr == layers.CmAttr.SIDR_REQ and isinstance(body, layers.CmSidrReq):
            return self._on_request(src_gid, view, body, body.request_id, Service.UD)
        if attr == layers.CmAttr.REP and isinstance(body, layers.CmRep):
            return self._answer(src_gid, view, body.remote_comm_id, body, None)
        if attr == layers.CmAttr.SIDR_REP and isinstance(body, layers.CmSidrRep):
            refused = f"SIDR status {body.status}" if body.status else None
            return self._answer(src_gid, view, body.request_id, body, refused)
        if attr == layers.CmAttr.REJ and isinstance(body, layers.CmRej):
            return self._answer(src_gid, view, body.remote_comm_id, None, f"REJ reason {body.reason}")
        if attr == layers.CmAttr.RTU and isinstance(body, layers.CmRtu):
            return self._on_rtu(src_gid, body)
        if attr == layers.CmAttr.DREQ and isinstance(body, layers.CmDreq):
            return self._on_disconnect(src_gid, view, body)
        if attr == layers.CmAttr.DREP and isinstance(body, layers.CmDrep):
            return self._answer(src_gid, view, body.remote_comm_id, body, None)
        return Drop.MALFORMED

    def _answer(
        self, src_gid: str, view: frames.View, comm_id: int, reply: Any, error: str | None
    ) -> Outcome:
        """A REP, SIDR_REP, REJ or DREP for one of our requests, from the host we asked (else stale)."""
        with self._lock:
            pending = self._pending.get(comm_id)
        if pending is None or pending.remote_gid != src_gid or pending.done.is_set():
            return Drop.CM_STALE
        pending.reply, pending.error, pending.mac = reply, error, view.src_mac
        pending.done.set()
        return Taken.CM

    def _connection(self, src_gid: str, local_comm_id: int) -> QueuePair | None:
        """Our RC QP whose CM communication id is ``local_comm_id`` and whose peer is ``src_gid``."""
        return next((q for q in self.adapter.list_qps() if q.comm_ids is not None
                     and q.comm_ids[0] == local_comm_id and q.remote_gid == src_gid), None)

    def _on_rtu(self, src_gid: str, body: Packet) -> Outcome:
        """RTU: the active side confirms a connection we accepted."""
        qp = self._connection(src_gid, body.remote_comm_id)
        if qp is None or qp.comm_ids is None or qp.comm_ids[1] != body.local_comm_id:
            return Drop.CM_STALE
        self.adapter.counters.bump("cm_rtu")
        return Taken.CM

    def _on_request(
        self, src_gid: str, view: frames.View, body: Packet, comm_id: int, service: Service
    ) -> Outcome:
        """REQ or SIDR_REQ: answered with REP / SIDR_REP, or refused (REJ / SIDR_REP status 2, and no state
        kept); the answer goes to the MAC the request came from."""
        ad = self.adapter
        with self._lock:
            earlier = self._accepted.get((src_gid, comm_id))
        if earlier is not None:  # our reply was lost and the peer retried: answer the same again
            ad.transmit(earlier)
            return Taken.CM
        try:
            reply = self._accept(src_gid, view, body, comm_id, service)
        except (Refused, MissingKey, keys.KeyWrapError, AdapterError) as exc:
            if self._log_limiter.allow(type(exc).__name__):
                log.warning(
                    "refused %s from %s: %s", "REQ" if service is Service.RC else "SIDR_REQ", src_gid, exc
                )
            ad.transmit(ad.builder.mad_frame(src_gid, self._reply_pkey(view),
                                             bytes(self._refusal(body, comm_id, service)), view.src_mac))
            return Drop.CM_REFUSED
        frame = ad.builder.mad_frame(src_gid, self._reply_pkey(view), bytes(reply), view.src_mac)
        with self._lock:
            self._accepted[(src_gid, comm_id)] = frame
            if len(self._accepted) > 4096:
                self._accepted.pop(next(iter(self._accepted)))
        ad.transmit(frame)
        return Taken.CM

    def _refusal(self, body: Packet, comm_id: int, service: Service) -> Packet:
        if service is Service.RC:
            return self._mad(
                layers.CmAttr.REJ,
                layers.CmRej(remote_comm_id=comm_id, message_rejected=0, reason=REJ_CONSUMER),
            )
        return self._mad(
            layers.CmAttr.SIDR_REP,
            layers.CmSidrRep(request_id=comm_id, status=SIDR_REJECTED, service_id=body.service_id),
        )

    def _accept(
        self, src_gid: str, view: frames.View, body: Packet, comm_id: int, service: Service
    ) -> Packet:
        """Check a request completely, then create (or pick) the QP; anything that fails after the QP
        exists takes it away again, so a refused request leaves no QP, connection or key behind."""
        ad = self.adapter
        size = len(layers.IbsecPrivateData())
        raw_private = bytes(body.private_data)
        private = layers.IbsecPrivateData(raw_private[:size])
        pkey = body.partition_key
        partition = ad.partition(pkey)
        if partition is None:
            raise Refused(f"P_Key {pkey:#06x} not in the P_Key table")
        if (body.service_id & ~0xFFFFFFFF) != IBSEC_SERVICE_ID or (body.service_id & 0xFF) not in SCOPES:
            raise Refused(f"unknown service id {body.service_id:#x}")
        mode, scope = private.secmode, SCOPES[body.service_id & 0xFF]
        if mode not in range(5) or (partition.mode and not mode):
            raise Refused(f"security mode {mode} not acceptable in partition {partition.pkey:#06x}")
        if service is Service.RC:
            remote_qpn, remote_psn, remote_qkey = body.local_qpn, body.starting_psn, 0
        else:
            remote_qpn, remote_qkey, remote_psn = UD_EXTRA.unpack_from(raw_private, size)
        if not layers.GSI_QPN < remote_qpn <= QPN_MAX or remote_psn > PSN_MASK:
            raise Refused(f"requester QPN {remote_qpn:#x} or start PSN {remote_psn:#x} out of range")
        sk = None
        if mode and scope is Scope.SESSION:
            kek = ad.keyring.pairwise_key(_guid(src_gid))
            sk = keys.unwrap_key(kek, bytes(private.wrapped_key), keys.KeyType.SK,
                                 self._sk_owner(src_gid, remote_qpn, ad.gid))
        created, qp = self._local_qp(service, pkey, mode, scope, (body.service_id >> 8) & 0xFFFFFF)
        try:
            return self._accepted_reply(src_gid, view, body, comm_id, service, qp, sk, private.n0,
                                        (remote_qpn, remote_psn, remote_qkey))
        except BaseException:
            if created:
                ad.destroy_qp(qp)
            raise

    def _accepted_reply(
        self,
        src_gid: str,
        view: frames.View,
        body: Packet,
        comm_id: int,
        service: Service,
        qp: QueuePair,
        sk: keys.Key | None,
        remote_n0: bytes,
        remote: tuple[int, int, int],
    ) -> Packet:
        """Key, connect and answer an accepted request on ``qp``: REP or SIDR_REP."""
        ad = self.adapter
        remote_qpn, remote_psn, remote_qkey = remote
        session = None
        if sk is not None:
            session = ad.session_id(qp, comm_id)
            ad.store_session_key(session, sk)
        n0 = os.urandom(layers.NONCE_BASE_LEN)
        security = ad.security_for(qp, src_gid, remote_qpn, session, False, (remote_n0, n0), remote_psn)
        mine = layers.IbsecPrivateData(secmode=qp.mode, n0=n0)
        what = f"from {src_gid} QP {remote_qpn:#x} on QP {qp.qpn:#x} (mode {qp.mode}, {qp.scope.value})"
        if service is Service.RC:
            ad.connected(qp, src_gid, remote_qpn, security, view.src_mac)
            qp.comm_ids = (int.from_bytes(os.urandom(4), "big"), comm_id)
            rep = layers.CmRep(
                local_comm_id=qp.comm_ids[0],
                remote_comm_id=comm_id,
                local_qpn=qp.qpn,
                starting_psn=qp.next_psn & PSN_MASK,
                local_ca_guid=ad.guid,
                private_data=mine,
            )
            log.info("accepted RC %s", what)
            return self._mad(layers.CmAttr.REP, rep)
        peer = ad.add_ud_peer(qp, src_gid, remote_qpn, remote_qkey, security, view.src_mac)
        extra = UD_EXTRA.pack(qp.qpn, qp.qkey, peer.next_psn & PSN_MASK)
        log.info("resolved UD %s", what)
        return self._mad(
            layers.CmAttr.SIDR_REP,
            layers.CmSidrRep(
                request_id=comm_id,
                status=0,
                qpn=qp.qpn,
                qkey=qp.qkey,
                service_id=body.service_id,
                private_data=(bytes(mine) + extra).ljust(136, b"\0"),
            ),
        )

    def _local_qp(
        self, service: Service, pkey: int, mode: int, scope: Scope, wanted: int
    ) -> tuple[bool, QueuePair]:
        """(created, QP): the QP a request lands on, a new one, or for UD an existing QP the requester
        named."""
        if service is Service.UD and wanted:
            with self.adapter._lock:
                qp = self.adapter.qps.get(wanted)
            if qp is None or qp.service is not Service.UD or qp.mode != mode or qp.scope is not scope:
                raise Refused(f"QP {wanted:#x} is not a UD QP with mode {mode} and {scope.value} keys")
            return False, qp
        return True, self.adapter.create_qp(service, pkey, mode, scope, pd=self.adapter.accept_pd(pkey))

    def disconnect(self, qp: QueuePair, timeout: float) -> bool:
        """DREQ to the peer of an RC QP, wait for DREP (retried), then destroy the QP either way.

        Returns whether the peer confirmed. Destroying forgets the QP and its session key.
        """
        if qp.service is not Service.RC or qp.comm_ids is None or qp.remote_gid is None:
            self.adapter.destroy_qp(qp)
            return False
        local, remote = qp.comm_ids
        pending = Pending(qp, qp.remote_gid, b"", None)
        with self._lock:
            self._pending[local] = pending
        dreq = layers.CmDreq(local_comm_id=local, remote_comm_id=remote, remote_qpn_eecn=qp.remote_qpn or 0)
        frame = self.adapter.builder.mad_frame(qp.remote_gid, qp.partition.pkey,
                                               bytes(self._mad(layers.CmAttr.DREQ, dreq)), qp.remote_mac)
        try:
            for _ in range(CM_RETRIES):
                self.adapter.transmit(frame)
                if pending.done.wait(timeout / CM_RETRIES):
                    break
        finally:
            with self._lock:
                self._pending.pop(local, None)
            self.adapter.destroy_qp(qp)
        return pending.done.is_set()

    def _on_disconnect(self, src_gid: str, view: frames.View, body: Packet) -> Outcome:
        """DREQ: destroy the QP it names (if it is still there) and answer DREP in any case (IBA: the peer
        may be retrying a DREQ whose DREP was lost), to the MAC the DREQ came from."""
        ad = self.adapter
        qp = self._connection(src_gid, body.remote_comm_id)
        if qp is not None:
            ad.destroy_qp(qp)
        drep = layers.CmDrep(local_comm_id=body.remote_comm_id, remote_comm_id=body.local_comm_id)
        ad.transmit(ad.builder.mad_frame(src_gid, self._reply_pkey(view),
                                         bytes(self._mad(layers.CmAttr.DREP, drep)), view.src_mac))
        return Taken.CM if qp is not None else Drop.CM_STALE

    def _reply_pkey(self, view: frames.View) -> int:
        """The P_Key of a reply: this port's own entry of the partition the request came in. A port sends
        only P_Keys of its table (a valid-list switch port drops anything else), and a full member
        answering a limited one must answer as a full member: limited to limited does not match."""
        partition = self.adapter.partition(view.pkey)
        return partition.pkey if partition is not None else view.pkey

    @staticmethod
    def _sk_owner(initiator_gid: str, initiator_qpn: int, target_gid: str) -> tuple[int, int, int]:
        """Owner ids a session key is wrapped with: who asked, from which QP, and whom."""
        return (
            int(ipaddress.IPv6Address(initiator_gid)),
            initiator_qpn,
            int(ipaddress.IPv6Address(target_gid)),
        )

    @staticmethod
    def _mad(attr: layers.CmAttr, body: Packet) -> Packet:
        tid = int.from_bytes(os.urandom(8), "big")
        return (
            layers.MAD(
                mgmt_class=layers.MgmtClass.CM,
                method=layers.Method.SEND,
                attribute_id=attr,
                transaction_id=tid,
            )
            / body
        )


def _guid(gid: str) -> int:
    return int(ipaddress.IPv6Address(gid)) & ((1 << 64) - 1)
