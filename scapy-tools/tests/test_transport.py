"""Secure transport modes 0-4: round trips, tampering, replay, downgrade, nonce uniqueness, no key leaks."""

import os
from collections.abc import Iterator
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ibsec import addressing, icrc, layers, rocev2, transport
from ibsec.opcodes import BY_NAME, Service
from ibsec.transport import Mode, Receiver, Sender
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw
from scapy.utils import checksum

SECURE_MODES = [Mode.ICRC_MAC, Mode.STH_AEAD, Mode.STH_AUTH, Mode.STH_HDR]
SRC = addressing.host_gid(1, subnet=1)
DST = addressing.host_gid(2, subnet=1)
IP = 14  # offset of IPv6 in our frames
BTH = IP + 40 + 8


def frame(psn: int = 0, payload: bytes = b"0123456789abcde", opcode: str = "RC_SEND_ONLY", pad: int = 1,
          udp_checksum: int | None = 0) -> bytes:
    """A mode-0 frame as the agent builds it (PSN, payload and extension headers chosen by the test)."""
    op = BY_NAME[opcode]
    pkt: Packet = (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
                   / IPv6(src=SRC, dst=DST, hlim=64)
                   / UDP(sport=0xC000, dport=4791, chksum=udp_checksum)
                   / layers.BTH(opcode=op.code, pkey=0x8001, dqpn=0x101, psn=psn, padcount=pad))
    for ext in op.headers:
        pkt = pkt / layers.EXT_LAYERS[ext]()
    return bytes(pkt / Raw(payload))


def pair(mode: Mode, service: Service = Service.RC, initial_psn: int = 0) -> tuple[bytes, Sender, Receiver]:
    key, n0 = os.urandom(16), os.urandom(12)
    receiver = Receiver(mode, service, n0, direction=0, initial_psn=initial_psn)
    return key, Sender(mode, n0, direction=0), receiver


# ---- round trips ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", list(Mode))
@pytest.mark.parametrize("opcode", ["RC_SEND_ONLY", "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", "RC_ACKNOWLEDGE"])
def test_round_trip_in_every_mode(mode: Mode, opcode: str) -> None:
    key, sender, receiver = pair(mode)
    body = b"" if opcode == "RC_ACKNOWLEDGE" else bytes(range(40))
    plain = frame(0, body, opcode, pad=0)
    sealed = transport.seal(plain, key, sender)
    extra = transport.STH_LEN if mode.has_sth else 0
    assert len(sealed) == len(plain) + extra
    found = rocev2.locate(sealed)  # IPv6 payload length and UDP length count the STH and the tag
    assert sealed[found.bth + 8] >> 4 == mode
    if mode in (Mode.ICRC_MAC, Mode.STH_AEAD) and body:
        assert body not in sealed
    if mode is not Mode.ICRC_MAC:
        assert icrc.verify(sealed)  # a legacy ICRC check still passes in modes 0, 2-4
    payload, info = transport.open_frame(sealed, key, receiver)
    assert payload == body
    assert (info.mode, info.opcode.name, info.epsn) == (mode, opcode, 0)
    assert info.response == (opcode == "RC_ACKNOWLEDGE")


@settings(max_examples=150, deadline=None)
@given(mode=st.sampled_from(list(Mode)), opcode=st.sampled_from(sorted(BY_NAME)),
       body=st.binary(max_size=300), psn=st.integers(0, 0xFFFFFF), marked=st.integers(0, addressing.MF_MAX))
def test_round_trip_any_opcode_payload_and_psn(mode: Mode, opcode: str, body: bytes, psn: int,
                                               marked: int) -> None:
    key, sender, _ = pair(mode)
    receiver = Receiver(mode, BY_NAME[opcode].service, sender.n0, initial_psn=psn)
    sealed = transport.seal(frame(psn, body, opcode, pad=0), key, sender)
    dst = IP + 24  # switches mark the packet on its way
    sealed = sealed[:dst] + addressing.mf_set(sealed[dst:dst + 16], marked) + sealed[dst + 16:]
    payload, info = transport.open_frame(sealed, key, receiver)
    assert (payload, info.epsn, info.opcode.name) == (body, psn, opcode)


def test_pad_bytes_are_covered_and_stripped() -> None:
    key, sender, receiver = pair(Mode.STH_AEAD)
    sealed = transport.seal(frame(pad=3, payload=b"abcd\0\0\0"), key, sender)
    payload, _ = transport.open_frame(sealed, key, receiver)
    assert payload == b"abcd"


