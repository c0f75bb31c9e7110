"""Secure transport: seal and open whole RoCEv2 frames in security modes 0-4 (DESIGN section 3).

A frame is bytes, Ethernet / IPv6 / UDP 4791 / H / P / ICRC, as Scapy builds it, so the agent, the attack
tools and the PTF tests share one implementation. :func:`seal` takes a mode-0 frame (its last 4 bytes are
the ICRC or a placeholder) and returns the frame of the sender's mode; :func:`open_frame` checks and strips
it again and returns the payload.

=====  =========  ================================================  ==============  ======================
mode   name       on the wire after UDP                             GCM plaintext   GCM associated data
=====  =========  ================================================  ==============  ======================
0      none       H, P, ICRC                                        -               -
1      icrc-mac   H, E(P), first 4 bytes of the tag                 P               masked headers
2      sth-aead   H, STH (16-byte tag), E(P), ICRC                  P               masked headers
3      sth-auth   H, STH (16-byte GMAC), P, ICRC                    empty           masked headers, then P
4      sth-hdr    H, STH (16-byte GMAC), P, ICRC                    empty           masked headers
=====  =========  ================================================  ==============  ======================

The mode travels in the top three Resv7 bits of BTH byte 8. Lengths (IPv6 payload length, UDP length)
are made final before anything is computed; "masked headers" are :func:`ibsec.icrc.masked` cut at the end
of H.

Nonces. nonce = N0 xor (0^30 || n || r || d || epsn63): N0 the per-connection, per-direction base, d the
direction bit, epsn63 the 63-bit extended PSN whose low 24 bits are the wire PSN, r = 1 for response
opcodes (ACK, RDMA READ responses, atomic ACK) and n = 1 for a NAK (an ACKNOWLEDGE whose AETH syndrome is
not ACK). r exists because an RC responder's ACKs carry the requester's PSNs in the same direction as the
responder's own requests; without it the two would share nonces. n exists because a responder that NAKs
PSN p (receiver not ready) later ACKs the same p; without it the NAK and the ACK would share a nonce.
Every key has one :class:`NonceCounter` in the process (looked up by a one-way fingerprint of the
key), which hands out extended PSNs strictly increasing per nonce stream and refuses any stream whose
nonces could meet another stream's under the same key, so no nonce is ever used twice by this process.

Replay. The receiver reconstructs the extended PSN as the candidate nearest to the one it expects
(sRDMA), then RC (and RD) requests must be exactly the expected one (in order); UC and UD packets and every
response pass a 64-packet sliding window. Nothing in the receive state changes unless the MAC verified.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from scapy.utils import checksum

from ibsec import icrc, opcodes, rocev2
from ibsec.names import Mode
from ibsec.rocev2 import ICRC_LEN, IPV6_LEN, STH_LEN, Malformed, RoceFrame, WireError

SHORT_TAG_LEN = 4
NONCE_LEN = 12
PSN_BITS = 24
PSN_MASK = (1 << PSN_BITS) - 1
EPSN_LIMIT = 1 << 63
"""Extended PSNs are 63 bits; a stream that reaches this limit is exhausted."""
REPLAY_WINDOW = 64
KEY_LENGTHS = (16, 24, 32)
_RESPONSE_OPERATIONS = frozenset({"RDMA_READ_RESPONSE_FIRST", "RDMA_READ_RESPONSE_MIDDLE",
                                  "RDMA_READ_RESPONSE_LAST", "RDMA_READ_RESPONSE_ONLY",
                                  "ACKNOWLEDGE", "ATOMIC_ACKNOWLEDGE"})
_IN_ORDER_SERVICES = frozenset({opcodes.Service.RC, opcodes.Service.RD})
_ACKNOWLEDGE = "ACKNOWLEDGE"
_NAK_SYNDROME = 0xE0  # AETH syndrome bits 7-5: 000 ACK, 001 RNR NAK, 011 NAK


_MODES = tuple(Mode)
"""The modes by value (a tuple index is cheaper than the enum call per packet)."""


# ---- errors: every one names what failed and never carries key bytes ---------------------------------------


class TransportError(WireError):
    """A frame the secure transport refuses; ``counter`` names the receive statistic it increments."""

    counter = "rejected"


class IcrcError(TransportError):
    """The ICRC does not match (modes 0 and 2-4)."""

    counter = "icrc_errors"


class MacFailure(TransportError):
    """The GCM tag or GMAC did not verify: the frame was forged, modified or sealed under another key."""

    counter = "mac_failures"


class ReplayError(TransportError):
    """The extended PSN was already accepted or fell out of the window (stale)."""

    counter = "replays"


class SequenceError(ReplayError):
    """An RC request ahead of the expected PSN (reordered or after a loss); IBA answers with a NAK."""

    counter = "out_of_sequence"


class ReservedMode(TransportError):
    """Security mode 5-7 (reserved): dropped and counted."""

    counter = "reserved_modes"


class ModeMismatch(TransportError):
    """The frame's mode is not the connection's (e.g. a downgrade to mode 0)."""

    counter = "mode_mismatches"


class NonceReuse(TransportError):
    """Sealing refused: the nonce would repeat (PSN not ahead of the stream, or streams could collide)."""

    counter = "nonce_refusals"


# ---- GCM primitives (the NIST known-answer tests run through these) ---------------------------------------


def _check_key(key: bytes | None) -> bytes:
    if key is None or len(key) not in KEY_LENGTHS:
        raise ValueError(f"an AES key of {KEY_LENGTHS} bytes is required for modes 1-4")
    return key


def gcm_seal(key: bytes, nonce: bytes, plaintext: bytes, aad: bytes,
             tag_len: int = 16) -> tuple[bytes, bytes]:
    """AES-GCM encryption: (ciphertext, tag truncated to ``tag_len`` bytes: 16 or 4)."""
    if tag_len not in (16, SHORT_TAG_LEN):
        raise ValueError(f"tag length {tag_len} is not 16 or {SHORT_TAG_LEN}")
    sealed = _key_context(key).aead.encrypt(nonce, plaintext, aad)
    return sealed[:-16], sealed[-16:][:tag_len]


def gcm_open(key: bytes, nonce: bytes, ciphertext: bytes, aad: bytes, tag: bytes) -> bytes:
    """AES-GCM decryption with a 16- or 4-byte tag; raises :class:`MacFailure`. Tag checks are constant-time.

    A 16-byte tag is checked inside OpenSSL. For a 4-byte tag the plaintext is recovered first (GCM's
    keystream depends only on key and nonce, so encrypting the ciphertext yields it), then encrypted again
    for the full tag, whose first 4 bytes are compared with :func:`hmac.compare_digest`: what OpenSSL does
    for a truncated tag, with the cached GCM object instead of a cipher context set up per packet. Nothing
    computed leaves this function unless the tag verified.
    """
    aead = _key_context(key).aead
    try:
        if len(tag) == 16:
            return aead.decrypt(nonce, ciphertext + tag, aad)
    except InvalidTag:
        raise MacFailure("GCM tag did not verify") from None
    if len(tag) != SHORT_TAG_LEN:
        raise MacFailure(f"tag of {len(tag)} bytes is neither 16 nor {SHORT_TAG_LEN}")
    plaintext = aead.encrypt(nonce, ciphertext, None)[:len(ciphertext)]
    expected = aead.encrypt(nonce, plaintext, aad)[len(ciphertext):len(ciphertext) + SHORT_TAG_LEN]
    if not hmac.compare_digest(expected, tag):
        raise MacFailure("GCM tag did not verify")
    return plaintext


class _KeyContext:
    """What sealing and opening under one key need, made once per key: the AES-GCM object (its key
    schedule) and the key's :class:`NonceCounter`. Holds no key bytes of its own; its repr shows none."""

    __slots__ = ("fingerprint", "aead", "_counter")

    def __init__(self, fingerprint: bytes, aead: AESGCM) -> None:
        self.fingerprint = fingerprint
        self.aead = aead
        self._counter: NonceCounter | None = None

    def counter(self) -> NonceCounter:
        """The key's counter, looked up on first use (only sealing keys get one; counters never expire)."""
        if self._counter is None:
            with _COUNTERS_LOCK:
                self._counter = _COUNTERS.setdefault(self.fingerprint, NonceCounter())
        return self._counter


