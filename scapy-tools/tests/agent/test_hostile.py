"""Hostile frames against one adapter in-process (issue 14): CM messages from addresses that are not
MAC-derived, out-of-range fields, and what a refused frame may leave behind (nothing)."""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ibsec import addressing, cmwire, icrc, layers, mad_auth
from ibsec.agent.adapter import Adapter
from ibsec.agent.admission import Limits
from ibsec.agent.cm import UD_EXTRA
from ibsec.agent.counters import Drop
from ibsec.agent.memory import Access
from ibsec.agent.qp import RECV_QUEUE_DEPTH, Scope, Service, State
from ibsec.builder import Builder, gid_bytes
from ibsec.cmwire import IBSEC_SERVICE_ID
from ibsec.polling import poll_until
from scapy.layers.l2 import Ether
from scapy.packet import Packet

from .loopback import SECURE_PKEY, Loopback

ATTACKER_MAC = bytes.fromhex("02aa00000042")
RNG = random.Random(14)


@pytest.fixture
def loop(tmp_path: Path) -> Iterator[Loopback]:
    link = Loopback(tmp_path)
    yield link
    link.close()


def odd_gids(count: int) -> list[str]:
    """GIDs whose GUID is not a MAC-derived EUI-64 (no ff:fe in the middle), random otherwise."""
    found = []
    while len(found) < count:
        guid = RNG.getrandbits(64)
        if (guid >> 24) & 0xFFFF != 0xFFFE:
            found.append(addressing.make_gid(RNG.getrandbits(16), guid, site_local=RNG.random() < 0.5))
    return found


def cm(
    src_gid: str, dst_gid: str, body: Packet, attr: layers.CmAttr, pkey: int = 0xFFFF,
    key: bytes | None = None,
) -> bytes:
    """A CM MAD frame from ``src_gid`` at the attacker's MAC, sealed under ``key`` if given."""
    mad = bytes(layers.MAD(mgmt_class=layers.MgmtClass.CM, method=layers.Method.SEND, attribute_id=attr,
                           transaction_id=RNG.getrandbits(64)) / body)[: layers.MAD_LEN]
    payload = mad if key is None else mad_auth.seal(key, mad, src_gid)
    return Builder(ATTACKER_MAC, gid_bytes(src_gid)).mad_frame(dst_gid, pkey, payload)


def req(mode: int = 0, scope: Scope = Scope.PARTITION, pkey: int = 0xFFFF, qpn: int = 0x1234) -> layers.CmReq:
    private = layers.IbsecPrivateData(secmode=mode, n0=os.urandom(12), wrapped_key=os.urandom(64))
    return layers.CmReq(local_comm_id=RNG.getrandbits(32), service_id=IBSEC_SERVICE_ID | {
        Scope.PARTITION: 0, Scope.SESSION: 1, Scope.DERIVED: 2}[scope], local_qpn=qpn,
        starting_psn=RNG.getrandbits(24), partition_key=pkey, private_data=private)


def sidr(qpn: int, psn: int, mode: int = 0, wanted: int = 0) -> layers.CmSidrReq:
    private = bytes(layers.IbsecPrivateData(secmode=mode, n0=os.urandom(12)))
    private += UD_EXTRA.pack(qpn, RNG.getrandbits(32), psn)
    return layers.CmSidrReq(request_id=RNG.getrandbits(32), partition_key=0xFFFF,
                            service_id=IBSEC_SERVICE_ID | (wanted << 8),
                            private_data=private.ljust(216, b"\0"))


def sent_by(loop: Loopback, adapter: Adapter, since: int) -> list[bytes]:
    return [f for f in loop.frames[since:] if f[6:12] == adapter.config.mac]


