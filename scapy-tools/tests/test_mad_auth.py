"""MAD authentication trailer: genuine MADs verify, forged or modified ones and replays do not."""

from __future__ import annotations

import ipaddress
import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ibsec import addressing, icrc, mad_auth
from ibsec import layers as L
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether
from test_layers import DST_GID, SRC_GID, roce_frame

KEY = bytes(range(16))


def trap_mad(tid: int = 1) -> bytes:
    return bytes(L.MAD(transaction_id=tid) / L.SMP() / L.Notice(
        data_details=L.Ntc257258(lid1=1, key=0x8001), mf=0x155, recv_port=1))


def trap_packet(tid: int = 1) -> Ether:
    return roce_frame(L.BTH(opcode=0x64, dqpn=1), L.DETH(qkey=L.GSI_QKEY, srcqp=1), L.MAD(trap_mad(tid)))


def test_sealed_mad_verifies_and_keeps_the_mad_intact() -> None:
    mad = trap_mad()
    sealed = mad_auth.seal(KEY, mad, SRC_GID)
    assert len(sealed) == L.MAD_LEN + mad_auth.MAD_AUTH_LEN and sealed[:L.MAD_LEN] == mad
    assert mad_auth.verify(KEY, sealed, SRC_GID) == mad


def test_nonces_are_fresh() -> None:
    mad = trap_mad()
    trailers = {mad_auth.seal(KEY, mad, SRC_GID)[L.MAD_LEN:] for _ in range(20)}
    assert len(trailers) == 20


@settings(max_examples=60, deadline=None)
@given(st.integers(0, L.MAD_LEN + mad_auth.MAD_AUTH_LEN - 1), st.integers(0, 7))
def test_any_flipped_bit_fails(offset: int, bit: int) -> None:
    sealed = bytearray(mad_auth.seal(KEY, trap_mad(), SRC_GID))
    sealed[offset] ^= 1 << bit
    with pytest.raises(mad_auth.MadAuthError):
        mad_auth.verify(KEY, bytes(sealed), SRC_GID)


def test_wrong_key_wrong_sender_or_missing_trailer_fail() -> None:
    sealed = mad_auth.seal(KEY, trap_mad(), SRC_GID)
    with pytest.raises(mad_auth.MadAuthError):
        mad_auth.verify(os.urandom(16), sealed, SRC_GID)
    with pytest.raises(mad_auth.MadAuthError):
        mad_auth.verify(KEY, sealed, DST_GID)
    with pytest.raises(mad_auth.MadAuthError, match="must be"):
        mad_auth.verify(KEY, trap_mad(), SRC_GID)


def test_forged_trap_with_attacker_key_fails() -> None:
    """An attacker without CA_SK_i forges a trap blaming an innocent port: the SM must refuse it."""
    forged = mad_auth.seal(os.urandom(16), trap_mad(), SRC_GID)
    with pytest.raises(mad_auth.MadAuthError):
        mad_auth.verify(KEY, forged, SRC_GID)


def test_errors_carry_no_key_bytes() -> None:
    key = bytes.fromhex("a1b2c3d4e5f60718293a4b5c6d7e8f90")
    with pytest.raises(mad_auth.MadAuthError) as err:
        mad_auth.verify(key, mad_auth.seal(KEY, trap_mad(), SRC_GID), SRC_GID)
    text = str(err.value) + repr(err.value)
    assert key.hex() not in text and key.hex().upper() not in text and str(key) not in text


def test_bad_key_length_is_refused() -> None:
    with pytest.raises(mad_auth.MadAuthError, match="16 or 32"):
        mad_auth.seal(b"short", trap_mad(), SRC_GID)


def test_signed_packet_verifies_on_the_wire_and_keeps_a_valid_icrc() -> None:
    signed = mad_auth.sign_packet(KEY, trap_packet())
    raw = bytes(signed)
    assert icrc.verify(raw)
    received = Ether(raw)
    mad = mad_auth.verify_packet(KEY, received)
    assert mad.transaction_id == 1 and received[L.Notice].mf == 0x155