KEY_CACHE_SIZE = 64
"""Keys whose GCM objects are kept (least recently added go first); the agent uses one key per connection."""
_CONTEXTS: dict[bytes, _KeyContext] = {}  # keyed fingerprint -> context
_BY_OBJECT: dict[int, tuple[bytes, _KeyContext]] = {}  # id(key) -> (that key object, its context)
_CONTEXTS_LOCK = threading.Lock()


def _fingerprint(key: bytes) -> bytes:
    """A keyed BLAKE2b fingerprint: names the key in the caches without storing it there."""
    return hashlib.blake2b(b"ibsec nonce counter", key=_check_key(key), digest_size=16).digest()


def _key_context(key: bytes) -> _KeyContext:
    """The context of ``key``. The same ``bytes`` object (the agent keeps one per connection) is found by
    identity, so the fingerprint is computed once per key object, not per packet; the entry holds a
    reference to the object, so its id cannot be reused while it is cached. A mutable key (bytearray) is
    fingerprinted on every call: its contents may have changed."""
    entry = _BY_OBJECT.get(id(key))
    if entry is not None and entry[0] is key:
        return entry[1]
    fingerprint = _fingerprint(key)
    with _CONTEXTS_LOCK:
        context = _CONTEXTS.pop(fingerprint, None) or _KeyContext(fingerprint, AESGCM(key))
        _CONTEXTS[fingerprint] = context
        if type(key) is bytes:
            _BY_OBJECT[id(key)] = (key, context)
        _drop_oldest(_CONTEXTS)
        _drop_oldest(_BY_OBJECT)
    return context


