"""The adapter in-process (no namespaces): mode 0 without crypto, the SM's vendor MADs, key retirement,
and a fuzz of the receive path with random and mutated frames."""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ibsec import addressing, icrc, keybatch, keys, layers, mad_auth, transport
from ibsec.agent import mads
from ibsec.agent.adapter import MAX_QPS, Adapter, AdapterError, AgentConfig
from ibsec.agent.counters import Drop
from ibsec.agent.qp import Partition, Scope, Service, State
from ibsec.agent.send import SEND_WINDOW
from ibsec.agent.traps import RateLimiter
from ibsec.builder import Builder, gid_bytes, mac_of
from scapy.layers.l2 import Ether
from scapy.packet import Packet

from .loopback import SECURE_PKEY, Loopback

WAIT = 30.0  # seconds an expected effect may take on a loaded machine (it comes in milliseconds)

SM_INDEX = 9
SM_GID = addressing.host_gid(SM_INDEX, 1)
FUZZ_FRAMES = int(os.environ.get("IBSEC_FUZZ_FRAMES", "50000"))


@pytest.fixture
def loop(tmp_path: Path) -> Iterator[Loopback]:
    link = Loopback(tmp_path, sm_gid=SM_GID, mac_failure_threshold=4, retire_after=12)
    yield link
    link.close()