def test_cm_from_gids_that_are_not_mac_derived_is_answered_at_the_frame_s_mac(loop: Loopback) -> None:
    victim = loop.adapters[1]
    loop.mute = True
    gids = odd_gids(15)  # 30 half-open connections from one MAC: within the per-source limit
    since = len(loop.frames)
    dreq = layers.CmDreq(local_comm_id=1, remote_comm_id=2)
    rtu = layers.CmRtu(local_comm_id=3, remote_comm_id=4)
    for gid in gids:
        victim.receive(cm(gid, victim.gid, req(), layers.CmAttr.REQ))  # mode 0 in 0xFFFF: accepted
        victim.receive(cm(gid, victim.gid, sidr(0x4321, 5), layers.CmAttr.SIDR_REQ))
        victim.receive(cm(gid, victim.gid, dreq, layers.CmAttr.DREQ))
        victim.receive(cm(gid, victim.gid, rtu, layers.CmAttr.RTU))
    counters = victim.counters.snapshot()
    assert counters["stats"].get("internal_errors", 0) == 0
    assert counters["taken"]["cm"] == 2 * len(gids)  # every REQ and SIDR_REQ answered
    assert counters["drops"]["cm_stale"] == 2 * len(gids)  # DREQ and RTU for connections that do not exist
    assert victim.counters.unaccounted() == 0
    answers = sent_by(loop, victim, since)
    assert len(answers) == 3 * len(gids)  # REP, SIDR_REP, DREP (as IBA wants for an unknown DREQ)
    assert {a[:6] for a in answers} == {ATTACKER_MAC}  # never a MAC computed from the claimed GID
    rc = [qp for qp in victim.list_qps() if qp.service is Service.RC]
    assert {qp.remote_mac for qp in rc} == {ATTACKER_MAC} and {qp.remote_gid for qp in rc} == set(gids)


@pytest.mark.parametrize("bad", [(1 << 24, 0), (0xFFFFFFFF, 0), (0x1234, 1 << 24), (0x1234, 0xFFFFFFFF),
                                 (0, 5), (1, 5)])
def test_a_sidr_request_with_fields_out_of_range_is_refused_and_leaves_nothing(
    loop: Loopback, bad: tuple[int, int]
) -> None:
    victim = loop.adapters[1]
    loop.mute = True
    qps_before, since = len(victim.qps), len(loop.frames)
    for gid in [loop.adapters[0].gid, *odd_gids(3)]:
        victim.receive(cm(gid, victim.gid, sidr(*bad), layers.CmAttr.SIDR_REQ))
    assert victim.counters.snapshot()["drops"]["cm_refused"] == 4
    assert victim.counters.stat("internal_errors") == 0 and len(victim.qps) == qps_before
    refusals = [Ether(f)[layers.CmSidrRep] for f in sent_by(loop, victim, since)]
    assert [r.status for r in refusals] == [2] * 4


@pytest.mark.parametrize("how", ["key does not unwrap", "no pairwise key", "no partition key"])
def test_a_refused_request_leaves_no_qp_connection_or_key(loop: Loopback, how: str) -> None:
    victim = loop.adapters[1]
    loop.mute = True
    if how == "no partition key":
        victim.keyring._partition.clear()
    stored = len(victim.skc)
    scope = Scope.SESSION if how != "no partition key" else Scope.DERIVED
    member = loop.adapters[0]  # the REQ is sealed as a member would: it is refused for what comes after
    key = member.cm.request_key(2, scope, SECURE_PKEY, victim.gid) if how == "key does not unwrap" else None
    for gid in ([member.gid] * 3 if how != "no pairwise key" else odd_gids(3)):
        victim.receive(cm(gid, victim.gid, req(2, scope, SECURE_PKEY), layers.CmAttr.REQ, SECURE_PKEY, key))
    assert victim.counters.snapshot()["drops"]["cm_refused"] == 3
    assert victim.qps == {} and len(victim.skc) == stored
    assert victim.counters.stat("internal_errors") == 0


def test_a_connect_that_fails_takes_its_qp_away(loop: Loopback) -> None:
    a = loop.adapters[0]
    loop.mute = True
    with pytest.raises(Exception, match="no CM reply"):
        a.cm.connect(loop.adapters[1].gid, Service.RC, SECURE_PKEY, 2, Scope.SESSION, 0.3)
    assert a.qps == {}