def _drop_oldest(cache: dict[Any, Any]) -> None:
    """Bound a cache to :data:`KEY_CACHE_SIZE` entries, dropping those inserted first."""
    while len(cache) > KEY_CACHE_SIZE:
        del cache[next(iter(cache))]


# ---- nonces ---------------------------------------------------------------------------------------------


def is_response(opcode: opcodes.Opcode) -> bool:
    """Responses (ACKs, RDMA READ responses, atomic ACKs) carry the requester's PSNs: nonce bit r."""
    return opcode.code in _RESPONSE_CODES


_RESPONSE_CODES = frozenset(code for code, op in opcodes.OPCODES.items()
                            if op.operation in _RESPONSE_OPERATIONS)


def is_nak(found: RoceFrame) -> bool:
    """An ACKNOWLEDGE whose AETH syndrome is not ACK (RNR NAK, NAK): nonce bit n."""
    op = found.opcode
    if op.operation != _ACKNOWLEDGE:
        return False
    return bool(found.data[found.ext_offset(opcodes.Ext.AETH)] & _NAK_SYNDROME)


def stream_base(n0: bytes, direction: int, response: bool = False, nak: bool = False) -> int:
    """N0 xor (0^30 || n || r || d || 0^63) as an integer: the nonce of extended PSN e is base xor e."""
    if len(n0) != NONCE_LEN:
        raise ValueError(f"N0 must be {NONCE_LEN} bytes, got {len(n0)}")
    if direction not in (0, 1):
        raise ValueError(f"direction bit must be 0 or 1, got {direction}")
    return int.from_bytes(n0, "big") ^ (direction << 63) ^ (int(response) << 64) ^ (int(nak) << 65)


def make_nonce(n0: bytes, direction: int, epsn: int, response: bool = False, nak: bool = False) -> bytes:
    """The 96-bit GCM nonce N0 xor (0^30 || n || r || d || epsn63)."""
    if not 0 <= epsn < EPSN_LIMIT:
        raise ValueError(f"extended PSN {epsn} is not a 63-bit value")
    return (stream_base(n0, direction, response, nak) ^ epsn).to_bytes(NONCE_LEN, "big")


