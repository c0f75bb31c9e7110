"""AES-CMAC PRF against RFC 4493, K(A,B) canonical order, and the SP 800-108 counter-mode construction."""

import pytest
from ibsec.keys import (
    Endpoint,
    IbsecKeyError,
    Key,
    KeyType,
    derive_connection_key,
    kdf_counter,
    prf,
)

RFC4493_KEY = bytes.fromhex("2b7e151628aed2a6abf7158809cf4f3c")
RFC4493_MESSAGE = bytes.fromhex(
    "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
    "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710"
)


@pytest.mark.parametrize(
    ("length", "mac"),
    [
        (0, "bb1d6929e95937287fa37d129b756746"),
        (16, "070a16b46b4d4144f79bdd9dd04a287c"),
        (40, "dfa66747de9ae63030ca32611497c827"),
        (64, "51f0bebf7e3b9d92fc49741779363cfe"),
    ],
)
def test_prf_is_aes_cmac_rfc4493(length: int, mac: str) -> None:
    key = Key(KeyType.P_SK, (0xFFFF,), RFC4493_KEY)
    assert prf(key, RFC4493_MESSAGE[:length]).hex() == mac


P_SK = Key(KeyType.P_SK, (0x8001,), RFC4493_KEY)
A = Endpoint(gid=0xFE80_0000_0000_0000_0002_C903_0000_0001, qpn=0x11)
B = Endpoint(gid=0xFE80_0000_0000_0000_0002_C903_0000_0002, qpn=0x22)


def test_connection_key_is_prf_over_canonical_message() -> None:
    message = A.gid.to_bytes(16, "big") + (0x11).to_bytes(3, "big") + B.gid.to_bytes(16, "big")
    message += (0x22).to_bytes(3, "big")
    key = derive_connection_key(P_SK, A, B)
    assert key.material == prf(RFC4493_KEY, message)
    assert key.type is KeyType.DERIVED and key.owner == (A.gid, A.qpn, B.gid, B.qpn)


@pytest.mark.parametrize("length", [16, 32])
def test_both_ends_compute_the_same_key(length: int) -> None:
    assert derive_connection_key(P_SK, A, B, length) == derive_connection_key(P_SK, B, A, length)


def test_distinct_connections_and_partitions_get_distinct_keys() -> None:
    base = derive_connection_key(P_SK, A, B).material
    others = [
        derive_connection_key(P_SK, A, Endpoint(B.gid, B.qpn + 1)),
        derive_connection_key(P_SK, Endpoint(A.gid, B.qpn), Endpoint(B.gid, A.qpn)),  # QPNs swapped
        derive_connection_key(Key.generate(KeyType.P_SK, (0x8002,)), A, B),
    ]
    assert all(other.material != base for other in others)


def test_256_bit_key_is_two_counter_mode_blocks() -> None:
    message = A.encode() + B.encode()
    key = derive_connection_key(P_SK, A, B, 32).material
    fixed = b"ibsec K(A,B)" + b"\0" + message + (256).to_bytes(2, "big")
    assert key == prf(RFC4493_KEY, b"\x01" + fixed) + prf(RFC4493_KEY, b"\x02" + fixed)
    assert key[:16] != derive_connection_key(P_SK, A, B, 16).material


def test_kdf_output_length_binds_every_block() -> None:
    assert kdf_counter(P_SK, b"x", b"c", 16) != kdf_counter(P_SK, b"x", b"c", 32)[:16]
    assert len(kdf_counter(P_SK, b"x", b"c", 40)) == 40


def test_bad_inputs_rejected() -> None:
    with pytest.raises(IbsecKeyError):
        Endpoint(gid=0, qpn=1 << 24)
    with pytest.raises(IbsecKeyError):
        derive_connection_key(P_SK, A, B, 24)