def test_mode_0_makes_no_crypto_call(loop: Loopback, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = loop.adapters

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("a crypto call in mode 0")

    for target, name in (
        (transport, "gcm_seal"),
        (transport, "gcm_open"),
        (keys, "prf"),
        (keys, "derive_connection_key"),
        (keys, "wrap_key"),
        (keys, "unwrap_key"),
    ):
        monkeypatch.setattr(target, name, forbidden)
    monkeypatch.setattr(a.skc, "get", forbidden)
    monkeypatch.setattr(b.skc, "get", forbidden)
    for scope in Scope:
        qp = a.cm.connect(b.gid, Service.RC, SECURE_PKEY, 0, scope, WAIT)
        a.post_send(qp.qpn, b"clear")
        assert b.wait_recv(qp.remote_qpn or 0, WAIT) == b"clear"
        region = b.reg_mr(64, SECURE_PKEY)
        a.post_write(qp.qpn, region.addr, region.r_key, b"written")
        assert a.wait_outstanding(qp.qpn, 0, WAIT) and region.read(region.addr, 7) == b"written"
        ud = a.cm.connect(b.gid, Service.UD, SECURE_PKEY, 0, scope, WAIT)
        peer = next(iter(ud.peers.values()))
        a.post_send(ud.qpn, b"datagram", (peer.gid, peer.qpn))
        assert b.wait_recv(peer.qpn, WAIT) == b"datagram"



def test_full_member_answers_a_limited_one_with_its_own_pkey(loop: Loopback) -> None:
    """A limited member connects to a full member of a partition: the CM replies (REP, DREP) carry the
    replier's own table entry (full), not the limited P_Key the request came with (which the replier
    does not hold, and which would not match the limited requester)."""
    a, b = loop.adapters
    limited = SECURE_PKEY & 0x7FFF
    a.set_partitions([Partition(0xFFFF), Partition(limited, 0, Scope.PARTITION)])
    qp = a.cm.connect(b.gid, Service.RC, limited, 0, None, WAIT)
    a.post_send(qp.qpn, b"limited to full")
    assert b.wait_recv(qp.remote_qpn or 0, WAIT) == b"limited to full"
    assert a.cm.disconnect(qp, WAIT)
    pkeys = {(frame[6:12], int(Ether(frame)[layers.BTH].pkey)) for frame in loop.frames}
    assert pkeys == {(b.config.mac, SECURE_PKEY), (a.config.mac, limited)}


def _vendor_frame(attr: layers.VendorAttr, body: object, key: keys.Key, dst: str, tid: int) -> bytes:
    mad = (
        layers.MAD(
            mgmt_class=layers.MgmtClass.IBSEC_VENDOR,
            method=layers.Method.SET,
            attribute_id=attr,
            transaction_id=tid,
        )
        / body
    )
    payload = mad_auth.seal(key.material, bytes(mad)[: layers.MAD_LEN], SM_GID)
    sm = Builder(bytes.fromhex(addressing.host_mac(SM_INDEX).replace(":", "")), gid_bytes(SM_GID))
    return sm.mad_frame(dst, 0xFFFF, payload)


def test_sm_vendor_mads_set_keys_and_pkeys_only_when_authentic_and_fresh(
    loop: Loopback, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = loop.adapters[0]
    ca_sk = loop.ca_keys[0]
    new_pkey = 0x8123
    p_sk = keys.Key.generate(keys.KeyType.P_SK, (new_pkey,))
    body = layers.KeyDistribution(
        key_type=keys.KeyType.P_SK, owners=[new_pkey], pkey=new_pkey, wrapped_key=keys.wrap_key(ca_sk, p_sk)
    )
    a.receive(_vendor_frame(layers.VendorAttr.KEY_DISTRIBUTION, body, ca_sk, a.gid, tid=10))
    assert a.keyring.partition_key(new_pkey) == p_sk
    replies = [Ether(f) for f in loop.frames if f[:6] == mac_of(gid_bytes(SM_GID))]
    reply = replies[-1]
    assert mad_auth.verify_packet(ca_sk.material, reply)[layers.MAD].r == 1
    assert bytes(reply[layers.KeyDistribution].wrapped_key) == bytes(
        keys.WRAPPED_KEY_LEN
    )  # never echoes the key

    table = layers.PKeyTable(pkeys=[new_pkey])
    a.receive(_vendor_frame(layers.VendorAttr.PKEY_TABLE, table, ca_sk, a.gid, tid=11))
    assert sorted(a.partitions) == [new_pkey, 0xFFFF]  # the default partition always stays

    def no_dissection(*args: object) -> None:
        raise AssertionError("a MAD dissected before its authentication was checked")

    monkeypatch.setattr(mads, "Ether", no_dissection)
    forged_key = keys.Key.generate(keys.KeyType.CA_SK, ca_sk.owner)
    a.receive(
        _vendor_frame(layers.VendorAttr.PKEY_TABLE, layers.PKeyTable(pkeys=[0x8777]), forged_key, a.gid, 12)
    )
    a.receive(_vendor_frame(layers.VendorAttr.PKEY_TABLE, layers.PKeyTable(pkeys=[0x8777]), ca_sk, a.gid, 11))
    assert sorted(a.partitions) == [new_pkey, 0xFFFF]
    drops = a.counters.snapshot()["drops"]
    assert drops["bad_auth"] == 1 and drops["replay"] == 1
    assert a.counters.stat("internal_errors") == 0  # neither was dissected


def _batch_frame(body: bytes, key: keys.Key, dst: str, tid: int) -> bytes:
    header = layers.vendor_header(layers.VendorAttr.KEY_BATCH, tid)
    sm = Builder(bytes.fromhex(addressing.host_mac(SM_INDEX).replace(":", "")), gid_bytes(SM_GID))
    return sm.mad_frame(dst, 0xFFFF, mad_auth.seal(key.material, header + body, SM_GID))


def test_key_batch_taken_whole_acked_once_and_never_echoed(loop: Loopback) -> None:
    a, b = loop.adapters
    ca_sk = loop.ca_keys[0]
    batch = [keys.Key.generate(keys.KeyType.SM_SK), keys.Key.generate(keys.KeyType.P_SK, (0x8123,)),
             keys.Key.generate(keys.KeyType.CA_SK_IJ, tuple(sorted((a.guid, b.guid))))]
    header = layers.vendor_header(layers.VendorAttr.KEY_BATCH, 30)
    a.receive(_batch_frame(keybatch.seal(ca_sk, header, batch, a.guid), ca_sk, a.gid, 30))
    assert a.keyring.sm_sk == batch[0] and a.keyring.partition_key(0x8123) == batch[1]
    assert a.keyring.pairwise_key(b.guid) == batch[2]
    assert (a.counters.stat("keys_received"), a.counters.stat("key_batches_received")) == (3, 1)
    (ack,) = _replies_to_sm(loop, 0)
    assert (ack.r, ack.status, ack.transaction_id, ack[layers.KeyBatch].count) == (1, 0, 30, 3)
    assert all(k.material not in f for k in batch for f in loop.frames)


def test_key_batch_tampered_or_replayed_is_refused_and_counted(loop: Loopback) -> None:
    """A batch whose wrap fails (authentic trailer: only the SM could send it) is refused whole with
    KEY_REJECTED and counted; one flipped bit on the wire fails the trailer; a replay is dropped."""
    a = loop.adapters[0]
    ca_sk = loop.ca_keys[0]
    key = keys.Key.generate(keys.KeyType.P_SK, (0x8124,))
    header = layers.vendor_header(layers.VendorAttr.KEY_BATCH, 40)
    body = bytearray(keybatch.seal(ca_sk, header, [key], a.guid))
    body[20] ^= 0x01  # a ciphertext bit
    a.receive(_batch_frame(bytes(body), ca_sk, a.gid, 40))
    (ack,) = _replies_to_sm(loop, 0)
    assert (ack.status, ack.transaction_id) == (layers.MadStatus.KEY_REJECTED, 40)
    assert a.counters.stat("key_batches_refused") == 1 and a.counters.stat("keys_received") == 0
    header = layers.vendor_header(layers.VendorAttr.KEY_BATCH, 41)
    good = _batch_frame(keybatch.seal(ca_sk, header, [key], a.guid), ca_sk, a.gid, 41)
    flipped = bytearray(good)
    flipped[len(good) - 4 - 28 - 100] ^= 0x01  # inside the MAD body, ICRC made good: the trailer fails
    a.receive(icrc.with_icrc(bytes(flipped)))
    assert a.counters.snapshot()["drops"]["bad_auth"] == 1 and a.counters.stat("keys_received") == 0
    a.receive(good)
    a.receive(good)  # replayed
    assert a.counters.snapshot()["drops"]["replay"] == 1
    assert a.counters.stat("keys_received") == 1 and a.keyring.partition_key(0x8124) == key
    assert [m.status for m in _replies_to_sm(loop, 0)] == [layers.MadStatus.KEY_REJECTED, layers.MadStatus.OK]


def _replies_to_sm(loop: Loopback, index: int) -> list[Packet]:
    """Adapter ``index``'s answers to the SM, authenticated under its CA_SK, as MADs."""
    sm_mac, own_mac = mac_of(gid_bytes(SM_GID)), loop.adapters[index].config.mac
    return [mad_auth.verify_packet(loop.ca_keys[index].material, Ether(f))[layers.MAD]
            for f in loop.frames if f[:6] == sm_mac and f[6:12] == own_mac]


def test_sm_pkey_table_sets_the_partition_mode_new_connections_use(loop: Loopback) -> None:
    a, b = loop.adapters
    for tid, (adapter, ca_sk) in enumerate(zip(loop.adapters, loop.ca_keys, strict=True), start=20):
        table = layers.PKeyTable(pkeys=[0xFFFF, SECURE_PKEY], secmodes=[0, 2])
        adapter.receive(_vendor_frame(layers.VendorAttr.PKEY_TABLE, table, ca_sk, adapter.gid, tid))
    assert _replies_to_sm(loop, 0)[-1].status == layers.MadStatus.OK
    by_default = a.cm.connect(b.gid, Service.RC, SECURE_PKEY, None, None, WAIT)
    explicit = a.cm.connect(b.gid, Service.RC, SECURE_PKEY, 3, None, WAIT)
    loop.mute = True
    sent = {}
    for qp in (by_default, explicit):
        a.post_send(qp.qpn, b"secret payload")
        sent[qp.qpn] = loop.frames[-1]
        assert Ether(sent[qp.qpn])[layers.BTH].dqpn == qp.remote_qpn
    assert Ether(sent[by_default.qpn])[layers.BTH].secmode == 2  # the partition's mode from the SM
    assert b"secret payload" not in sent[by_default.qpn]  # sth-aead encrypts
    assert Ether(sent[explicit.qpn])[layers.BTH].secmode == 3  # a mode the connection asked for wins


def test_sm_pkey_table_with_a_reserved_mode_is_refused_and_counted(loop: Loopback) -> None:
    a, ca_sk = loop.adapters[0], loop.ca_keys[0]
    accepted = layers.PKeyTable(pkeys=[0xFFFF, SECURE_PKEY], secmodes=[0, 2])
    a.receive(_vendor_frame(layers.VendorAttr.PKEY_TABLE, accepted, ca_sk, a.gid, 30))
    for tid, reserved in enumerate((5, 6, 7), start=31):
        table = layers.PKeyTable(pkeys=[0xFFFF, SECURE_PKEY, 0x8123], secmodes=[0, 1, reserved])
        a.receive(_vendor_frame(layers.VendorAttr.PKEY_TABLE, table, ca_sk, a.gid, tid))
        assert _replies_to_sm(loop, 0)[-1].status == layers.MadStatus.INVALID_ATTR_VALUE
    assert a.counters.snapshot()["drops"]["malformed"] == 3
    assert sorted(a.partitions) == [SECURE_PKEY, 0xFFFF]  # nothing of a refused table applied
    assert a.own_partition(SECURE_PKEY).mode == 2  # type: ignore[union-attr]


def test_reserved_security_modes_are_dropped_and_counted(loop: Loopback) -> None:
    a, b = loop.adapters
    qp = a.cm.connect(b.gid, Service.RC, SECURE_PKEY, 2, Scope.SESSION, WAIT)
    loop.mute = True
    a.post_send(qp.qpn, b"in mode 2")
    frame = bytearray(loop.frames[-1])
    for reserved in (5, 6, 7):
        frame[62 + 8] = (frame[62 + 8] & 0x8F) | (reserved << 4)
        b.receive(icrc.with_icrc(bytes(frame)))
    assert b.counters.snapshot()["drops"]["bad_mode"] == 3
    assert b.wait_recv(qp.remote_qpn or 0, 0.1) is None


def test_a_key_is_retired_after_the_hard_limit_of_mac_failures(loop: Loopback) -> None:
    a, b = loop.adapters
    qp = a.cm.connect(b.gid, Service.RC, SECURE_PKEY, 1, Scope.SESSION, WAIT)
    remote = b.qps[qp.remote_qpn or 0]
    forger = Builder(a.config.mac, gid_bytes(a.gid))
    for i in range(12):
        plain = forger.plain(b.gid, "RC_SEND_ONLY", SECURE_PKEY, remote.qpn, qp.next_psn, b"guess")
        frame = bytearray(
            transport.seal(plain, os.urandom(16), transport.Sender(transport.Mode.ICRC_MAC, os.urandom(12)))
        )
        frame[-4:] = i.to_bytes(4, "big")
        b.receive(bytes(frame))
    assert b.counters.snapshot()["drops"]["mac_failure"] == 12
    assert remote.state is State.ERROR and remote.security is not None and remote.security.retired
    before = b.counters.snapshot()["drops"]["no_qp"]
    b.receive(bytes(frame))  # nothing more reaches a QP whose key was retired
    assert b.counters.snapshot()["drops"]["no_qp"] == before + 1
    # a trap at 4, 8 and 12 failures: the first goes out, the others fall in its suppression window
    assert (b.counters.stat("traps_sent"), b.counters.stat("traps_suppressed")) == (1, 2)
    trap = next(Ether(f) for f in loop.frames if f[:6] != a.config.mac and f[:6] != b.config.mac)
    notice = mad_auth.verify_packet(loop.ca_keys[1].material, trap)[layers.Notice]
    assert notice.data_details.qp == remote.qpn and notice.data_details.mac_failures == 4


@pytest.mark.parametrize("mode", range(5))
def test_modified_frames_fail_the_mac_where_the_mode_covers_the_change(loop: Loopback, mode: int) -> None:
    """A man in the middle holds a WRITE back and forwards a modified copy (ICRC fixed). Headers are
    covered in modes 1-4, the payload in modes 1-3 (mode 4 authenticates headers only, as sRDMA's
    header authentication), nothing in mode 0."""
    a, b = loop.adapters
    region = b.reg_mr(64, SECURE_PKEY)
    qp = a.cm.connect(b.gid, Service.RC, SECURE_PKEY, mode, Scope.SESSION, WAIT)
    loop.mute = True  # the man in the middle: nothing a sends arrives unless the test delivers it
    a.post_write(qp.qpn, region.addr, region.r_key, b"original")
    frame = loop.frames[-1]
    loop.mute = False
    header_flip = bytearray(frame)
    header_flip[62 + 12 + 7] ^= 0x01  # the RETH's virtual address, still inside the region
    payload_flip = bytearray(frame)
    payload_flip[-6] ^= 0x01 if mode != 1 else 0x00
    payload_flip[-10] ^= 0x01  # a payload byte (mode 1: the tag sits where the ICRC is)
    failures = b.counters.snapshot()["drops"]["mac_failure"]
    for modified in (header_flip, payload_flip):
        b.receive(icrc.with_icrc(bytes(modified)) if mode != 1 else bytes(modified))
    mac_failures = b.counters.snapshot()["drops"]["mac_failure"] - failures
    assert mac_failures == {0: 0, 1: 2, 2: 2, 3: 2, 4: 1}[mode]
    if mode == 0:
        assert region.read(region.addr + 1, 8) == b"original"  # the modified address was believed
    b.receive(frame)  # the original still arrives: accepted unless a modified copy already took its PSN
    landed = {0: bytes(1) + b"origina", 4: b"orhgin`l"}.get(mode, b"original")
    assert region.read(region.addr, 8) == landed


def _corpus(loop: Loopback) -> list[bytes]:
    """Valid frames of every kind: CM, RC SEND / WRITE / ACK and UD in every mode."""
    a, b = loop.adapters
    for mode in range(5):
        qp = a.cm.connect(b.gid, Service.RC, SECURE_PKEY, mode, Scope.SESSION, WAIT)
        a.post_send(qp.qpn, bytes(range(mode * 10 + 5)))
        a.post_send(qp.qpn, os.urandom(2 * a.config.mtu + 100))  # FIRST, MIDDLE, LAST
        region = b.reg_mr(1024, SECURE_PKEY, ext_depth=2 if mode else None)
        memory_key = b.memory.delegate(region.r_key, region.addr, 1024).material if mode else None
        a.post_write(qp.qpn, region.addr, region.r_key, b"w" * 33, memory_key)
        assert a.wait_outstanding(qp.qpn, 0, WAIT)
        ud = a.cm.connect(b.gid, Service.UD, SECURE_PKEY, mode, Scope.DERIVED, WAIT)
        peer = next(iter(ud.peers.values()))
        a.post_send(ud.qpn, b"ud" * mode, (peer.gid, peer.qpn))
    return [f for f in loop.frames if f[:6] == b.config.mac]


def mutate(rng: random.Random, frame: bytes) -> bytes:
    out = bytearray(frame)
    kind = rng.randrange(6)
    if kind == 0:  # flip bits anywhere
        for _ in range(rng.randint(1, 4)):
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    elif kind == 1:  # a random value in a BTH field (opcode, flags, P_Key, QPN, mode byte, PSN)
        out[62 + rng.choice([0, 1, 2, 3, 5, 6, 7, 8, 9, 11])] = rng.randrange(256)
    elif kind == 2:  # truncate
        del out[rng.randrange(len(out)) :]
    elif kind == 3:  # extend
        out += os.urandom(rng.randint(1, 64))
    elif kind == 4:  # random bytes after the headers, lengths made consistent
        out[rng.randrange(62, len(out)) :] = os.urandom(rng.randint(0, 80))
        if len(out) > 62:
            size = (len(out) - 54).to_bytes(2, "big")
            out[18:20], out[58:60] = size, size
    else:  # valid headers, a different extension-header and payload area
        out[74:] = os.urandom(max(0, len(out) - 74))
    return bytes(out)


def test_fuzzing_the_receive_path_crashes_nothing(loop: Loopback) -> None:
    corpus = _corpus(loop)
    assert len(corpus) > 20
    victim = loop.adapters[1]
    loop.mute = True
    rng = random.Random(5)
    header = corpus[0][:62]
    for i in range(FUZZ_FRAMES):
        if i % 2:
            frame = mutate(rng, rng.choice(corpus))
        elif i % 4:
            frame = os.urandom(rng.randint(0, 200))
        else:
            frame = header + os.urandom(rng.randint(0, 300))
        victim.receive(frame)
    stats = victim.counters.snapshot()
    assert stats["stats"].get("internal_errors", 0) == 0
    assert stats["stats"]["rx_frames"] >= FUZZ_FRAMES
    assert victim.counters.unaccounted() == 0  # every frame dropped for a reason or taken as something
    assert sum(stats["drops"].values()) > FUZZ_FRAMES // 4
    loop.mute = False
    a, b = loop.adapters
    qp = a.cm.connect(b.gid, Service.RC, SECURE_PKEY, 2, Scope.SESSION, WAIT)
    a.post_send(qp.qpn, b"still alive")
    assert b.wait_recv(qp.remote_qpn or 0, WAIT) == b"still alive"


def test_the_qp_table_is_bounded_and_a_full_table_refuses_connections(loop: Loopback) -> None:
    a, b = loop.adapters
    while len(b.qps) < MAX_QPS:
        b.create_qp(Service.UD)
    with pytest.raises(AdapterError, match="no QP left"):
        b.create_qp(Service.RC)
    with pytest.raises(AdapterError, match="refused"):
        a.cm.connect(b.gid, Service.RC, SECURE_PKEY, 0, Scope.PARTITION, WAIT)
    assert b.counters.dropped(Drop.CM_REFUSED) == 1


def test_config_without_keys_refuses_secure_connections_cleanly(tmp_path: Path) -> None:
    adapter = Adapter(AgentConfig(name="bare", mac=bytes.fromhex("020000000007")), lambda frame: None)
    qp = adapter.create_qp(Service.RC, 0xFFFF, 2, Scope.PARTITION)
    with pytest.raises(Exception, match="no P_SK"):
        adapter.security_for(qp, addressing.host_gid(1, 1), 0x100, None, True, (bytes(12), bytes(12)), 0)


def test_bad_pkey_traps_come_once_per_window_and_again_after_it(tmp_path: Path) -> None:
    link = Loopback(tmp_path, sm_gid=SM_GID, trap_window=0.3)
    try:
        a, b = link.adapters
        now = [0.0]  # the window's clock: time passes when the test says, however slow the machine
        b.trap_limiter = RateLimiter(b.config.trap_window, clock=lambda: now[0])
        flood = Builder(a.config.mac, gid_bytes(a.gid))
        frame = transport.seal(flood.plain(b.gid, "UD_SEND_ONLY", 0x7BAD, 0x100, 0, b"x", deth=(0, 0x100)),
                               None, transport.Sender(transport.Mode.NONE))
        sm_mac = mac_of(gid_bytes(SM_GID))

        def traps() -> list[Ether]:
            return [Ether(f) for f in link.frames if f[:6] == sm_mac]

        for _ in range(50):
            b.receive(frame)
        assert len(traps()) == 1
        now[0] += 0.35
        for _ in range(50):
            b.receive(frame)
        found = traps()
        assert len(found) == 2 and b.counters.snapshot()["drops"]["bad_pkey"] == 100
        for trap in found:
            notice = mad_auth.verify_packet(link.ca_keys[1].material, trap)[layers.Notice]
            assert notice.trap_number == 257 and notice.data_details.key == 0x7BAD
        assert found[0][layers.MAD].transaction_id < found[1][layers.MAD].transaction_id
    finally:
        link.close()


def test_a_long_message_keeps_at_most_a_window_of_packets_in_flight(tmp_path: Path) -> None:
    link = Loopback(tmp_path, mtu=256)
    try:
        a, b = link.adapters
        qp = a.cm.connect(b.gid, Service.RC, SECURE_PKEY, 2, Scope.SESSION, WAIT)
        message = os.urandom((3 * SEND_WINDOW + 5) * 256)
        in_flight: list[int] = []
        poster = threading.Thread(target=a.post_send, args=(qp.qpn, message))
        poster.start()
        while poster.is_alive():
            in_flight.append(len(qp.unacked))
            time.sleep(0.0005)
        poster.join()
        assert b.wait_recv(qp.remote_qpn or 0, WAIT) == message
        assert 0 < max(in_flight) <= SEND_WINDOW
        assert a.counters.stat("tx_frames") >= 3 * SEND_WINDOW + 5
    finally:
        link.close()


def test_a_retransmitted_packet_of_a_message_is_acknowledged_again_not_refused(tmp_path: Path) -> None:
    link = Loopback(tmp_path, mtu=256)
    try:
        a, b = link.adapters
        qp = a.cm.connect(b.gid, Service.RC, SECURE_PKEY, 2, Scope.SESSION, WAIT)
        link.mute = True  # every frame is handed over by the test: the ACKs to a get lost
        message = os.urandom(600)
        a.post_send(qp.qpn, message)
        first, middle, last = link.frames[-3:]
        sent_by_b = b.counters.stat("tx_frames")
        for frame in (first, first, middle, last):  # the FIRST again, as a retransmission would
            b.receive(frame)
        drops = b.counters.snapshot()["drops"]
        assert drops["replay"] == 1 and drops["malformed"] == 0
        assert b.counters.stat("tx_frames") == sent_by_b + 4  # three ACKs and the repeated one
        assert b.wait_recv(qp.remote_qpn or 0, WAIT) == message
    finally:
        link.close()


def test_port_up_notice_until_the_sm_sends_the_pkey_table(loop: Loopback) -> None:
    """A (re)started agent tells the SM it is up, at 0, 1, 3, 7 s..., authenticated, with its boot id,
    and stops once the SM's P_Key table arrived (a key alone does not stop it)."""
    a = loop.adapters[0]
    for now in (100.0, 100.5, 101.0, 102.9, 103.0, 106.9):
        a.mads.tick(now)
    notices = [mad_auth.verify_packet(loop.ca_keys[0].material, Ether(f))[layers.Notice]
               for f in loop.frames if f[:6] == mac_of(gid_bytes(SM_GID))]
    assert len(notices) == a.counters.stat("hellos_sent") == 3
    assert {(n.device_id, n.data_details.boot_id, n.issuer_gid) for n in notices} == \
        {(layers.IBSEC_TRAP_PORT_UP, a.mads.boot_id, a.gid)}
    other = Adapter(a.config, lambda frame: None)
    assert other.mads.boot_id != a.mads.boot_id  # every start its own
    p_sk = keys.Key.generate(keys.KeyType.P_SK, (SECURE_PKEY,))
    key = layers.KeyDistribution(key_type=keys.KeyType.P_SK, owners=[SECURE_PKEY], pkey=SECURE_PKEY,
                                 wrapped_key=keys.wrap_key(loop.ca_keys[0], p_sk))
    a.receive(_vendor_frame(layers.VendorAttr.KEY_DISTRIBUTION, key, loop.ca_keys[0], a.gid, tid=20))
    a.mads.tick(107.0)
    assert a.counters.stat("hellos_sent") == 4
    table = layers.PKeyTable(pkeys=[0xFFFF, SECURE_PKEY], secmodes=[0, 2])
    a.receive(_vendor_frame(layers.VendorAttr.PKEY_TABLE, table, loop.ca_keys[0], a.gid, tid=21))
    a.mads.tick(1000.0)
    assert a.counters.stat("hellos_sent") == 4