def connection_n0(requester: bytes, responder: bytes) -> bytes:
    """N0 of a connection from both ends' contributions (CM REQ and REP PrivateData): requester xor
    responder. Both directions use it; the direction bit keeps their nonces apart.

    The responder draws its contribution fresh for each connection, so a REQ replayed to a responder that
    restarted (and forgot it) gets a new N0: frames sealed for the earlier connection fail their MAC on the
    new one, in both directions, whatever key the scope gives. A reader of a capture that holds both CM
    messages computes N0 without any key (the Wireshark dissector does).
    """
    if len(requester) != NONCE_LEN or len(responder) != NONCE_LEN:
        raise ValueError(f"N0 contributions are {NONCE_LEN} bytes")
    return bytes(a ^ b for a, b in zip(requester, responder, strict=True))


def direction_bit(local_endpoint: bytes, remote_endpoint: bytes) -> int:
    """sRDMA's direction bit from endpoint ids (e.g. GID || QPN): 0 from the smaller to the larger."""
    if local_endpoint == remote_endpoint:
        raise ValueError("both ends of a connection have the same endpoint id")
    return 0 if local_endpoint < remote_endpoint else 1


def reconstruct_epsn(psn: int, expected: int) -> int:
    """The 64-bit extended PSN with low 24 bits ``psn`` nearest to ``expected`` (never negative)."""
    diff = (psn - expected) & PSN_MASK
    if diff >= 1 << (PSN_BITS - 1):
        diff -= 1 << PSN_BITS
    epsn = expected + diff
    return epsn + (1 << PSN_BITS) if epsn < 0 else epsn


class NonceCounter:
    """All nonce streams sealing under one key in this process; use :func:`nonce_counter` to get it.

    A stream is identified by its base (:func:`stream_base`); its nonces are base xor e for extended
    PSNs e < 2^63. Two different bases can meet only if they agree above bit 62, so such a pair is
    refused outright; within a stream extended PSNs strictly increase. Thread-safe.
    """

    def __init__(self) -> None:
        self._next: dict[int, int] = {}
        self._lock = threading.Lock()

    def claim(self, base: int, psn: int) -> int:
        """Reserve and return the extended PSN for wire PSN ``psn`` on the stream ``base``."""
        with self._lock:
            following = self._register(base)
            epsn = reconstruct_epsn(psn, following)
            if epsn < following:
                raise NonceReuse(f"PSN {psn:#08x} is behind the stream (next extended PSN {following:#x})")
            if epsn >= EPSN_LIMIT:
                raise NonceReuse("the stream's 63-bit extended PSN is exhausted: re-key")
            self._next[base] = epsn + 1
            return epsn

    def register(self, *bases: int) -> None:
        """Make streams known before they seal (or ones the peer seals on): all of them or, if any could
        meet a known stream or each other, none (:class:`NonceReuse`)."""
        with self._lock:
            new = [base for base in dict.fromkeys(bases) if base not in self._next]
            for index, base in enumerate(new):
                self._check_disjoint(base, list(self._next) + new[:index])
            self._next.update(dict.fromkeys(new, 0))

    def _register(self, base: int) -> int:
        following = self._next.get(base)
        if following is None:
            self._check_disjoint(base, self._next)
            following = self._next[base] = 0
        return following

    @staticmethod
    def _check_disjoint(base: int, others: Iterable[int]) -> None:
        if any((base ^ other) >> 63 == 0 for other in others):
            raise NonceReuse("this N0 could produce the nonces of another stream under the same key: "
                             "choose a new N0")


_COUNTERS: dict[bytes, NonceCounter] = {}
_COUNTERS_LOCK = threading.Lock()


def nonce_counter(key: bytes) -> NonceCounter:
    """The process's one :class:`NonceCounter` for ``key`` (found by a keyed BLAKE2b fingerprint)."""
    return _key_context(key).counter()


_STREAMS = ((False, False), (True, False), (True, True))
"""The nonce streams of one direction: requests, responses, NAKs."""


