"""Authenticated key wrap: round trip, fixed length, and every tamper / wrong-context failure."""

import pytest
from ibsec.keys import WRAPPED_KEY_LEN, Key, KeyType, KeyWrapError, unwrap_key, wrap_key, wrapped_len

KEK = Key.generate(KeyType.CA_SK, owner=(7,), length=16)
PARTITION = (0x8001,)


@pytest.mark.parametrize("length", [16, 32])
def test_round_trip_and_fixed_length(length: int) -> None:
    key = Key.generate(KeyType.P_SK, PARTITION, length)
    blob = wrap_key(KEK, key)
    assert len(blob) == WRAPPED_KEY_LEN == wrapped_len(length) == 64
    assert unwrap_key(KEK, blob, KeyType.P_SK, PARTITION) == key


def test_fresh_nonce_per_wrap() -> None:
    key = Key.generate(KeyType.P_SK, PARTITION)
    blobs = {wrap_key(KEK, key) for _ in range(50)}
    assert len({b[4:16] for b in blobs}) == 50


def test_every_flipped_bit_fails() -> None:
    key = Key.generate(KeyType.SM_SK, (), 32)
    blob = wrap_key(KEK, key)
    for bit in range(8 * len(blob)):
        bad = bytearray(blob)
        bad[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(KeyWrapError):
            unwrap_key(KEK, bytes(bad), KeyType.SM_SK, ())


@pytest.mark.parametrize(
    ("kek", "type", "owner"),
    [
        (Key.generate(KeyType.CA_SK, (7,)), KeyType.P_SK, PARTITION),  # wrong KEK
        (KEK, KeyType.SK, PARTITION),  # wrong type
        (KEK, KeyType.P_SK, (0x8002,)),  # wrong owner
        (KEK, KeyType.P_SK, ()),  # owner missing
        (KEK, KeyType.P_SK, (0x8001, 0)),  # extra owner id
    ],
)
def test_wrong_context_fails(kek: Key, type: KeyType, owner: tuple[int, ...]) -> None:
    key = Key.generate(KeyType.P_SK, PARTITION)
    with pytest.raises(KeyWrapError):
        unwrap_key(kek, wrap_key(KEK, key), type, owner)


def test_out_of_range_owner_fails_typed() -> None:
    blob = wrap_key(KEK, Key.generate(KeyType.P_SK, PARTITION))
    for owner in [(-1,), (1 << 128,)]:
        with pytest.raises(KeyWrapError):
            unwrap_key(KEK, blob, KeyType.P_SK, owner)


def test_wrong_length_fails() -> None:
    blob = wrap_key(KEK, Key.generate(KeyType.P_SK, PARTITION))
    for bad in (blob[:-1], blob + b"\0", b""):
        with pytest.raises(KeyWrapError):
            unwrap_key(KEK, bad, KeyType.P_SK, PARTITION)
