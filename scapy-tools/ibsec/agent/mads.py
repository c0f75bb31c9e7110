"""QP1: management datagrams to and from this port (DESIGN section 4).

In: CM MADs go to :mod:`.cm`; the SM's vendor MADs (key batch, single key, P_Key table) are accepted only
with a valid authentication trailer under this CA's key CA_SK and a TransactionID newer than the last one
(``ibsec.mad_auth``), and are answered with an authenticated GetResp (key bytes zeroed). A key batch
(:mod:`ibsec.keybatch`) is taken whole or refused whole (``key_batches_refused``).
Out: traps 257 / 258 and the security trap, authenticated under CA_SK, addressed to the SM's GID, at most
one per suppression window per (source, key) (:class:`.traps.RateLimiter`); and, from start until the
SM's P_Key table arrives (the last thing it provisions), the port-up notice with this start's random boot
id (at 0, 1, 3, 7, ... s, at most every 30 s), so an SM that provisioned an earlier start of this agent
does it again.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import threading
import time
from typing import TYPE_CHECKING

from scapy.layers.l2 import Ether
from scapy.packet import Packet

from ibsec import icrc, keybatch, keys, layers, mad_auth, rocev2
from ibsec.builder import mac_of

from .counters import Drop, Outcome, Taken
from .frames import MODES
from .qp import Partition, QueuePair

if TYPE_CHECKING:
    from ibsec.rocev2 import View

    from .adapter import Adapter

log = logging.getLogger("ibsec.agent.mads")

RECEIVING_PORT = 1  # the agent drives one port
HELLO_FIRST_GAP, HELLO_MAX_GAP = 1.0, 30.0  # seconds between port-up notices, doubling


class ManagementAgent:
    """Receives MADs on QP1 and sends this port's traps."""

    def __init__(self, adapter: Adapter) -> None:
        self.adapter = adapter
        self._tid_guard = mad_auth.TidReplayGuard()
        self._last_tid = 0
        self._lock = threading.Lock()
        self.sm_gid = adapter.config.sm_gid and str(ipaddress.IPv6Address(adapter.config.sm_gid))
        self.sm_mac = mac_of(self.sm_gid) if self.sm_gid else None  # learnt again from authentic SM MADs
        self.boot_id = int.from_bytes(os.urandom(8), "big")
        self.heard_from_sm = False
        self._hello_at = 0.0
        self._hello_gap = HELLO_FIRST_GAP

    # ------------------------------------------------------------------ receiving

    def receive(self, view: View) -> Outcome:
        """A frame for QP1: Q_Key, ICRC, then by management class; what became of it."""
        ad = self.adapter
        if view.deth is None or view.deth[0] != layers.GSI_QKEY:
            self.trap_bad_qkey(view)
            return Drop.BAD_QKEY
        if view.mode != 0:
            return Drop.BAD_MODE
        if not icrc.verify(view):
            return Drop.BAD_ICRC
        payload = view.data[view.headers_end : len(view.data) - rocev2.ICRC_LEN]
        if len(payload) < layers.MAD_LEN or payload[0] != layers.MAD_BASE_VERSION:
            return Drop.MALFORMED
        mgmt_class, response_bit = payload[1], payload[3] >> 7
        # Scapy dissects only what will be used, and vendor MADs only once authentic: a flood of
        # garbage or forged MADs costs a byte compare or one GCM check each, not a dissection.
        if mgmt_class == layers.MgmtClass.CM:
            return ad.cm.receive(view, payload)
        if mgmt_class == layers.MgmtClass.IBSEC_VENDOR and not response_bit:
            return self._vendor(view, payload)
        return Taken.MAD_IGNORED

    @staticmethod
    def _dissect(view: View) -> Packet | None:
        mad: Packet | None = Ether(view.data).getlayer(layers.MAD)
        return mad

    def _vendor(self, view: View, payload: bytes) -> Outcome:
        """Key distribution or P_Key table from the SM: authenticated, fresh, then applied and answered."""
        ad = self.adapter
        sender = str(ipaddress.IPv6Address(view.src_gid))
        ca_sk = ad.keyring.ca_sk
        if ca_sk is None or (self.sm_gid is not None and sender != self.sm_gid):
            return Drop.BAD_AUTH
        try:
            mad_auth.verify(ca_sk.material, payload, view.src_gid)
            self._tid_guard.accept(view.src_gid, layers.mad_tid(payload))
        except mad_auth.MadReplayError:
            return Drop.REPLAY
        except mad_auth.MadAuthError:
            return Drop.BAD_AUTH
        self.sm_mac = view.src_mac  # an authentic MAD from the SM: its frames come from there
        if int.from_bytes(payload[16:18], "big") == layers.VendorAttr.KEY_BATCH:
            return self._take_batch(view.src_gid, payload[: layers.MAD_LEN], ca_sk)
        mad = self._dissect(view)
        if mad is None:
            return Drop.MALFORMED
        body = mad.payload
        if isinstance(body, layers.KeyDistribution):
            status = self._take_key(body, ca_sk)
            body.wrapped_key = bytes(keys.WRAPPED_KEY_LEN)
        elif isinstance(body, layers.PKeyTable):
            status = self._take_pkeys(body)
        else:
            status = int(layers.MadStatus.UNSUPPORTED_METHOD_ATTR)
        response = layers.MAD(mgmt_class=mad.mgmt_class, method=layers.Method.GET, r=1, status=status,
                              transaction_id=mad.transaction_id, attribute_id=mad.attribute_id,
                              attribute_modifier=mad.attribute_modifier) / body.copy()
        self._send_authenticated(sender, bytes(response)[: layers.MAD_LEN], ca_sk)
        return Taken.MAD if status == layers.MadStatus.OK else Drop.MALFORMED

    def _take_batch(self, sender: bytes, mad: bytes, ca_sk: keys.Key) -> Outcome:
        """A key batch (authentic and fresh): unwrapped whole or refused whole, answered with one ACK that
        carries no key bytes. Bytes, not Scapy: a fabric's distribution is thousands of these."""
        header, body = mad[: keybatch.MAD_HEADER_LEN], mad[keybatch.MAD_HEADER_LEN:]
        try:
            batch = keybatch.open_batch(ca_sk, header, body, self.adapter.guid)
        except keybatch.KeyBatchError as err:
            self.adapter.counters.bump("key_batches_refused")
            log.warning("key batch from the SM refused: %s", err)
            status = int(layers.MadStatus.KEY_REJECTED)
        else:
            for key in batch:
                self.adapter.keyring.add(key)
            self.adapter.counters.bump("key_batches_received")
            self.adapter.counters.bump("keys_received", len(batch))
            if log.isEnabledFor(logging.INFO):  # a fabric's distribution is thousands of batches
                log.info("key batch received from the SM: %s", ", ".join(map(repr, batch)))
            status = int(layers.MadStatus.OK)
        tid = layers.mad_tid(header)
        ack = layers.vendor_header(layers.VendorAttr.KEY_BATCH, tid, response=True, status=status)
        self._send_authenticated(sender, ack + keybatch.ack_body(body), ca_sk)
        return Taken.MAD if status == layers.MadStatus.OK else Drop.MALFORMED

    def _take_key(self, body: Packet, ca_sk: keys.Key) -> int:
        try:
            key = keys.unwrap_key(
                ca_sk, bytes(body.wrapped_key), keys.KeyType(body.key_type), [int(o) for o in body.owners]
            )
        except (keys.IbsecKeyError, ValueError):
            self.adapter.counters.bump("keys_refused")
            return int(layers.MadStatus.KEY_REJECTED)
        self.adapter.keyring.add(key)
        self.adapter.counters.bump("keys_received")
        log.info("key received from the SM: %r", key)
        return int(layers.MadStatus.OK)

    def _take_pkeys(self, body: Packet) -> int:
        """The SM's P_Key table: each entry's mode becomes its partition's default for new QPs (the SM
        owns the partitions' modes); the key scope of partitions already known is kept. A reserved
        mode makes the whole table malformed: nothing of it is applied."""
        entries = list(zip(body.pkeys, body.secmodes, strict=True))
        if any(mode not in MODES for _, mode in entries):
            return int(layers.MadStatus.INVALID_ATTR_VALUE)
        table = []
        for pkey, mode in ((int(pk), int(m)) for pk, m in entries if pk & 0x7FFF):
            known = self.adapter.own_partition(pkey)
            table.append(Partition(pkey, mode, known.scope) if known else Partition(pkey, mode))
        self.adapter.set_partitions(table)
        self.heard_from_sm = True  # the table comes last: the SM has provisioned this start
        return int(layers.MadStatus.OK)

    # ------------------------------------------------------------------ traps

    def trap_bad_pkey(self, view: View) -> None:
        """Trap 257 for a packet whose P_Key is not in our table."""
        self._bad_key_trap(view, layers.TRAP_BAD_PKEY, view.pkey)

    def trap_bad_qkey(self, view: View) -> None:
        """Trap 258 for a UD packet whose Q_Key is not the QP's."""
        self._bad_key_trap(view, layers.TRAP_BAD_QKEY, view.deth[0] if view.deth else 0)

    def _bad_key_trap(self, view: View, number: int, key: int) -> None:
        src = str(ipaddress.IPv6Address(view.src_gid))
        if not self.adapter.trap_limiter.allow((number, src, key)):
            self.adapter.counters.bump("traps_suppressed")
            return
        notice = layers.bad_key_notice(
            number,
            lid=self.adapter.config.lid,
            gid=self.adapter.gid,
            key=key,
            src_gid=src,
            src_qp=view.deth[1] if view.deth else 0,
            dst_qp=view.dqpn,
            mf=view.mf,
            recv_port=RECEIVING_PORT,
        )
        self._send_trap(notice, f"trap {number}")

    def security_trap(self, qp: QueuePair, view: View, streak: int) -> None:
        """The vendor security trap: ``streak`` consecutive MAC failures on ``qp``."""
        src = str(ipaddress.IPv6Address(view.src_gid))
        if not self.adapter.trap_limiter.allow(("security", src, qp.qpn)):
            self.adapter.counters.bump("traps_suppressed")
            return
        details = layers.SecurityTrapDetails(
            lid=self.adapter.config.lid,
            qp=qp.qpn,
            mac_failures=streak,
            replays=self.adapter.counters.dropped(Drop.REPLAY) & 0xFFFFFFFF,
            pkey=qp.partition.pkey,
            secmode=qp.mode,
            key_retired=int(bool(qp.security and qp.security.retired)),
            peer_gid=src,
            peer_qp=view.deth[1] if view.deth else (qp.remote_qpn or 0),
        )
        notice = self._vendor_notice(layers.IBSEC_TRAP_SECURITY, layers.NoticeType.SECURITY, details, view.mf)
        self._send_trap(notice, "security trap")

    def tick(self, now: float) -> None:
        """Send the port-up notice when it is due, until the SM's P_Key table arrived."""
        if self.heard_from_sm or now < self._hello_at or self.sm_gid is None:
            return
        self._hello_at = now + self._hello_gap
        self._hello_gap = min(self._hello_gap * 2, HELLO_MAX_GAP)
        self.hello()

    def hello(self) -> None:
        """The port-up notice: this port is up and holds nothing from the SM (IBSEC_TRAP_PORT_UP)."""
        details = layers.PortUpDetails(lid=self.adapter.config.lid, boot_id=self.boot_id)
        notice = self._vendor_notice(layers.IBSEC_TRAP_PORT_UP, layers.NoticeType.INFO, details)
        self._send_trap(notice, "port-up notice", "hellos_sent")

    def _vendor_notice(self, device_id: int, kind: layers.NoticeType, details: Packet, mf: int = 0) -> Packet:
        """A notice of our vendor class (security trap, port-up) issued by this port."""
        return layers.Notice(
            is_generic=0,
            type=kind,
            vendor_id=layers.IBSEC_VENDOR_ID,
            device_id=device_id,
            issuer_lid=self.adapter.config.lid,
            data_details=details,
            issuer_gid=self.adapter.gid,
            recv_port=RECEIVING_PORT,
            mf=mf,
        )

    def _send_trap(self, notice: Packet, what: str, counter: str = "traps_sent") -> None:
        ad = self.adapter
        if self.sm_gid is None or ad.keyring.ca_sk is None:
            ad.counters.bump("traps_unsent")
            log.warning("%s not sent: %s", what, "no SM GID" if self.sm_gid is None else "no CA key")
            return
        tid = self._next_tid()
        self._send_authenticated(self.sm_gid, layers.trap_mad(notice, tid), ad.keyring.ca_sk)
        ad.counters.bump(counter)
        log.info("%s sent to the SM (TransactionID %#018x)", what, tid)

    def _send_authenticated(self, dst_gid: str | bytes, mad: bytes, key: keys.Key) -> None:
        payload = mad_auth.seal(key.material, mad, self.adapter.builder.gid)
        self.adapter.transmit(self.adapter.builder.mad_frame(dst_gid, 0xFFFF, payload, self.sm_mac))

    def _next_tid(self) -> int:
        """Strictly increasing TransactionIDs, also across restarts (the SM keeps the last per sender)."""
        with self._lock:
            self._last_tid = max(self._last_tid + 1, time.time_ns() & ((1 << 64) - 1))
            return self._last_tid
