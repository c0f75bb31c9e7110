"""MAD authentication trailer (DESIGN section 4): a GCM tag on every MAD between a CA and the SM.

The 28-byte trailer follows the 256-byte MAD in the UD payload, so Wireshark still sees a standard MAD::

    offset  size  field
    256     12    nonce   fresh random 96-bit GCM nonce (os.urandom)
    268     16    tag     AES-GCM tag, empty plaintext

GCM associated data = ``b"ibsec-mad-auth"`` || the sender's 16-byte GID (the IPv6 source) || the whole
256-byte MAD. The key is the one only that CA and the SM hold (CA_SK_i). The MAD's TransactionID is
covered, so a receiver that keeps the last TID per sender (:class:`TidReplayGuard`) refuses replays.

Tags are checked by ``cryptography``'s AES-GCM, which compares in constant time; failures raise
:class:`MadAuthError`, whose message never carries key bytes.
"""

from __future__ import annotations

import ipaddress
import json
import os
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from scapy.contrib import roce
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.packet import Packet

from ibsec import configfile
from ibsec.layers import MAD, MAD_AUTH_NONCE_LEN, MAD_AUTH_TAG_LEN, MAD_LEN, MadAuth

MAD_AUTH_LEN = MAD_AUTH_NONCE_LEN + MAD_AUTH_TAG_LEN
_LABEL = b"ibsec-mad-auth"
_KEY_LENGTHS = (16, 32)


class MadAuthError(Exception):
    """A MAD failed authentication (bad or missing trailer, wrong key or sender, tampering)."""


class MadReplayError(MadAuthError):
    """An authentic MAD whose TransactionID is not newer than the last one seen from its sender."""


def _gid_bytes(gid: bytes | str) -> bytes:
    if isinstance(gid, bytes):
        if len(gid) != 16:
            raise MadAuthError(f"sender GID must be 16 bytes, got {len(gid)}")
        return gid
    return ipaddress.IPv6Address(gid).packed


def _aesgcm(key: bytes) -> AESGCM:
    if len(key) not in _KEY_LENGTHS:
        raise MadAuthError(f"MAD authentication key must be 16 or 32 bytes, got {len(key)}")
    return AESGCM(key)


def _check_mad(mad: bytes) -> None:
    if len(mad) != MAD_LEN:
        raise MadAuthError(f"a MAD is {MAD_LEN} bytes, got {len(mad)}")


def mad_tag(key: bytes, mad: bytes, sender_gid: bytes | str, nonce: bytes) -> bytes:
    """The 16-byte GCM tag of a 256-byte MAD sent by ``sender_gid`` under ``nonce``."""
    _check_mad(mad)
    if len(nonce) != MAD_AUTH_NONCE_LEN:
        raise MadAuthError(f"nonce must be {MAD_AUTH_NONCE_LEN} bytes, got {len(nonce)}")
    return _aesgcm(key).encrypt(nonce, b"", _LABEL + _gid_bytes(sender_gid) + mad)


def seal(key: bytes, mad: bytes, sender_gid: bytes | str) -> bytes:
    """The MAD followed by its trailer (fresh random nonce, tag): the UD payload to send."""
    nonce = os.urandom(MAD_AUTH_NONCE_LEN)
    return mad + nonce + mad_tag(key, mad, sender_gid, nonce)


def verify(key: bytes, payload: bytes, sender_gid: bytes | str) -> bytes:
    """Check a UD payload (MAD + trailer) from ``sender_gid``; returns the 256-byte MAD.

    Raises :class:`MadAuthError` if the trailer is missing or the tag does not verify.
    """
    if len(payload) != MAD_LEN + MAD_AUTH_LEN:
        raise MadAuthError(f"authenticated MAD must be {MAD_LEN + MAD_AUTH_LEN} bytes, got {len(payload)}")
    mad = payload[:MAD_LEN]
    nonce = payload[MAD_LEN:MAD_LEN + MAD_AUTH_NONCE_LEN]
    tag = payload[MAD_LEN + MAD_AUTH_NONCE_LEN:]
    try:
        _aesgcm(key).decrypt(nonce, tag, _LABEL + _gid_bytes(sender_gid) + mad)
    except InvalidTag:
        raise MadAuthError("MAD authentication tag does not verify") from None
    return mad


def _mad_bytes(pkt: Packet) -> tuple[Packet, bytes]:
    mad = pkt.getlayer(MAD)
    if mad is None:
        raise MadAuthError("packet carries no MAD")
    trailer = mad.getlayer(MadAuth)
    data = bytes(mad)
    return mad, data[:len(data) - len(trailer)] if trailer is not None else data