def restarted(loop: Loopback, index: int) -> Adapter:
    """The adapter ``index`` after a restart: same configuration and keys, nothing else remembered."""
    old = loop.adapters[index]
    new = Adapter(old.config, old._send)
    new.set_partitions(list(old.partitions.values()))
    loop.adapters[index] = new
    return new


@pytest.mark.parametrize(("mode", "scope"), [(1, Scope.SESSION), (2, Scope.SESSION), (2, Scope.PARTITION),
                                             (3, Scope.DERIVED), (4, Scope.PARTITION)])
def test_frames_of_an_earlier_incarnation_never_verify_even_on_the_same_qpn(
    loop: Loopback, monkeypatch: pytest.MonkeyPatch, mode: int, scope: Scope
) -> None:
    """Worst case of a replay across a restart: the replayed REQ lands on the very QPN of the earlier
    connection (as sequential QPNs made certain). Its frames still fail the MAC: the responder's fresh N0
    is in every nonce."""
    a, b = loop.adapters
    since = len(loop.frames)
    qp = a.cm.connect(b.gid, Service.RC, SECURE_PKEY, mode, scope, 2.0)
    for i in range(3):
        a.post_send(qp.qpn, f"message {i}".encode())
        assert b.wait_recv(qp.remote_qpn or 0, 2) == f"message {i}".encode()
    captured = [f for f in loop.frames[since:] if f[6:12] == a.config.mac]  # REQ, RTU, SENDs
    loop.mute = True
    victim = restarted(loop, 1)
    monkeypatch.setattr(victim, "_fresh_qpn", lambda: qp.remote_qpn)
    for frame in captured:
        victim.receive(frame)
    counters = victim.counters.snapshot()
    assert counters["taken"]["data"] == 0
    assert counters["drops"]["mac_failure"] == 1 and counters["drops"]["psn_sequence"] == 2  # RC: in order
    assert [q.qpn for q in victim.list_qps()] == [qp.remote_qpn]
    assert victim.wait_recv(qp.remote_qpn or 0, 0.2) is None


def test_qpns_start_psns_and_region_addresses_are_unpredictable(loop: Loopback) -> None:
    """What ReDMArk predicted: QPNs in sequence, regions at a fixed base plus a slot. Each is now drawn
    at random: consecutive values are not the previous one plus a constant, and no two repeat."""
    b = loop.adapters[1]
    qps = [b.create_qp(Service.RC) for _ in range(200)]
    regions = [b.reg_mr(4096) for _ in range(200)]
    for values in ([q.qpn for q in qps], [q.next_psn for q in qps], [r.addr for r in regions],
                   [r.r_key for r in regions]):
        steps = {later - earlier for earlier, later in zip(values, values[1:], strict=False)}
        assert len(set(values)) == len(values) and len(steps) > 150
    assert all(1 < q.qpn < 0xFFFFFF for q in qps)
    assert all(r.addr % 4096 == 0 for r in regions)


@pytest.mark.parametrize(("mode", "lands"), [(0, False), (1, True), (2, True), (3, True), (4, False)])
def test_a_region_for_authenticated_access_takes_writes_whose_mac_covers_the_data(
    loop: Loopback, mode: int, lands: bool
) -> None:
    a, b = loop.adapters
    region = b.reg_mr(64, SECURE_PKEY, access=Access.AUTHENTICATED)
    qp = a.cm.connect(b.gid, Service.RC, SECURE_PKEY, mode, Scope.SESSION, 2.0)
    a.post_write(qp.qpn, region.addr, region.r_key, b"data")
    assert a.wait_outstanding(qp.qpn, 0, 0.3) is lands
    assert region.read(region.addr, 4) == (b"data" if lands else bytes(4))
    assert b.counters.dropped(Drop.UNAUTHENTICATED_WRITE) == (0 if lands else 1)


@pytest.mark.parametrize("seal", ["none", "random trailer", "wrong key", "another peer's key"])
@pytest.mark.parametrize(("mode", "scope"), [(1, Scope.PARTITION), (2, Scope.SESSION), (3, Scope.DERIVED),
                                             (4, Scope.SESSION)])