def test_sth_parses_with_the_layers_and_holds_the_tag() -> None:
    key, sender, _ = pair(Mode.STH_AUTH)
    sealed = Ether(transport.seal(frame(), key, sender))
    assert sealed[layers.BTH].secmode == Mode.STH_AUTH
    assert len(sealed[layers.STH].tag) == 16
    assert sealed[layers.STH].payload.load.startswith(b"0123456789abcde")


def test_udp_checksum_kept_valid_when_the_frame_has_one() -> None:
    key, sender, _ = pair(Mode.STH_AEAD)
    sealed = transport.seal(frame(udp_checksum=None), key, sender)
    udp = sealed[IP + 40:]
    pseudo = sealed[IP + 8:IP + 40] + len(udp).to_bytes(4, "big") + b"\x00\x00\x00\x11"
    assert Ether(sealed)[UDP].chksum != 0
    assert checksum(pseudo + udp) == 0  # the one's complement sum over a correct checksum


def test_ud_send_with_deth() -> None:
    key, sender, receiver = pair(Mode.ICRC_MAC, Service.UD)
    sealed = transport.seal(frame(5, b"datagram", "UD_SEND_ONLY", pad=0), key, sender)
    assert Ether(sealed)[layers.DETH] is not None
    assert transport.open_frame(sealed, key, receiver)[0] == b"datagram"


# ---- mode 0 makes no crypto call ----------------------------------------------------------------------


@pytest.fixture
def no_crypto() -> Iterator[None]:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("mode 0 constructed a cipher")

    # every GCM object, cached or new, comes through transport._key_context
    with mock.patch.object(transport, "AESGCM", refuse), \
            mock.patch.object(transport, "_key_context", refuse), \
            mock.patch.object(transport.hashlib, "blake2b", refuse):
        yield


def test_mode0_makes_no_crypto_call(no_crypto: None) -> None:
    sender, receiver = Sender(Mode.NONE), Receiver(Mode.NONE, Service.RC)
    for psn in range(3):
        sealed = transport.seal(frame(psn), None, sender)
        assert sealed == frame(psn)
        assert transport.open_frame(sealed, None, receiver)[0] == b"0123456789abcd"
    with pytest.raises(AssertionError, match="constructed a cipher"):  # the mock does bite
        transport.seal(frame(), os.urandom(16), Sender(Mode.STH_AEAD, os.urandom(12)))


# ---- tampering -------------------------------------------------------------------------------------------


def variant_bits(sealed: bytes) -> set[int]:
    """Bit positions (in the frame) neither the ICRC nor any MAC covers: DESIGN section 3."""
    ranges = [(IP * 8 + 4, IP * 8 + 32),  # traffic class and flow label
              ((IP + 7) * 8, (IP + 8) * 8),  # hop limit
              ((IP + 24) * 8 + addressing.PREFIX_BITS, (IP + 24) * 8 + 10 + addressing.MF_BITS),  # MF
              ((IP + 46) * 8, (IP + 48) * 8),  # UDP checksum
              ((BTH + 4) * 8, (BTH + 5) * 8)]  # FECN, BECN, reserved
    return {bit for lo, hi in ranges for bit in range(lo, hi)}