def register_streams(key: bytes, sender: Sender, *receivers: Receiver) -> None:
    """At connection set-up: make every nonce stream of the connection known to the key's counter.

    Registers the sender's streams and the peer's (the receivers'), requests and responses alike, so an
    N0 that could repeat a nonce of any other stream under ``key`` is refused now (:class:`NonceReuse`:
    agree on a new N0) rather than at the first packet. With per-direction N0s this is what makes the two
    directions disjoint for sure; the direction bit alone separates them only when both share one N0.
    """
    ends = [(sender.n0, sender.direction)] + [(r.n0, r.direction) for r in receivers]
    nonce_counter(key).register(*(stream_base(n0, direction, response, nak)
                                  for n0, direction in ends for response, nak in _STREAMS))


# ---- per-connection contexts -----------------------------------------------------------------------------


@dataclass
class Sender:
    """One direction of a connection, sending side: the mode and the nonce base of that direction."""

    mode: Mode
    n0: bytes = field(default=bytes(NONCE_LEN), repr=False)
    direction: int = 0
    last_epsn: int | None = None
    """Extended PSN of the last frame sealed (for ACK bookkeeping and tests)."""

    def __post_init__(self) -> None:
        self.mode = Mode(self.mode)  # a plain int from a config file becomes a Mode, 5-7 are refused
        stream_base(self.n0, self.direction)  # checks N0's length and the direction bit now


@dataclass
class ReplayWindow:
    """Accepted extended PSNs: ``next`` is one past the highest; bit i of ``seen`` is ``next - 1 - i``."""

    in_order: bool
    next: int = 0
    seen: int = (1 << REPLAY_WINDOW) - 1  # nothing older than the start is acceptable

    def check(self, epsn: int) -> None:
        """Raise if ``epsn`` may not be accepted; changes nothing."""
        if self.in_order:
            if epsn < self.next:
                raise ReplayError(f"extended PSN {epsn:#x} is before the expected {self.next:#x}")
            if epsn > self.next:
                raise SequenceError(f"extended PSN {epsn:#x} is ahead of the expected {self.next:#x}")
            return
        if epsn >= self.next:
            return
        age = self.next - 1 - epsn
        if age >= REPLAY_WINDOW:
            raise ReplayError(f"extended PSN {epsn:#x} is older than the {REPLAY_WINDOW}-packet window")
        if self.seen >> age & 1:
            raise ReplayError(f"extended PSN {epsn:#x} was already accepted")

    def accept(self, epsn: int) -> None:
        """Record ``epsn`` (after :meth:`check` passed and the MAC verified)."""
        if epsn >= self.next:
            shift = epsn - self.next + 1
            kept = self.seen << shift if shift < REPLAY_WINDOW else 0
            self.seen = (kept | 1) & ((1 << REPLAY_WINDOW) - 1)
            self.next = epsn + 1
        else:
            self.seen |= 1 << (self.next - 1 - epsn)


@dataclass
class Receiver:
    """One direction of a connection, receiving side: expected mode, nonce base, replay state, counters.

    ``initial_psn`` is the first PSN agreed at set-up. Requests and responses (nonce bit r) keep separate
    replay windows.
    """

    mode: Mode
    service: opcodes.Service
    n0: bytes = field(default=bytes(NONCE_LEN), repr=False)
    direction: int = 0
    initial_psn: int = 0
    stats: dict[str, int] = field(default_factory=dict)
    consecutive_mac_failures: int = 0
    _windows: dict[tuple[bool, bool], ReplayWindow] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.mode = Mode(self.mode)
        stream_base(self.n0, self.direction)

    def window(self, response: bool, nak: bool = False) -> ReplayWindow:
        """The replay window of requests (False), responses (True) or NAKs (both True)."""
        stream = (response, nak)
        if stream not in self._windows:
            in_order = self.service in _IN_ORDER_SERVICES and not response
            self._windows[stream] = ReplayWindow(in_order, next=self.initial_psn & PSN_MASK)
        return self._windows[stream]

    def count(self, name: str) -> None:
        """Increment one receive statistic."""
        self.stats[name] = self.stats.get(name, 0) + 1