def test_a_secure_request_not_sealed_under_its_request_key_gets_no_answer_and_leaves_nothing(
    loop: Loopback, seal: str, mode: int, scope: Scope
) -> None:
    a, b = loop.adapters
    loop.mute = True
    since = len(loop.frames)
    for _ in range(3):
        body = req(mode, scope, SECURE_PKEY)
        mad = bytes(layers.MAD(mgmt_class=layers.MgmtClass.CM, method=layers.Method.SEND,
                               attribute_id=layers.CmAttr.REQ) / body)[: layers.MAD_LEN]
        right = a.cm.request_key(mode, scope, SECURE_PKEY, b.gid)
        assert right is not None
        payload = {"none": mad, "random trailer": mad + os.urandom(mad_auth.MAD_AUTH_LEN),
                   "wrong key": mad_auth.seal(os.urandom(16), mad, a.gid),
                   "another peer's key": mad_auth.seal(right, mad, odd_gids(1)[0])}[seal]
        b.receive(Builder(a.config.mac, gid_bytes(a.gid)).mad_frame(b.gid, SECURE_PKEY, payload))
    assert b.counters.dropped(Drop.BAD_AUTH) == 3 and b.qps == {} and sent_by(loop, b, since) == []


def test_a_forged_rej_or_rep_cannot_decide_a_secure_connect(loop: Loopback) -> None:
    a, b = loop.adapters
    loop.mute = True
    since = len(loop.frames)
    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(
        a.cm.connect(b.gid, Service.RC, SECURE_PKEY, 2, Scope.SESSION, 5.0)))
    thread.start()
    assert poll_until(lambda: sent_by(loop, a, since), 5.0, interval=0.01)
    request = Ether(sent_by(loop, a, since)[0])[layers.CmReq]
    forged = [layers.CmRej(remote_comm_id=request.local_comm_id, reason=28),
              layers.CmRep(remote_comm_id=request.local_comm_id, local_qpn=0x4242, local_comm_id=7)]
    for body in forged:
        attr = layers.CmAttr.REJ if isinstance(body, layers.CmRej) else layers.CmAttr.REP
        a.receive(cm(b.gid, a.gid, body, attr, SECURE_PKEY))
    assert a.counters.dropped(Drop.BAD_AUTH) == 2
    b.receive(sent_by(loop, a, since)[0])  # the real REQ reaches b, b's REP reaches a
    a.receive(sent_by(loop, b, since)[0])
    thread.join(timeout=10)
    assert result and result[0].remote_qpn == b.list_qps()[0].qpn  # type: ignore[attr-defined]


def spoofed(frame: bytes, mac: bytes, gid: str) -> bytes:
    """``frame`` from another source MAC and GID (ICRC recomputed)."""
    out = bytearray(frame)
    out[6:12], out[22:38] = mac, gid_bytes(gid)
    return icrc.with_icrc(bytes(out))


@pytest.mark.parametrize(("limits", "macs"), [
    (Limits(half_open_timeout=0.5), "spoofed"),
    (Limits(half_open_timeout=0.5, keyless=300), "spoofed"),
    (Limits(half_open_timeout=0.5, half_open_per_source=8), "one"),
])
def test_a_keyless_req_flood_never_starves_a_member_and_half_open_connections_expire(
    tmp_path: Path, limits: Limits, macs: str
) -> None:
    """4,400 keyless REQs (random GIDs, random MACs or the attacker's one) in both partitions; a member
    of the secure partition, and one using the default partition with keys, connect in the middle."""
    link = Loopback(tmp_path, limits=limits)
    try:
        member, victim = link.adapters
        flood = []
        forger = Builder(ATTACKER_MAC, gid_bytes(odd_gids(1)[0]))
        for gid in odd_gids(4400):  # built with the codec test_cmwire checks against the layers: fast
            mac = bytes([2]) + os.urandom(5) if macs == "spoofed" else ATTACKER_MAC
            pkey = RNG.choice((0xFFFF, SECURE_PKEY))
            mad = cmwire.write(cmwire.Message(layers.CmAttr.REQ, local_comm_id=RNG.getrandbits(32),
                                              service_id=IBSEC_SERVICE_ID, qpn=RNG.randrange(2, 1 << 24),
                                              pkey=pkey, private=cmwire.pack_private(0, os.urandom(12))))
            flood.append(spoofed(forger.mad_frame(victim.gid, pkey, mad), mac, gid))
        for frame in flood[:2200]:
            link.inject(1, frame)
        connected = [member.cm.connect(victim.gid, Service.RC, pkey, 2, Scope.SESSION, 60.0)
                     for pkey in (SECURE_PKEY, 0xFFFF)]
        for frame in flood[2200:]:
            link.inject(1, frame)
        assert link.idle(1)
        drops = victim.counters.snapshot()["drops"]
        keyless = len(victim.qps) - len(connected)
        assert drops["cm_limit"] == 4400 - keyless and keyless <= min(limits.keyless, 2 * 512)
        if macs == "one":
            assert keyless == limits.half_open_per_source
        for qp in connected:
            member.post_send(qp.qpn, b"through the flood")
            assert victim.wait_recv(qp.remote_qpn or 0, 5) == b"through the flood"
        time.sleep(limits.half_open_timeout)
        victim.tick()
        assert sorted(victim.qps) == sorted(qp.remote_qpn for qp in connected)  # the half-open ones expired
        assert victim.counters.stat("half_open_expired") == keyless
    finally:
        link.close()