def flip(data: bytes, bit: int) -> bytes:
    out = bytearray(data)
    out[bit // 8] ^= 0x80 >> (bit % 8)
    return bytes(out)


@pytest.mark.parametrize("mode", SECURE_MODES)
def test_every_covered_bit_flip_fails_and_variant_flips_pass(mode: Mode) -> None:
    key, sender, receiver = pair(mode)
    sealed = transport.seal(frame(payload=b"tamper!"), key, sender)
    variant = variant_bits(sealed)
    payload_bits = range((len(sealed) - 4 - 7) * 8, (len(sealed) - 4) * 8)
    for bit in range(IP * 8, len(sealed) * 8):
        tampered = flip(sealed, bit)
        if bit in variant:
            fresh = Receiver(mode, Service.RC, receiver.n0, 0)
            assert transport.open_frame(tampered, key, fresh)[0] == b"tamper"
            continue
        with pytest.raises(rocev2.WireError):
            transport.open_frame(tampered, key, receiver)
        if mode is Mode.ICRC_MAC or bit >= (len(sealed) - 4) * 8:
            continue
        # an attacker who recomputes the ICRC: only the MAC stands, except mode 4 leaves P unauthenticated
        try:
            refreshed = icrc.with_icrc(tampered)
        except rocev2.Malformed:  # no longer a RoCEv2 frame at all: already refused above
            continue
        if mode is Mode.STH_HDR and bit in payload_bits:
            fresh = Receiver(mode, Service.RC, receiver.n0, 0)
            assert transport.open_frame(refreshed, key, fresh)[0] == refreshed[-4 - 7:-4 - 1]  # accepted
            continue
        with pytest.raises(rocev2.WireError):
            transport.open_frame(refreshed, key, receiver)
    assert receiver.stats.get("accepted", 0) == 0 and sum(receiver.stats.values()) > 0
    assert transport.open_frame(sealed, key, receiver)[0] == b"tamper"  # failures changed no state


@pytest.mark.parametrize("mode", SECURE_MODES)
def test_marking_on_the_way_does_not_break_the_mac(mode: Mode) -> None:
    key, sender, receiver = pair(mode)
    sealed = transport.seal(frame(), key, sender)
    dst = IP + 24
    marked = sealed[:dst] + addressing.mf_set(sealed[dst:dst + 16], 0x15_5555_5555) + sealed[dst + 16:]
    marked = marked[:IP + 7] + b"\x3f" + marked[IP + 8:]  # and three hops fewer
    assert transport.open_frame(marked, key, receiver)[0] == b"0123456789abcd"


@pytest.mark.parametrize("mode", SECURE_MODES)
def test_wrong_key_or_direction_is_a_mac_failure(mode: Mode) -> None:
    key, sender, receiver = pair(mode)
    sealed = transport.seal(frame(), key, sender)
    with pytest.raises(transport.MacFailure):
        transport.open_frame(sealed, os.urandom(16), receiver)
    other_way = Receiver(mode, Service.RC, receiver.n0, direction=1)
    with pytest.raises(transport.MacFailure):
        transport.open_frame(sealed, key, other_way)
    assert receiver.consecutive_mac_failures == 1 and receiver.stats["mac_failures"] == 1
    transport.open_frame(sealed, key, receiver)
    assert receiver.consecutive_mac_failures == 0


_FUZZ_KEY, _FUZZ_N0 = os.urandom(16), os.urandom(12)
_FUZZ_FRAMES = {mode: transport.seal(frame(3), _FUZZ_KEY if mode else None, Sender(mode, _FUZZ_N0))
                for mode in (Mode.NONE, Mode.STH_AEAD)}


@settings(max_examples=300, deadline=None)
@given(mode=st.sampled_from([Mode.NONE, Mode.STH_AEAD]), cut=st.integers(0, 120), junk=st.binary(max_size=40),
       at=st.integers(0, 119))
def test_garbage_is_refused_with_a_wire_error_and_counted(mode: Mode, cut: int, junk: bytes, at: int) -> None:
    """Truncated, extended or overwritten frames never raise anything but a WireError, and are counted."""
    good = _FUZZ_FRAMES[mode]
    garbage = (good[:at] + junk + good[at + len(junk):])[:cut] if junk else good[:cut]
    receiver = Receiver(mode, Service.RC, _FUZZ_N0, initial_psn=3)
    try:
        transport.open_frame(garbage, _FUZZ_KEY, receiver)
    except rocev2.WireError:
        assert sum(receiver.stats.values()) == 1 and "accepted" not in receiver.stats
    else:
        assert receiver.stats == {"accepted": 1}


def test_downgrade_and_reserved_modes_are_dropped_and_counted() -> None:
    key, sender, receiver = pair(Mode.STH_AEAD)
    stripped = frame()  # an attacker replays the payload in clear with a valid ICRC
    with pytest.raises(transport.ModeMismatch):
        transport.open_frame(stripped, key, receiver)
    sealed = transport.seal(frame(), key, sender)
    for reserved in (5, 6, 7):
        forged = bytearray(sealed)
        forged[BTH + 8] = (forged[BTH + 8] & 0x8F) | reserved << 4
        with pytest.raises(transport.ReservedMode, match=f"mode {reserved} is reserved"):
            transport.open_frame(icrc.with_icrc(bytes(forged)), key, receiver)
    assert receiver.stats == {"mode_mismatches": 1, "reserved_modes": 3}
    with pytest.raises(rocev2.Malformed, match="not zero"):
        transport.seal(sealed, key, sender)


def test_contexts_check_their_settings() -> None:
    assert Sender(2, os.urandom(12)).mode is Mode.STH_AEAD  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="5 is not a valid Mode"):
        Receiver(5, Service.RC)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="N0 must be 12 bytes"):
        Sender(Mode.ICRC_MAC, b"short")
    with pytest.raises(ValueError, match="direction bit"):
        Receiver(Mode.ICRC_MAC, Service.UD, direction=2)
    with pytest.raises(ValueError, match="AES key"):
        transport.seal(frame(), b"\x00" * 15, Sender(Mode.ICRC_MAC, os.urandom(12)))