def test_signing_keeps_a_zero_udp_checksum_and_recomputes_others() -> None:
    zero = trap_packet()
    zero[UDP].chksum = 0
    assert Ether(bytes(mad_auth.sign_packet(KEY, zero)))[UDP].chksum == 0
    computed = Ether(bytes(trap_packet()))
    resigned = Ether(bytes(mad_auth.sign_packet(KEY, computed)))
    assert resigned[UDP].chksum not in (0, computed[UDP].chksum)  # new trailer, new checksum
    fresh = resigned.copy()
    fresh[UDP].chksum = None
    assert Ether(bytes(fresh))[UDP].chksum == resigned[UDP].chksum


def test_resigning_a_received_packet_replaces_the_trailer() -> None:
    received = Ether(bytes(mad_auth.sign_packet(os.urandom(16), trap_packet())))
    resigned = Ether(bytes(mad_auth.sign_packet(KEY, received)))
    assert icrc.verify(bytes(resigned)) and len(resigned[L.MAD]) == L.MAD_LEN + mad_auth.MAD_AUTH_LEN
    mad_auth.verify_packet(KEY, resigned)


def test_packet_modified_in_flight_fails() -> None:
    received = Ether(bytes(mad_auth.sign_packet(KEY, trap_packet())))
    received[L.Notice].data_details.lid1 = 99
    with pytest.raises(mad_auth.MadAuthError):
        mad_auth.verify_packet(KEY, Ether(bytes(received)))


def test_mf_marking_does_not_touch_the_authenticated_bytes() -> None:
    received = Ether(bytes(addressing.mf_set(mad_auth.sign_packet(KEY, trap_packet()), 0x1234)))
    mad_auth.verify_packet(KEY, received)


def test_unsigned_packet_fails() -> None:
    with pytest.raises(mad_auth.MadAuthError, match="no authentication trailer"):
        mad_auth.verify_packet(KEY, Ether(bytes(trap_packet())))


def test_replayed_tid_is_detected_per_sender() -> None:
    guard = mad_auth.TidReplayGuard()
    guard.accept(SRC_GID, 5)
    guard.accept(DST_GID, 5)
    guard.accept(SRC_GID, 6)
    for old in (6, 5, 1):
        with pytest.raises(mad_auth.MadReplayError):
            guard.accept(SRC_GID, old)
    assert guard.replays == 3
    guard.accept(SRC_GID, 7)


def test_replay_of_an_authentic_packet_is_caught_after_verification() -> None:
    guard = mad_auth.TidReplayGuard()
    wire = bytes(mad_auth.sign_packet(KEY, trap_packet(tid=10)))
    for attempt in range(2):
        received = Ether(wire)
        mad = mad_auth.verify_packet(KEY, received)
        if attempt == 0:
            guard.accept(received["IPv6"].src, mad.transaction_id)
        else:
            with pytest.raises(mad_auth.MadReplayError):
                guard.accept(received["IPv6"].src, mad.transaction_id)


def test_replay_state_survives_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "replay.state"
    guard = mad_auth.TidReplayGuard(state)
    guard.accept(SRC_GID, 10)
    guard.accept(DST_GID, 3)
    assert stat.S_IMODE(state.stat().st_mode) == 0o600
    restarted = mad_auth.TidReplayGuard(state)  # the receiver started again: what it accepted is kept
    for sender, tid in ((SRC_GID, 10), (SRC_GID, 9), (DST_GID, 3)):
        with pytest.raises(mad_auth.MadReplayError):
            restarted.accept(sender, tid)
    restarted.accept(SRC_GID, 11)
    assert mad_auth.TidReplayGuard(state)._last[ipaddress.IPv6Address(SRC_GID).packed] == 11


@pytest.mark.parametrize(("content", "message"), [
    (b"\xff", "not UTF-8"),
    (b'{"format": "other"}', "not an ibsec-tid-state file"),
    (b'{"format": "ibsec-tid-state", "last": {"fec0::1": 5}}', "TransactionID 5 is not a 64-bit hex"),
    (b'{"format": "ibsec-tid-state", "last": {"nowhere": "0x5"}}', "At least 3 parts expected in 'nowhere'"),
])
def test_unusable_replay_state_is_refused(tmp_path: Path, content: bytes, message: str) -> None:
    state = tmp_path / "replay.state"
    state.write_bytes(content)
    with pytest.raises(mad_auth.ReplayStateError, match="replay state .*replay.state") as err:
        mad_auth.TidReplayGuard(state)
    assert message in str(err.value)