def _sender(pkt: Packet) -> str:
    ipv6 = pkt.getlayer(IPv6)
    if ipv6 is None:
        raise MadAuthError("packet has no IPv6 header: no sender GID")
    return str(ipv6.src)


def sign_packet(key: bytes, pkt: Packet) -> Packet:
    """A copy of a RoCEv2 MAD packet with a fresh trailer (replacing any).

    The IPv6 and UDP lengths and the ICRC of the copy are recomputed on build, so is a non-zero UDP
    checksum (a zero one, RoCEv2's usual, stays zero).
    """
    out = pkt.copy()
    mad, data = _mad_bytes(out)
    old = mad.getlayer(MadAuth)
    if old is not None and old.underlayer is not None:
        old.underlayer.remove_payload()
    sealed = seal(key, data, _sender(out))
    mad.lastlayer().add_payload(MadAuth(sealed[MAD_LEN:]))
    _recompute_lengths(out)
    return out


def _recompute_lengths(pkt: Packet) -> None:
    ipv6, udp, bth = pkt.getlayer(IPv6), pkt.getlayer(UDP), pkt.getlayer(roce.BTH)
    if ipv6 is not None:
        ipv6.plen = None
    if udp is not None:
        udp.len = None
        if udp.chksum != 0:
            udp.chksum = None
    if bth is not None:
        bth.icrc = None


def verify_packet(key: bytes, pkt: Packet) -> Packet:
    """Check the trailer of a RoCEv2 MAD packet against its IPv6 source; returns the MAD layer."""
    mad, data = _mad_bytes(pkt)
    trailer = mad.getlayer(MadAuth)
    if trailer is None:
        raise MadAuthError("MAD has no authentication trailer")
    verify(key, data + bytes(trailer), _sender(pkt))
    return mad


class ReplayStateError(ValueError):
    """A replay state file that cannot be used (the message says which file and why)."""


STATE_FORMAT = "ibsec-tid-state"


class TidReplayGuard:
    """Remembers the last TransactionID accepted from each sender; older or equal TIDs are replays.

    Call :meth:`accept` only after the MAD's tag verified, so a forged MAD cannot advance the counter.
    Senders number their requests and traps with an increasing 64-bit TID.

    With a ``state`` file the last TIDs survive a restart of the receiver: they are read when the guard
    is made and written (atomically, mode 0600) before :meth:`accept` returns, so a MAD captured before
    a restart is still a replay after it, even if the receiver was killed right after acting on it.
    """

    def __init__(self, state: Path | None = None) -> None:
        self._last: dict[bytes, int] = {}
        self.replays = 0
        self.state = state
        if state is not None and state.exists():
            self._last = _read_state(state)

    def accept(self, sender_gid: bytes | str, tid: int) -> None:
        """Record ``tid`` from ``sender_gid``; raise :class:`MadReplayError` if it is not newer."""
        sender = _gid_bytes(sender_gid)
        last = self._last.get(sender)
        if last is not None and tid <= last:
            self.replays += 1
            raise MadReplayError(f"TransactionID {tid:#x} from {ipaddress.IPv6Address(sender)} "
                                 f"is not newer than {last:#x}")
        self._last[sender] = tid
        if self.state is not None:
            _write_state(self.state, self._last)


def _read_state(path: Path) -> dict[bytes, int]:
    try:
        doc = configfile.load_file(path)[0]
        if not isinstance(doc, dict) or doc.get("format") != STATE_FORMAT or not isinstance(doc.get("last"),
                                                                                            dict):
            raise ValueError(f"not an {STATE_FORMAT} file")
        return {ipaddress.IPv6Address(gid).packed: _tid(value) for gid, value in doc["last"].items()}
    except ValueError as err:  # configfile's errors and bad addresses or TIDs alike
        raise ReplayStateError(f"replay state {path}: {err} (remove it only if no MAD captured before "
                               "could be replayed)") from None


def _tid(value: object) -> int:
    if not isinstance(value, str) or not 0 <= int(value, 16) < 1 << 64:
        raise ValueError(f"TransactionID {value!r} is not a 64-bit hex string")
    return int(value, 16)


def _write_state(path: Path, last: dict[bytes, int]) -> None:
    doc = {"format": STATE_FORMAT, "version": 1,
           "last": {str(ipaddress.IPv6Address(gid)): f"{tid:#x}" for gid, tid in sorted(last.items())}}
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        json.dump(doc, file)
    os.replace(temporary, path)