# ---- replay ------------------------------------------------------------------------------------------


def test_rc_is_in_order_across_the_psn_wrap() -> None:
    key, sender, receiver = pair(Mode.STH_AEAD, Service.RC, initial_psn=0xFFFFFE)
    sealed = [transport.seal(frame(psn), key, sender) for psn in (0xFFFFFE, 0xFFFFFF, 0, 1)]
    transport.open_frame(sealed[0], key, receiver)
    with pytest.raises(transport.ReplayError):  # replayed
        transport.open_frame(sealed[0], key, receiver)
    with pytest.raises(transport.SequenceError):  # reordered: ahead of the expected PSN
        transport.open_frame(sealed[2], key, receiver)
    for packet in sealed[1:]:
        transport.open_frame(packet, key, receiver)
    assert receiver.window(False).next == 0x1000002
    with pytest.raises(transport.ReplayError):  # stale, from before the wrap
        transport.open_frame(sealed[1], key, receiver)
    assert receiver.stats == {"accepted": 4, "replays": 2, "out_of_sequence": 1}


@pytest.mark.parametrize("service", [Service.UC, Service.UD])
def test_uc_ud_sliding_window(service: Service) -> None:
    opcode = "UD_SEND_ONLY" if service is Service.UD else "UC_SEND_ONLY"
    key, sender, receiver = pair(Mode.ICRC_MAC, service, initial_psn=0xFFFFF0)
    psns = [(0xFFFFF0 + i) & 0xFFFFFF for i in range(100)]
    sealed = {psn: transport.seal(frame(psn, opcode=opcode), key, sender) for psn in psns}
    order = psns[:10][::-1] + psns[10:20]  # the first ten arrive reversed
    for psn in order:
        transport.open_frame(sealed[psn], key, receiver)
    for psn in (psns[19], psns[5]):  # duplicates inside the window
        with pytest.raises(transport.ReplayError, match="already accepted"):
            transport.open_frame(sealed[psn], key, receiver)
    transport.open_frame(sealed[psns[99]], key, receiver)  # a jump forward is fine...
    for index in range(20, 99):  # ... and the gap may still fill in, if inside the last 64
        if index > 99 - transport.REPLAY_WINDOW:
            transport.open_frame(sealed[psns[index]], key, receiver)
        else:
            with pytest.raises(transport.ReplayError, match="older than"):
                transport.open_frame(sealed[psns[index]], key, receiver)
    assert receiver.window(False).next == 0xFFFFF0 + 100
    assert receiver.stats == {"accepted": 21 + 63, "replays": 2 + 16}


_ARRIVALS_START = 0xFFFFC0  # the sequence wraps the 24-bit PSN
_ARRIVALS: dict[Service, tuple[bytes, bytes, list[bytes]]] = {}


def _arrivals(service: Service) -> tuple[bytes, bytes, list[bytes]]:
    """(key, N0, 150 sealed frames with consecutive PSNs) per service, sealed once for all examples."""
    if service not in _ARRIVALS:
        key, sender, receiver = pair(Mode.ICRC_MAC, service)
        opcode = f"{service.name}_SEND_ONLY"
        frames = [transport.seal(frame((_ARRIVALS_START + i) & 0xFFFFFF, opcode=opcode), key, sender)
                  for i in range(150)]
        _ARRIVALS[service] = (key, receiver.n0, frames)
    return _ARRIVALS[service]


@settings(max_examples=80, deadline=None)
@given(service=st.sampled_from([Service.RC, Service.UC, Service.UD]),
       arrivals=st.lists(st.integers(0, 149), max_size=200))