@pytest.mark.parametrize("size", [8, 3000])  # one packet per message, and FIRST/MIDDLE/LAST ones
def test_a_full_receive_queue_answers_rnr_nak_and_loses_no_message(tmp_path: Path, size: int) -> None:
    """4,200 SENDs to a QP whose application reads nothing until its 4,096-message queue is full: nothing
    more is ACKed, the sender waits per RNR NAK and retries, and every message arrives, in order."""
    link = Loopback(tmp_path, tick=0.005, mtu=1024, ack_timeout=0.2)  # a loaded machine: no false timeouts
    try:
        a, b = link.adapters
        qp = a.cm.connect(b.gid, Service.RC, SECURE_PKEY, 2, Scope.SESSION, 5.0)
        messages = [i.to_bytes(4, "big") * (size // 4) for i in range(4200)]
        sender = threading.Thread(target=lambda: [a.post_send(qp.qpn, m) for m in messages])
        sender.start()
        queue = b.qp(qp.remote_qpn or 0).recv_queue
        assert poll_until(lambda: len(queue) == RECV_QUEUE_DEPTH and a.counters.stat("rnr_naks_received"),
                          120, interval=0.01)
        assert len(queue) == RECV_QUEUE_DEPTH  # none more kept, none more ACKed
        received = [b.wait_recv(qp.remote_qpn or 0, 30) for _ in messages]
        sender.join(timeout=60)
        assert received == messages and a.wait_outstanding(qp.qpn, 0, 10) and qp.state is State.RTS
        sent, got = a.counters.snapshot(), b.counters.snapshot()
        assert got["drops"]["rnr"] >= 1 and got["stats"]["rnr_naks_sent"] == got["drops"]["rnr"]
        assert sent["taken"]["rnr_nak"] >= 1 and sent["stats"]["rnr_retries"] >= 1
        assert got["stats"]["rx_messages"] == len(messages)
    finally:
        link.close()


def test_rnr_retries_run_out_at_the_retry_count(tmp_path: Path) -> None:
    link = Loopback(tmp_path, tick=0.005, rnr_retries=2, min_rnr_timer=1)
    try:
        a, b = link.adapters
        qp = a.cm.connect(b.gid, Service.RC, SECURE_PKEY, 2, Scope.SESSION, 5.0)
        remote = b.qp(qp.remote_qpn or 0)
        remote.recv_queue.extend([(b"", {})] * RECV_QUEUE_DEPTH)  # an application that never reads
        a.post_send(qp.qpn, b"no room")
        assert poll_until(lambda: qp.state is State.ERROR, 10, interval=0.01)
        assert a.counters.snapshot()["taken"]["rnr_nak"] == 3  # the first and two retries
        assert len(remote.recv_queue) == RECV_QUEUE_DEPTH
    finally:
        link.close()