@dataclass(frozen=True)
class OpenInfo:
    """What :func:`open_frame` learnt besides the payload."""

    mode: Mode
    opcode: opcodes.Opcode
    epsn: int
    response: bool
    headers: bytes = field(repr=False)
    nak: bool = False
    """H: the BTH and its extension headers, as received."""


# ---- seal ---------------------------------------------------------------------------------------------


def seal(frame: bytes, key: bytes | None, sender: Sender) -> bytes:
    """The mode-``sender.mode`` frame for a mode-0 ``frame`` (whose last 4 bytes are its ICRC slot).

    Mode 0 makes no crypto call and needs no key; it rewrites the ICRC (MF bits as zeros) and nothing else.
    Modes 1-4 claim the next extended PSN of the stream from the key's :class:`NonceCounter` first, so a
    nonce is never used twice even when sealing fails later.
    """
    found = rocev2.locate(frame)
    if found.mode_byte & 0x7F:
        raise Malformed("BTH Resv7 of the frame to seal is not zero (already sealed?)")
    if sender.mode is Mode.NONE:
        return _finish(bytearray(frame), found.ip, with_icrc=True)
    key = _check_key(key)
    context = _key_context(key)
    end = found.headers_end
    base = stream_base(sender.n0, sender.direction, is_response(found.opcode), is_nak(found))
    epsn = context.counter().claim(base, found.psn)
    nonce = (base ^ epsn).to_bytes(NONCE_LEN, "big")
    payload = frame[end:-ICRC_LEN]

    # Lengths first: the associated data covers the final IPv6 payload length and UDP length.
    trailer = SHORT_TAG_LEN if sender.mode is Mode.ICRC_MAC else STH_LEN + ICRC_LEN
    out = bytearray(frame[:end])
    mode_at = found.bth + rocev2.BTH_MODE_BYTE
    out[mode_at] = (out[mode_at] & 0x80) | (sender.mode << rocev2.MODE_SHIFT)
    rocev2.set_lengths(out, found.ip, len(out) - found.udp + len(payload) + trailer)
    aad = icrc.masked_bytes(out, found.ip, end)
    if sender.mode is Mode.ICRC_MAC:
        ciphertext, tag = gcm_seal(key, nonce, payload, aad, SHORT_TAG_LEN)
        out += ciphertext + tag
    elif sender.mode is Mode.STH_AEAD:
        ciphertext, tag = gcm_seal(key, nonce, payload, aad)
        out += tag + ciphertext + bytes(ICRC_LEN)
    else:
        covered = aad + payload if sender.mode is Mode.STH_AUTH else aad
        _, tag = gcm_seal(key, nonce, b"", covered)
        out += tag + payload + bytes(ICRC_LEN)
    sender.last_epsn = epsn
    return _finish(out, found.ip, with_icrc=sender.mode.has_sth, masked_headers=aad)


def _finish(out: bytearray, ip: int, with_icrc: bool, masked_headers: bytes | None = None) -> bytes:
    """A valid UDP checksum if the frame carried one, and the ICRC where the mode has one (the lengths are
    final already: :func:`~ibsec.rocev2.locate` checked them, or :func:`seal` set them)."""
    if with_icrc:  # the ICRC sees the UDP checksum as ones, so it can come first
        out[-ICRC_LEN:] = icrc.compute_bytes(out, ip, masked_headers)
    udp = ip + IPV6_LEN
    if out[udp + 6:udp + 8] != b"\x00\x00":
        out[udp + 6:udp + 8] = b"\x00\x00"
        pseudo = bytes(out[ip + 8:ip + 40]) + len(out[udp:]).to_bytes(4, "big") + b"\x00\x00\x00\x11"
        value = checksum(pseudo + bytes(out[udp:])) or 0xFFFF
        out[udp + 6:udp + 8] = value.to_bytes(2, "big")
    return bytes(out)


# ---- open ---------------------------------------------------------------------------------------------