def test_replay_checks_follow_the_design(service: Service, arrivals: list[int]) -> None:
    """Any arrival order with duplicates: RC takes exactly the next packet, UC/UD each packet once unless
    it is 64 or more behind the newest accepted one (DESIGN section 3)."""
    key, n0, frames = _arrivals(service)
    receiver = Receiver(Mode.ICRC_MAC, service, n0, direction=0, initial_psn=_ARRIVALS_START)
    accepted: set[int] = set()
    for index in arrivals:
        newest = max(accepted, default=-1)
        if service is Service.RC:
            expected_ok = index == newest + 1
        else:
            expected_ok = index not in accepted and index > newest - transport.REPLAY_WINDOW
        if expected_ok:
            assert transport.open_frame(frames[index], key, receiver)[1].epsn == _ARRIVALS_START + index
            accepted.add(index)
        else:
            with pytest.raises(transport.ReplayError):
                transport.open_frame(frames[index], key, receiver)
    assert receiver.stats.get("accepted", 0) == len(accepted)


def test_rc_requests_and_responses_in_one_direction_do_not_collide() -> None:
    """B sends its own requests and ACKs for A's requests with the same PSNs: nonce bit r separates them."""
    key, n0 = os.urandom(16), os.urandom(12)
    b_to_a = Sender(Mode.STH_AEAD, n0, direction=1)
    a_receives = Receiver(Mode.STH_AEAD, Service.RC, n0, direction=1)
    for psn in range(3):
        request = transport.seal(frame(psn), key, b_to_a)
        ack = transport.seal(frame(psn, b"", "RC_ACKNOWLEDGE", pad=0), key, b_to_a)
        assert transport.open_frame(ack, key, a_receives)[1].response
        assert not transport.open_frame(request, key, a_receives)[1].response


# ---- nonces ---------------------------------------------------------------------------------------------


def test_nonce_layout() -> None:
    n0 = bytes(range(12))
    nonce = transport.make_nonce(n0, 1, 0x0123_4567_89AB, response=True)
    expected = int.from_bytes(n0, "big") ^ (1 << 64) ^ (1 << 63) ^ 0x0123_4567_89AB
    assert nonce == expected.to_bytes(12, "big")
    assert transport.make_nonce(n0, 0, 0)[:4] == n0[:4]  # the top 32 bits are N0's alone


@given(expected=st.integers(0, 1 << 62), offset=st.integers(-(1 << 23) + 1, (1 << 23) - 1))
def test_extended_psn_reconstruction_is_nearest(expected: int, offset: int) -> None:
    true = expected + offset
    if true >= 0:
        assert transport.reconstruct_epsn(true & 0xFFFFFF, expected) == true


def test_sender_refuses_repeats_and_colliding_streams() -> None:
    key, sender, _ = pair(Mode.STH_AEAD)
    transport.seal(frame(7), key, sender)
    with pytest.raises(transport.NonceReuse, match="behind"):
        transport.seal(frame(7), key, sender)  # a retransmission must resend the sealed bytes
    near = bytes(sender.n0[:-1]) + bytes([sender.n0[-1] ^ 1])
    with pytest.raises(transport.NonceReuse, match="choose a new N0"):
        transport.seal(frame(0), key, Sender(Mode.STH_AEAD, near))


def test_connection_set_up_refuses_n0s_whose_streams_could_meet() -> None:
    key, peer_n0 = os.urandom(16), os.urandom(12)
    peer = Receiver(Mode.STH_AEAD, Service.RC, peer_n0, direction=1)  # what the peer seals with
    clash = (int.from_bytes(peer_n0, "big") ^ (1 << 63) ^ 5).to_bytes(12, "big")  # at d=0 meets it
    with pytest.raises(transport.NonceReuse, match="choose a new N0"):
        transport.register_streams(key, Sender(Mode.STH_AEAD, clash, direction=0), peer)
    ours = Sender(Mode.STH_AEAD, os.urandom(12), direction=0)
    transport.register_streams(key, ours, peer)
    transport.register_streams(key, ours, peer)  # idempotent
    # both ends in one process (e.g. two adapters in a test) still seal normally on their streams
    transport.seal(frame(0), key, ours)
    transport.seal(frame(0), key, Sender(Mode.STH_AEAD, peer_n0, direction=1))


_REAL_AESGCM = transport.AESGCM


