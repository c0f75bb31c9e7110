"""Key batch codec (ibsec.keybatch): the bytes it writes, what it refuses, the Scapy layer over it."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from ibsec import keybatch, layers
from ibsec.keys import Key, KeyType

OWN, PEER = 0x0002C9FFFE000001, 0x0002C9FFFE000007
KEK = Key(KeyType.CA_SK, (OWN,), bytes(range(16)))
HEADER = layers.vendor_header(layers.VendorAttr.KEY_BATCH, 0x1122334455667788)
NONCE = bytes.fromhex("a0a1a2a3a4a5a6a7a8a9aaab")
BATCH = [Key(KeyType.SM_SK, (), b"\x11" * 16), Key(KeyType.P_SK, (0x8001,), b"\x22" * 32),
         Key(KeyType.CA_SK_IJ, (OWN, PEER), b"\x33" * 16)]


@pytest.fixture
def body(monkeypatch: pytest.MonkeyPatch) -> bytes:
    monkeypatch.setattr(keybatch.os, "urandom", lambda n: NONCE[:n])
    return keybatch.seal(KEK, HEADER, BATCH, OWN)


def test_layout_is_the_documented_one(body: bytes) -> None:
    """Header, nonce, one GCM ciphertext+tag of the entries under CA_SK, zero fill: byte for byte."""
    entries = (bytes.fromhex("0210 0000000000000000") + b"\x11" * 16
               + bytes.fromhex("0320 0000000000008001") + b"\x22" * 32
               + bytes.fromhex("0410") + PEER.to_bytes(8, "big") + b"\x33" * 16)
    header = bytes.fromhex("01 03") + len(entries).to_bytes(2, "big")
    sealed = AESGCM(KEK.material).encrypt(NONCE, entries, b"ibsec-key-batch" + HEADER + header)
    assert body == (header + NONCE + sealed).ljust(232, b"\0")
    assert len(body) == keybatch.BODY_LEN
    assert all(k.material not in body for k in BATCH)


def test_round_trip_names_the_owners_from_the_recipient(body: bytes) -> None:
    assert keybatch.open_batch(KEK, HEADER, body, OWN) == BATCH
    # the peer's copy of the same pairwise key names the same owners (lower GUID first)
    peer_kek = Key(KeyType.CA_SK, (PEER,), bytes(16))
    peer_header = layers.vendor_header(layers.VendorAttr.KEY_BATCH, 5)
    peer_body = keybatch.seal(peer_kek, peer_header, [BATCH[2]], PEER)
    assert keybatch.open_batch(peer_kek, peer_header, peer_body, PEER) == [BATCH[2]]


@pytest.mark.parametrize("offset", [0, 1, 3, 4, 15, 16, 40, 16 + 94, 16 + 94 + 15])
def test_any_flipped_bit_of_the_body_is_refused(body: bytes, offset: int) -> None:
    """Version, count, length, nonce, ciphertext, tag: every byte is checked (94 bytes of entries)."""
    tampered = body[:offset] + bytes([body[offset] ^ 0x01]) + body[offset + 1:]
    with pytest.raises(keybatch.KeyBatchError) as err:
        keybatch.open_batch(KEK, HEADER, tampered, OWN)
    assert "\\x11" not in str(err.value) and "1111" not in str(err.value)


def test_the_wrap_is_bound_to_its_mad_header_and_its_recipient(body: bytes) -> None:
    """Moved under another TransactionID or opened with another CA's key: refused."""
    other_tid = layers.vendor_header(layers.VendorAttr.KEY_BATCH, 0x1122334455667789)
    with pytest.raises(keybatch.KeyBatchError, match="failed authentication"):
        keybatch.open_batch(KEK, other_tid, body, OWN)
    with pytest.raises(keybatch.KeyBatchError, match="failed authentication"):
        keybatch.open_batch(Key(KeyType.CA_SK, (PEER,), bytes(16)), HEADER, body, PEER)


def test_every_seal_takes_a_fresh_nonce() -> None:
    first, second = (keybatch.seal(KEK, HEADER, BATCH, OWN) for _ in range(2))
    assert first[4:16] != second[4:16] and first[16:] != second[16:]


def test_entries_that_do_not_parse_are_refused() -> None:
    """Authentic bytes that are no entries (a key type the SM never batches, a cut entry): refused."""
    for plain, count in ((bytes.fromhex("0110 0000000000000000") + bytes(16), 1),  # CA_SK
                         (bytes.fromhex("0210 0000000000000000") + bytes(8), 1),  # cut short
                         (bytes.fromhex("0210 0000000000000000") + bytes(17), 1)):  # a byte too many
        header = bytes([1, count]) + len(plain).to_bytes(2, "big")
        sealed = AESGCM(KEK.material).encrypt(NONCE, plain, b"ibsec-key-batch" + HEADER + header)
        with pytest.raises(keybatch.KeyBatchError):
            keybatch.open_batch(KEK, HEADER, (header + NONCE + sealed).ljust(232, b"\0"), OWN)


def test_seal_refuses_what_a_batch_cannot_carry() -> None:
    with pytest.raises(keybatch.KeyBatchError):
        keybatch.seal(KEK, HEADER, [Key(KeyType.SK, (1, 2, 3, 4), bytes(16))], OWN)
    with pytest.raises(keybatch.KeyBatchError):
        keybatch.seal(KEK, HEADER, [Key(KeyType.CA_SK_IJ, (PEER, PEER + 1), bytes(16))], OWN)  # not OWN's
    with pytest.raises(keybatch.KeyBatchError):
        keybatch.seal(KEK, HEADER, [], OWN)


def test_pack_fills_each_mad_in_order() -> None:
    pairwise = [Key(KeyType.CA_SK_IJ, (OWN, PEER + i), bytes(16)) for i in range(20)]
    batches = keybatch.pack([BATCH[1], *pairwise])
    assert [len(b) for b in batches] == [7, 7, 7]  # 42 + 6*26 = 198 bytes, then 7*26 = 182 twice
    assert [k for b in batches for k in b] == [BATCH[1], *pairwise]
    for batch in batches:
        keybatch.seal(KEK, HEADER, batch, OWN)  # each fits


def test_scapy_layer_dissects_and_rebuilds_a_batch_and_its_ack(body: bytes) -> None:
    mad = layers.MAD(HEADER + body)
    batch = mad[layers.KeyBatch]
    assert (batch.version, batch.count, batch.length, batch.nonce) == (1, 3, 94, NONCE)
    assert len(batch.wrapped) == 94 + keybatch.TAG_LEN and bytes(mad) == HEADER + body
    ack = layers.vendor_header(layers.VendorAttr.KEY_BATCH, 0x1122334455667788, response=True)
    ack_mad = layers.MAD(ack + keybatch.ack_body(body))
    assert (ack_mad.r, ack_mad[layers.KeyBatch].count, ack_mad[layers.KeyBatch].wrapped) == (1, 3, b"")
    assert keybatch.ack_body(body)[2:] == bytes(230)  # no length, no nonce, no key bytes
    built = layers.MAD(transaction_id=0x1122334455667788) / layers.KeyBatch(count=3, nonce=NONCE,
                                                                          wrapped=batch.wrapped)
    assert bytes(built) == HEADER + body