def open_frame(
    frame: bytes | RoceFrame, key: bytes | None, receiver: Receiver, commit: bool = True
) -> tuple[bytes, OpenInfo]:
    """Verify (and decrypt) a received frame: (payload without pad bytes, info).

    ``frame`` is the frame's bytes or, from a receiver that read its headers already, the frame as
    :func:`ibsec.rocev2.locate` (or :func:`~ibsec.rocev2.parse`) found it: it is not located again.

    Raises a :class:`TransportError` (or :class:`~ibsec.rocev2.Malformed`) and counts it in
    ``receiver.stats``; the receive state changes only for a frame that verified, and only if ``commit``:
    a receiver that cannot keep an authentic request (receiver not ready) verifies it without taking its
    PSN, so the sender's retry is accepted later.
    """
    try:
        payload, info = _open(frame, key, receiver, commit)
    except WireError as err:
        receiver.count(getattr(err, "counter", "malformed"))
        if isinstance(err, MacFailure):
            receiver.consecutive_mac_failures += 1
        raise
    receiver.count("accepted")
    receiver.consecutive_mac_failures = 0
    return payload, info


def _open(
    located: bytes | RoceFrame, key: bytes | None, receiver: Receiver, commit: bool
) -> tuple[bytes, OpenInfo]:
    found = located if isinstance(located, RoceFrame) else rocev2.locate(located)
    frame = found.data
    mode_byte = found.mode_byte
    if mode_byte >> 4 & 0x7 > Mode.STH_HDR:
        raise ReservedMode(f"security mode {mode_byte >> 4 & 0x7} is reserved")
    mode = _MODES[mode_byte >> 4 & 0x7]
    if mode is not receiver.mode:
        raise ModeMismatch(f"frame in mode {mode.value}, connection in mode {receiver.mode.value}")
    if mode_byte & 0x0F:
        raise Malformed("BTH reserved bits below the security mode are not zero")
    opcode = found.opcode
    if opcode.service is not receiver.service:
        raise Malformed(f"{opcode.name} is not a {receiver.service.name} opcode")
    end = found.headers_end
    aad = icrc.masked(found, end)
    if mode is not Mode.ICRC_MAC and frame[-ICRC_LEN:] != icrc.compute(found, aad):
        raise IcrcError("ICRC mismatch")
    if mode.has_sth and len(frame) - ICRC_LEN - end < STH_LEN:
        raise Malformed("frame too short for its secure transport header")
    response, nak = is_response(opcode), is_nak(found)
    window = receiver.window(response, nak)
    epsn = reconstruct_epsn(found.psn, window.next)
    window.check(epsn)
    payload = _verify(found, aad, mode, key, receiver, epsn, response, nak)
    if found.pad_count > len(payload):
        raise Malformed(f"PadCnt {found.pad_count} exceeds the {len(payload)}-byte payload")
    if commit:
        window.accept(epsn)
    info = OpenInfo(mode, opcode, epsn, response, frame[found.bth:end], nak)
    return payload[:len(payload) - found.pad_count], info


def _verify(found: RoceFrame, aad: bytes, mode: Mode, key: bytes | None, receiver: Receiver, epsn: int,
            response: bool, nak: bool) -> bytes:
    """The payload P of a verified frame (``aad``: its masked headers); mode 0 makes no crypto call."""
    frame = found.data
    end = found.ip + len(aad) - len(icrc.LRH_ONES)
    if mode is Mode.NONE:
        return frame[end:-ICRC_LEN]
    nonce = make_nonce(receiver.n0, receiver.direction, epsn, response, nak)
    key = _check_key(key)
    if mode is Mode.ICRC_MAC:
        return gcm_open(key, nonce, frame[end:-ICRC_LEN], aad, frame[-ICRC_LEN:])
    tag, body = frame[end:end + STH_LEN], frame[end + STH_LEN:-ICRC_LEN]
    if mode is Mode.STH_AEAD:
        return gcm_open(key, nonce, body, aad, tag)
    gcm_open(key, nonce, b"", aad + body if mode is Mode.STH_AUTH else aad, tag)
    return body