class RecordingAESGCM:
    """Wraps AESGCM and records the nonce of every encryption (what the transport really hands to GCM)."""

    nonces: list[bytes] = []

    def __init__(self, key: bytes) -> None:
        self._real = _REAL_AESGCM(key)

    def encrypt(self, nonce: bytes, data: bytes, associated_data: bytes | None) -> bytes:
        RecordingAESGCM.nonces.append(bytes(nonce))
        return self._real.encrypt(nonce, data, associated_data)


_streams = st.tuples(st.integers(0, 3), st.integers(0, 1), st.booleans())  # which N0, direction, response
_steps = st.lists(st.tuples(_streams, st.one_of(st.integers(-3, 3), st.integers(1, 1 << 23),
                                                 st.just(1 << 24))), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(steps=_steps, start=st.integers(0, 0xFFFFFF))
def test_no_two_packets_under_one_key_share_a_nonce(steps: list[tuple[tuple[int, int, bool], int]],
                                                     start: int) -> None:
    """Random PSN walks (repeats, steps back, wraps) on streams of both directions, requests and
    responses, with N0s that coincide across directions or nearly collide: GCM never sees a nonce twice."""
    key, base = os.urandom(16), os.urandom(12)
    pool = [base, bytes(base[:-1]) + bytes([base[-1] ^ 2]),  # could meet the first stream: refused
            (int.from_bytes(base, "big") ^ (1 << 63)).to_bytes(12, "big"),  # = the first, other direction
            os.urandom(12)]
    psn: dict[tuple[int, int, bool], int] = {}
    sealed = 0
    RecordingAESGCM.nonces = []
    with mock.patch.object(transport, "AESGCM", RecordingAESGCM):
        for (which, direction, response), jump in steps:
            stream = (which, direction, response)
            psn[stream] = (psn.get(stream, start - jump) + jump) & 0xFFFFFF
            opcode = "RC_ACKNOWLEDGE" if response else "RC_SEND_ONLY"
            sender = Sender(Mode.STH_AUTH, pool[which], direction)
            try:
                transport.seal(frame(psn[stream], b"", opcode, pad=0), key, sender)
            except transport.NonceReuse:
                continue
            sealed += 1
    assert len(RecordingAESGCM.nonces) == sealed >= 1
    assert len(set(RecordingAESGCM.nonces)) == sealed


def test_forward_progress_is_never_refused_across_wraps() -> None:
    key, sender, receiver = pair(Mode.STH_HDR, Service.UC)
    psn = 0xFFFF00
    receiver.initial_psn = psn
    for _ in range(20):
        sealed = transport.seal(frame(psn, opcode="UC_SEND_ONLY"), key, sender)
        transport.open_frame(sealed, key, receiver)
        psn = (psn + 0x1FFFFF) & 0xFFFFFF  # big forward jumps, wrapping several times
    assert sender.last_epsn == receiver.window(False).next - 1 > 1 << 24


def test_key_cache_never_forgets_a_counter_nor_confuses_keys() -> None:
    """GCM objects are cached per key; the nonce counter must outlive the cache and a key mutated in place
    must not be taken for its old value."""
    key, sender, receiver = pair(Mode.STH_AEAD, Service.UC)
    transport.seal(frame(7, opcode="UC_SEND_ONLY"), key, sender)
    for _ in range(transport.KEY_CACHE_SIZE + 1):  # push the key out of the cache
        transport.seal(frame(0), os.urandom(16), Sender(Mode.STH_AEAD, os.urandom(12)))
    with pytest.raises(transport.NonceReuse):  # same key bytes in another object: same counter
        transport.seal(frame(7, opcode="UC_SEND_ONLY"), bytes(bytearray(key)), sender)
    mutable = bytearray(os.urandom(16))
    first = transport.seal(frame(8, opcode="UC_SEND_ONLY"), mutable, sender)  # type: ignore[arg-type]
    mutable[:] = key
    with pytest.raises(transport.MacFailure):
        transport.open_frame(first, key, receiver)  # sealed under the old value, not under ``key``
    second = transport.seal(frame(9, opcode="UC_SEND_ONLY"), mutable, sender)  # type: ignore[arg-type]
    assert transport.open_frame(second, key, receiver)[0] == b"0123456789abcd"  # one pad byte


# ---- no key material in messages or reprs ----------------------------------------------------------------


def test_errors_and_reprs_carry_no_key_or_nonce_base() -> None:
    key, sender, receiver = pair(Mode.ICRC_MAC)
    sealed = transport.seal(frame(), key, sender)
    texts = [repr(sender), repr(receiver)]
    for attempt in (flip(sealed, len(sealed) * 8 - 1), sealed, sealed):
        try:
            transport.open_frame(attempt, key, receiver)
        except rocev2.WireError as err:
            texts += [str(err), repr(err)]
    try:
        transport.seal(frame(), key, sender)
    except transport.NonceReuse as err:
        texts.append(str(err))
    assert len(texts) == 7
    for text in texts:
        for secret in (key, sender.n0):
            assert secret.hex() not in text and repr(secret) not in text


# ---- the worked example of docs/secure-transport.md, rebuilt by hand -------------------------------------

DOC_KEY = bytes(range(16))
DOC_N0 = bytes(range(0xA0, 0xAC))


def doc_frame(psn: int) -> bytes:
    return bytes(Ether(src=addressing.host_mac(0), dst=addressing.host_mac(1))
                 / IPv6(src=addressing.host_gid(0, subnet=1), dst=addressing.host_gid(1, subnet=1), hlim=64)
                 / UDP(sport=0xC000, dport=4791, chksum=0)
                 / layers.BTH(opcode=0x04, pkey=0xFFFF, dqpn=0x100, psn=psn, ackreq=1)
                 / Raw(b"hello, RoCE!"))


def hand_masked_headers(sealed: bytes) -> bytes:
    """DESIGN section 3's masked headers, written out field by field (independent of ibsec.icrc)."""
    ipv6 = bytearray(sealed[IP:IP + 40])
    ipv6[0:4] = bytes([ipv6[0] | 0x0F, 0xFF, 0xFF, 0xFF])  # version kept, traffic class + flow label ones
    ipv6[7] = 0xFF  # hop limit
    dst = int.from_bytes(ipv6[24:40], "big") & ~(((1 << 38) - 1) << 80)  # MF zeroed (fec0::/10)
    ipv6[24:40] = dst.to_bytes(16, "big")
    udp = sealed[IP + 40:IP + 46] + b"\xff\xff"
    bth = sealed[BTH:BTH + 4] + b"\xff" + sealed[BTH + 5:BTH + 12]
    return b"\xff" * 8 + bytes(ipv6) + udp + bth


@pytest.mark.parametrize("mode", [Mode.ICRC_MAC, Mode.STH_AEAD])
def test_worked_example_matches_a_hand_built_gcm(mode: Mode) -> None:
    # the example seals the same PSNs in both modes, so mode 1 gets a key of its own (01 01 02 ... 0f)
    key = DOC_KEY if mode is Mode.STH_AEAD else bytes([mode]) + DOC_KEY[1:]
    sender = Sender(mode, DOC_N0, direction=0)
    transport.seal(doc_frame(0xFFFFFF), key, sender)
    sealed = transport.seal(doc_frame(0x000000), key, sender)  # the PSN wrapped: extended PSN 0x1000000
    assert sender.last_epsn == 0x1000000
    nonce = bytes.fromhex("a0a1a2a3a4a5a6a7a9a9aaab")  # N0 xor (0^31 || r=0 || d=0 || 0x1000000)
    assert transport.make_nonce(DOC_N0, 0, 0x1000000) == nonce
    aad = hand_masked_headers(sealed)
    assert sealed[BTH + 8] == 0x80 | mode << 4  # A bit kept, mode in the top three Resv7 bits
    expected = transport.AESGCM(key).encrypt(nonce, b"hello, RoCE!", aad)
    body = sealed[BTH + 12:]
    if mode is Mode.ICRC_MAC:
        assert body == expected[:-16] + expected[-16:-12]
    else:
        assert body[:-4] == expected[-16:] + expected[:-16]  # STH (the tag), then E(P), then the ICRC
        assert body.hex() == "55466378e22f0e3cbc6d0f14b070765b" "5c1ef005789c2e016966366d" "364bae5c"


def test_connection_n0_is_both_contributions_and_changes_with_either() -> None:
    requester, responder = bytes(range(12)), bytes(range(12, 24))
    n0 = transport.connection_n0(requester, responder)
    assert n0 == bytes(a ^ b for a, b in zip(requester, responder, strict=True))
    assert n0 != transport.connection_n0(requester, bytes(range(13, 25)))  # a new responder value
    with pytest.raises(ValueError):
        transport.connection_n0(requester[:11], responder)
