"""Connection management on QP1 (IBA chapter 12) carrying the keys of seed 000 section 5.1.5.

RC: the active side sends REQ with its QPN, starting PSN, security mode, its random contribution to the
nonce bases and, for session scope, a fresh session key SK wrapped under CA_SK_ij (the key it shares with
the passive CA); the passive side unwraps it, creates a QP, answers REP with its QPN, PSN and contribution;
the active side confirms with RTU. UD: SIDR_REQ / SIDR_REP carry the same, plus (in our PrivateData) the
requester's QPN, Q_Key and PSN, because both ends keep a key and a replay window per remote UD QP.
Refusals (unknown partition, a downgrade to mode 0 in a secure partition, a key that does not unwrap, no
pairwise key, a limit) are answered with REJ (or SIDR_REP status 2) and logged with the reason, never with
key bytes.

Authentication (secure connections, mode 1-4): every CM MAD carries the ``ibsec.mad_auth`` trailer. The
request, its REP / SIDR_REP / REJ are sealed under the *request key*, derived from the key the scope needs
anyway (P_SK for partition and derived scope, CA_SK_ij for session scope), so a keyless stranger can
neither open a secure connection nor answer one. RTU, DREQ and DREP are sealed under the *connection's CM
key*, derived from the connection's key and both nonce contributions, so they are this connection's own:
a DREQ forged from communication ids sniffed off a REP, or replayed from an earlier incarnation, fails and
is counted ``bad_auth``, and the connection survives. Mode-0 connections have no key: their CM is open.

Key scope travels in the ServiceID's low byte (``IBSEC_SERVICE_ID | scope``); the QPN a UD requester
wants resolved (0: a new QP) in bits 8-31.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import struct
import threading
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ibsec import cmwire, keys, layers, mad_auth
from ibsec.cmwire import IBSEC_SERVICE_ID

from .admission import OverLimit
from .counters import Drop, Outcome, Taken
from .keyring import Keyring, MissingKey
from .qp import PSN_MASK, QPN_MAX, AdapterError, QueuePair, Scope, Service
from .traps import RateLimiter

if TYPE_CHECKING:
    from ibsec import rocev2

    from .adapter import Adapter

log = logging.getLogger("ibsec.agent.cm")

SCOPE_CODES = {Scope.PARTITION: 0, Scope.SESSION: 1, Scope.DERIVED: 2}
SCOPES = {code: scope for scope, code in SCOPE_CODES.items()}
REJ_CONSUMER = 28  # IBA 12.6.7.2: Consumer Reject
REJ_NO_QP = 1  # IBA 12.6.7.2: No QP available
SIDR_REJECTED = 2
CM_RETRIES = 3
UD_EXTRA = struct.Struct("!III")  # after IbsecPrivateData in SIDR PrivateData: QPN, Q_Key, start PSN
PRIVATE_LEN = cmwire.PRIVATE.size
REQUEST_LABEL = b"ibsec CM request"
CONNECTION_LABEL = b"ibsec CM connection"


class Refused(Exception):
    """The passive side refuses a connection; the message goes to the log, the peer gets a REJ."""


@dataclass
class Pending:
    """An active connection attempt waiting for REP / SIDR_REP, or a DREQ waiting for its DREP."""

    qp: QueuePair
    remote_gid: str
    n0: bytes
    session: tuple[int, int] | None  # session key cache id of the session key, if any
    auth: bytes | None = field(default=None, repr=False)  # the key the answer must be sealed under
    done: threading.Event = field(default_factory=threading.Event)
    reply: cmwire.Message | None = None
    error: str | None = None
    mac: bytes = b""  # where the reply came from: the peer's frames go there


@dataclass(frozen=True)
class Request:
    """What a REQ / SIDR_REQ asks for, read from its fields (not yet checked)."""

    service: Service
    comm_id: int
    pkey: int
    mode: int
    scope: Scope | None  # None: not our service id, or an unknown scope
    private: cmwire.Private
    remote: tuple[int, int, int]  # the requester's QPN, start PSN and Q_Key (RC: 0)
    wanted: int  # UD: the QP the requester wants resolved (0: a new one)


class ConnectionManager:
    """The CM agent of one port: active connects, passive accepts, duplicate REQs answered again."""

    def __init__(self, adapter: Adapter) -> None:
        self.adapter = adapter
        self._pending: dict[int, Pending] = {}
        self._accepted: dict[tuple[str, int], bytes] = {}  # (peer GID, its comm/request id) -> our reply
        self._lock = threading.Lock()
        self._log_limiter = RateLimiter(window=1.0)  # a flood of refused requests is not a flood of lines

    # ------------------------------------------------------------------ keys of the CM itself

    def request_key(self, mode: int, scope: Scope, pkey: int, peer_gid: str) -> bytes | None:
        """The key a request in ``mode``/``scope`` to or from ``peer_gid`` is sealed under (see
        :func:`request_key`)."""
        return request_key(self.adapter.keyring, mode, scope, pkey, peer_gid)

    def _connection_key(self, qp: QueuePair, n0: tuple[bytes, bytes]) -> bytes | None:
        """The CM key of a connection (RTU, DREQ, DREP): from its key and both nonce contributions
        (requester's, responder's), so it is this connection's and this incarnation's alone."""
        if not qp.mode or qp.security is None:
            return None
        key = self.adapter.key_of(qp.security)
        assert key is not None
        return keys.prf(key, CONNECTION_LABEL + n0[0] + n0[1])

    def _payload(self, message: cmwire.Message, key: bytes | None) -> bytes:
        """The UD payload of a CM MAD: the 256 bytes, sealed with a trailer when there is a key."""
        mad = cmwire.write(replace(message, tid=int.from_bytes(os.urandom(8), "big")))
        return mad if key is None else mad_auth.seal(key, mad, self.adapter.gid)

    @staticmethod
    def _authentic(payload: bytes, key: bytes, view: rocev2.View) -> bool:
        try:
            mad_auth.verify(key, payload, view.src_gid)
        except mad_auth.MadAuthError:
            return False
        return True

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
        """Connect a QP to ``remote_gid``, wait for the handshake; AdapterError on REJ or timeout. A QP
        made for this attempt goes away again if it fails."""
        remote_gid = str(ipaddress.IPv6Address(remote_gid))
        ad = self.adapter
        qp = ad.qp(qpn) if qpn is not None else ad.create_qp(service, pkey, mode, scope, pd=pd)
        try:
            pending, comm_id = self._request(qp, remote_gid, service, remote_qpn, timeout)
            if pending.error is not None:
                raise AdapterError(f"connection to {remote_gid} refused: {pending.error}")
            if pending.reply is None:
                raise AdapterError(f"no CM reply from {remote_gid} within {timeout:.1f}s")
            self._finish_active(pending, comm_id, service)
        except BaseException:
            if qpn is None:
                ad.destroy_qp(qp)
            raise
        return qp

    def _request(
        self, qp: QueuePair, remote_gid: str, service: Service, remote_qpn: int | None, timeout: float
    ) -> tuple[Pending, int]:
        """Send REQ / SIDR_REQ (retried) and wait for the answer."""
        ad = self.adapter
        comm_id = int.from_bytes(os.urandom(4), "big")
        n0 = os.urandom(layers.NONCE_BASE_LEN)
        auth = self.request_key(qp.mode, qp.scope, qp.partition.pkey, remote_gid)
        session = None
        wrapped = bytes(keys.WRAPPED_KEY_LEN)
        if qp.mode and qp.scope is Scope.SESSION:
            sk = keys.Key.generate(keys.KeyType.SK, _sk_owner(ad.gid, qp.qpn, remote_gid))
            wrapped = keys.wrap_key(ad.keyring.pairwise_key(_guid(remote_gid)), sk)
            session = ad.session_id(qp, comm_id)
            ad.store_session_key(session, sk)
        private = cmwire.pack_private(qp.mode, n0, wrapped)
        service_id = IBSEC_SERVICE_ID | SCOPE_CODES[qp.scope]
        if service is Service.RC:
            message = cmwire.Message(
                layers.CmAttr.REQ,
                local_comm_id=comm_id,
                service_id=service_id,
                local_ca_guid=ad.guid,
                qpn=qp.qpn,
                psn=qp.next_psn & PSN_MASK,
                pkey=qp.partition.pkey,
                local_lid=ad.config.lid,
                local_gid=ad.gid_bytes,
                remote_gid=ipaddress.IPv6Address(remote_gid).packed,
                private=private,
            )
        else:
            message = cmwire.Message(
                layers.CmAttr.SIDR_REQ,
                local_comm_id=comm_id,
                pkey=qp.partition.pkey,
                service_id=service_id | ((remote_qpn or 0) << 8),
                private=private + UD_EXTRA.pack(qp.qpn, qp.qkey, qp.next_psn & PSN_MASK),
            )
        pending = Pending(qp, remote_gid, n0, session, auth)
        frame = ad.builder.mad_frame(remote_gid, qp.partition.pkey, self._payload(message, auth))
        self._exchange(comm_id, pending, frame, timeout)
        return pending, comm_id

    def _exchange(self, comm_id: int, pending: Pending, frame: bytes, timeout: float) -> None:
        """Send ``frame`` up to CM_RETRIES times until the answer to ``comm_id`` arrives."""
        with self._lock:
            self._pending[comm_id] = pending
        try:
            for _ in range(CM_RETRIES):
                self.adapter.transmit(frame)
                if pending.done.wait(timeout / CM_RETRIES):
                    break
        finally:
            with self._lock:
                self._pending.pop(comm_id, None)

    def _finish_active(self, pending: Pending, comm_id: int, service: Service) -> None:
        ad, qp, reply = self.adapter, pending.qp, pending.reply
        assert reply is not None
        n0, gid = (pending.n0, cmwire.private(reply.private).n0), pending.remote_gid
        if service is Service.RC:
            security = ad.security_for(qp, gid, reply.qpn, pending.session, True, n0, reply.psn)
            ad.connected(qp, gid, reply.qpn, security, pending.mac)
            qp.comm_ids = (comm_id, reply.local_comm_id)
            qp.cm_key = self._connection_key(qp, n0)
            rtu = cmwire.Message(layers.CmAttr.RTU, local_comm_id=comm_id, remote_comm_id=reply.local_comm_id)
            payload = self._payload(rtu, qp.cm_key)
            ad.transmit(ad.builder.mad_frame(gid, qp.partition.pkey, payload, pending.mac))
        else:
            remote_psn = UD_EXTRA.unpack_from(reply.private, PRIVATE_LEN)[2]
            security = ad.security_for(qp, gid, reply.qpn, pending.session, True, n0, remote_psn)
            ad.add_ud_peer(qp, gid, reply.qpn, reply.qkey, security, pending.mac)

    # ------------------------------------------------------------------ receiving CM MADs

    def receive(self, view: rocev2.View, payload: bytes) -> Outcome:
        """A CM MAD arrived on QP1 (``payload``: the MAD as received, with its trailer if any)."""
        message = cmwire.read(payload)
        if message is None or len(payload) not in (layers.MAD_LEN, layers.MAD_LEN + mad_auth.MAD_AUTH_LEN):
            return Drop.MALFORMED
        src_gid = str(ipaddress.IPv6Address(view.src_gid))
        attr = message.attr
        if attr in (layers.CmAttr.REQ, layers.CmAttr.SIDR_REQ):
            return self._on_request(src_gid, view, payload, _request_of(message))
        if attr == layers.CmAttr.RTU:
            return self._on_rtu(src_gid, view, payload, message)
        if attr == layers.CmAttr.DREQ:
            return self._on_disconnect(src_gid, view, payload, message)
        error = None
        if attr == layers.CmAttr.REJ:
            error = f"REJ reason {message.status}"
        elif attr == layers.CmAttr.SIDR_REP and message.status:
            error = f"SIDR status {message.status}"
        answered = message.local_comm_id if attr == layers.CmAttr.SIDR_REP else message.remote_comm_id
        return self._answer(src_gid, view, payload, answered, message, error)

    def _answer(
        self, src_gid: str, view: rocev2.View, payload: bytes, comm_id: int, reply: cmwire.Message,
        error: str | None,
    ) -> Outcome:
        """A REP, SIDR_REP, REJ or DREP for one of our requests, from the host we asked (else stale),
        sealed under the key the request was (else it is not the peer's)."""
        with self._lock:
            pending = self._pending.get(comm_id)
        if pending is None or pending.remote_gid != src_gid or pending.done.is_set():
            return Drop.CM_STALE
        if pending.auth is not None and not self._authentic(payload, pending.auth, view):
            return Drop.BAD_AUTH
        pending.reply, pending.error, pending.mac = reply, error, view.src_mac
        pending.done.set()
        return Taken.CM

    def _connection(self, src_gid: str, local_comm_id: int) -> QueuePair | None:
        """Our RC QP whose CM communication id is ``local_comm_id`` and whose peer is ``src_gid``."""
        return next((q for q in self.adapter.list_qps() if q.comm_ids is not None
                     and q.comm_ids[0] == local_comm_id and q.remote_gid == src_gid), None)

    def _on_rtu(self, src_gid: str, view: rocev2.View, payload: bytes, rtu: cmwire.Message) -> Outcome:
        """RTU: the active side confirms a connection we accepted (sealed under its CM key if secure)."""
        qp = self._connection(src_gid, rtu.remote_comm_id)
        if qp is None or qp.comm_ids is None or qp.comm_ids[1] != rtu.local_comm_id:
            return Drop.CM_STALE
        if qp.cm_key is not None and not self._authentic(payload, qp.cm_key, view):
            return Drop.BAD_AUTH
        self.adapter.admission.established(qp.qpn)
        self.adapter.counters.bump("cm_rtu")
        return Taken.CM

    def _on_request(self, src_gid: str, view: rocev2.View, payload: bytes, request: Request) -> Outcome:
        """REQ or SIDR_REQ: a secure one must be sealed under its request key (else dropped as
        ``bad_auth``, unanswered); then answered with REP / SIDR_REP, or refused (REJ / SIDR_REP status
        2, and no state kept). Answers go to the MAC the request came from."""
        ad = self.adapter
        try:
            auth = self._request_auth(src_gid, request)
        except MissingKey as exc:
            return self._refuse(src_gid, view, request, exc, None)
        if auth is not None and not self._authentic(payload, auth, view):
            return Drop.BAD_AUTH
        with self._lock:
            earlier = self._accepted.get((src_gid, request.comm_id))
        if earlier is not None:  # our reply was lost and the peer retried: answer the same again
            ad.transmit(earlier)
            return Taken.CM
        try:
            reply = self._accept(src_gid, view, request)
        except OverLimit as exc:
            self._refuse(src_gid, view, request, exc, auth)
            return Drop.CM_LIMIT
        except (Refused, MissingKey, keys.KeyWrapError, AdapterError) as exc:
            return self._refuse(src_gid, view, request, exc, auth)
        frame = self._reply_frame(src_gid, view, self._payload(reply, auth))
        with self._lock:
            self._accepted[(src_gid, request.comm_id)] = frame
            if len(self._accepted) > 4096:
                self._accepted.pop(next(iter(self._accepted)))
        ad.transmit(frame)
        return Taken.CM

    def _request_auth(self, src_gid: str, request: Request) -> bytes | None:
        """The key a request must be sealed under: None for mode 0 and for requests the checks refuse
        anyway (an unknown mode or scope)."""
        if request.scope is None or request.mode not in range(1, 5):
            return None
        return self.request_key(request.mode, request.scope, request.pkey, src_gid)

    def _refuse(
        self, src_gid: str, view: rocev2.View, request: Request, exc: Exception, auth: bytes | None
    ) -> Outcome:
        if self._log_limiter.allow(type(exc).__name__):
            what = "REQ" if request.service is Service.RC else "SIDR_REQ"
            log.warning("refused %s from %s: %s", what, src_gid, exc)
        if request.service is Service.RC:
            reason = REJ_NO_QP if isinstance(exc, OverLimit) else REJ_CONSUMER
            answer = cmwire.Message(layers.CmAttr.REJ, remote_comm_id=request.comm_id, status=reason)
        else:
            answer = cmwire.Message(layers.CmAttr.SIDR_REP, local_comm_id=request.comm_id,
                                    status=SIDR_REJECTED)
        payload = self._payload(answer, auth)
        self.adapter.transmit(self._reply_frame(src_gid, view, payload))
        return Drop.CM_REFUSED

    def _accept(self, src_gid: str, view: rocev2.View, request: Request) -> cmwire.Message:
        """Check a request completely, then create (or pick) the QP; anything that fails after the QP
        exists takes it away again, so a refused request leaves no QP, connection or key behind."""
        ad = self.adapter
        partition = ad.partition(request.pkey)
        if partition is None:
            raise Refused(f"P_Key {request.pkey:#06x} not in the P_Key table")
        if request.scope is None:
            raise Refused("unknown service id")
        mode, scope = request.mode, request.scope
        if mode not in range(5) or (partition.mode and not mode):
            raise Refused(f"security mode {mode} not acceptable in partition {partition.pkey:#06x}")
        remote = request.remote
        remote_qpn, remote_psn, _ = remote
        if not layers.GSI_QPN < remote_qpn <= QPN_MAX or remote_psn > PSN_MASK:
            raise Refused(f"requester QPN {remote_qpn:#x} or start PSN {remote_psn:#x} out of range")
        sk = None
        if mode and scope is Scope.SESSION:
            kek = ad.keyring.pairwise_key(_guid(src_gid))
            sk = keys.unwrap_key(kek, request.private.wrapped_key, keys.KeyType.SK,
                                 _sk_owner(src_gid, remote_qpn, ad.gid))
        keyless = not mode
        if not (request.service is Service.UD and request.wanted):  # it takes a new QP
            ad.admission.check(src_gid, view.src_mac, request.pkey, keyless)
        created, qp = self._local_qp(request)
        try:
            reply = self._accepted_reply(src_gid, view, request, qp, sk)
        except BaseException:
            if created:
                ad.destroy_qp(qp)
            raise
        if created:
            ad.admission.accepted(qp.qpn, src_gid, view.src_mac, request.pkey, keyless)
        return reply

    def _accepted_reply(
        self, src_gid: str, view: rocev2.View, request: Request, qp: QueuePair, sk: keys.Key | None
    ) -> cmwire.Message:
        """Key, connect and answer an accepted request on ``qp``: REP or SIDR_REP."""
        ad = self.adapter
        remote_qpn, remote_psn, remote_qkey = request.remote
        session = None
        if sk is not None:
            session = ad.session_id(qp, request.comm_id)
            ad.store_session_key(session, sk)
        n0 = os.urandom(layers.NONCE_BASE_LEN)
        contributions = (request.private.n0, n0)
        security = ad.security_for(qp, src_gid, remote_qpn, session, False, contributions, remote_psn)
        mine = cmwire.pack_private(qp.mode, n0)
        what = f"from {src_gid} QP {remote_qpn:#x} on QP {qp.qpn:#x} (mode {qp.mode}, {qp.scope.value})"
        if request.service is Service.RC:
            ad.connected(qp, src_gid, remote_qpn, security, view.src_mac)
            qp.comm_ids = (int.from_bytes(os.urandom(4), "big"), request.comm_id)
            qp.cm_key = self._connection_key(qp, contributions)
            log.info("accepted RC %s", what)
            return cmwire.Message(layers.CmAttr.REP, local_comm_id=qp.comm_ids[0],
                                  remote_comm_id=request.comm_id, qpn=qp.qpn, psn=qp.next_psn & PSN_MASK,
                                  local_ca_guid=ad.guid, private=mine)
        peer = ad.add_ud_peer(qp, src_gid, remote_qpn, remote_qkey, security, view.src_mac)
        log.info("resolved UD %s", what)
        return cmwire.Message(
            layers.CmAttr.SIDR_REP,
            local_comm_id=request.comm_id,
            qpn=qp.qpn,
            qkey=qp.qkey,
            service_id=IBSEC_SERVICE_ID | SCOPE_CODES[qp.scope] | (request.wanted << 8),
            private=mine + UD_EXTRA.pack(qp.qpn, qp.qkey, peer.next_psn & PSN_MASK),
        )

    def _local_qp(self, request: Request) -> tuple[bool, QueuePair]:
        """(created, QP): the QP a request lands on, a new one, or for UD an existing QP the requester
        named."""
        ad = self.adapter
        mode, scope = request.mode, request.scope
        assert scope is not None
        if request.service is Service.UD and request.wanted:
            qp = ad.find_qp(request.wanted)
            if qp is None or qp.service is not Service.UD or qp.mode != mode or qp.scope is not scope:
                raise Refused(f"QP {request.wanted:#x} is not a UD QP of mode {mode}, {scope.value} keys")
            return False, qp
        return True, ad.create_qp(request.service, request.pkey, mode, scope, pd=ad.accept_pd(request.pkey))

    # ------------------------------------------------------------------ disconnecting

    def disconnect(self, qp: QueuePair, timeout: float) -> bool:
        """DREQ to the peer of an RC QP, wait for DREP (retried), then destroy the QP either way.

        Returns whether the peer confirmed. Destroying forgets the QP and its session key.
        """
        if qp.service is not Service.RC or qp.comm_ids is None or qp.remote_gid is None:
            self.adapter.destroy_qp(qp)
            return False
        local, remote = qp.comm_ids
        pending = Pending(qp, qp.remote_gid, b"", None, qp.cm_key)
        dreq = cmwire.Message(layers.CmAttr.DREQ, local_comm_id=local, remote_comm_id=remote,
                              qpn=qp.remote_qpn or 0)
        payload = self._payload(dreq, qp.cm_key)
        frame = self.adapter.builder.mad_frame(qp.remote_gid, qp.partition.pkey, payload, qp.remote_mac)
        try:
            self._exchange(local, pending, frame, timeout)
        finally:
            self.adapter.destroy_qp(qp)
        return pending.done.is_set()

    def _on_disconnect(
        self, src_gid: str, view: rocev2.View, payload: bytes, dreq: cmwire.Message
    ) -> Outcome:
        """DREQ: destroy the QP it names, if the DREQ is sealed under that connection's CM key (a
        secure connection survives anything else), and answer DREP; for a connection we do not have, an
        open DREP too (IBA: the peer may be retrying a DREQ whose DREP was lost). To the DREQ's MAC."""
        ad = self.adapter
        qp = self._connection(src_gid, dreq.remote_comm_id)
        key = qp.cm_key if qp is not None else None
        if key is not None and not self._authentic(payload, key, view):
            return Drop.BAD_AUTH
        if qp is not None:
            ad.destroy_qp(qp)
        drep = cmwire.Message(layers.CmAttr.DREP, local_comm_id=dreq.remote_comm_id,
                              remote_comm_id=dreq.local_comm_id)
        answer = self._payload(drep, key)
        ad.transmit(self._reply_frame(src_gid, view, answer))
        return Taken.CM if qp is not None else Drop.CM_STALE

    def _reply_frame(self, src_gid: str, view: rocev2.View, payload: bytes) -> bytes:
        """The frame answering ``view``: to the MAC it came from, with this port's own entry of the
        partition it came in as P_Key (a port sends only P_Keys of its table, and a full member answering
        a limited one must answer as a full member: limited to limited does not match)."""
        partition = self.adapter.partition(view.pkey)
        pkey = partition.pkey if partition is not None else view.pkey
        return self.adapter.builder.mad_frame(src_gid, pkey, payload, view.src_mac)


def request_key(ring: Keyring, mode: int, scope: Scope, pkey: int, peer_gid: str) -> bytes | None:
    """The key a request in ``mode``/``scope`` and its answers are sealed under (None in mode 0): derived
    from P_SK (partition, derived scope) or CA_SK_ij (session scope). MissingKey if ``ring`` lacks it."""
    if not mode:
        return None
    base = ring.pairwise_key(_guid(peer_gid)) if scope is Scope.SESSION else ring.partition_key(pkey)
    return keys.kdf_counter(base, REQUEST_LABEL, b"", 16)


def _request_of(message: cmwire.Message) -> Request:
    """The fields of a REQ or SIDR_REQ the passive side decides on (SIDR's PrivateData carries the
    requester's QPN, Q_Key and PSN after ours, 32 bits each: checked later)."""
    ours = message.service_id & ~0xFFFFFFFF == IBSEC_SERVICE_ID
    scope = SCOPES.get(message.service_id & 0xFF) if ours else None
    private = cmwire.private(message.private)
    if message.attr == layers.CmAttr.REQ:
        return Request(Service.RC, message.local_comm_id, message.pkey, private.mode, scope, private,
                       (message.qpn, message.psn, 0), 0)
    qpn, qkey, psn = UD_EXTRA.unpack_from(message.private, PRIVATE_LEN)
    return Request(Service.UD, message.local_comm_id, message.pkey, private.mode, scope, private,
                   (qpn, psn, qkey), (message.service_id >> 8) & 0xFFFFFF)


def _sk_owner(initiator_gid: str, initiator_qpn: int, target_gid: str) -> tuple[int, int, int]:
    """Owner ids a session key is wrapped with: who asked, from which QP, and whom."""
    return (int(ipaddress.IPv6Address(initiator_gid)), initiator_qpn, int(ipaddress.IPv6Address(target_gid)))


def _guid(gid: str) -> int:
    return int(ipaddress.IPv6Address(gid)) & ((1 << 64) - 1)
