"""Key batches (DESIGN 4, 5): many keys for one CA in one vendor MAD, wrapped together under its CA_SK.

One key per MAD made key distribution O(hosts^2) MADs, each waited for (issue 17). A batch carries as
many keys as fit in the 232-byte MAD body, wrapped by a single AES-GCM encryption (an authenticated key
wrap) under the recipient's CA_SK, and is acknowledged by one GetResp. Body of a ``KeyBatch`` Set
(attribute 0x0012, docs/wire-format.md)::

    offset  size  field
    0       1     version      BATCH_VERSION (1)
    1       1     count        number of keys
    2       2     length       bytes of wrapped entries (the ciphertext, tag excluded)
    4       12    nonce        fresh random 96-bit GCM nonce (os.urandom), never reused under a CA_SK
    16      L     ciphertext   AES-GCM encryption of the entries
    16+L    16    tag          128-bit GCM tag
    rest          zero

Entry (plaintext, in order): key type (1), key length (1: 16 or 32), id (8, big-endian), key (16 or 32).
The id names the key's owners relative to the recipient, who knows its own GUID: SM_SK 0 (owners ()),
P_SK the P_Key (owners (P_Key,)), CA_SK_ij the peer's GUID (owners (lower GUID, higher GUID)). Other key
types are not distributed by the SM and are refused.

GCM associated data = ``b"ibsec-key-batch"`` || the 24-byte MAD common header (so the wrap is bound to
its TransactionID and attribute) || body bytes 0-3. The ACK (GetResp, same TransactionID) echoes bytes
0-3 with the length zero and carries no key bytes: :func:`ack_body`. The tag is checked by
``cryptography``'s AES-GCM (constant-time compare); a failure raises :class:`KeyBatchError`, whose
message names no key bytes. Replays are refused before this codec runs, by the MAD trailer's
TransactionID (``ibsec.mad_auth``).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ibsec.keys import KEY_LENGTHS, Key, KeyType, pair_owner

BATCH_VERSION = 1
MAD_HEADER_LEN = 24
BODY_LEN = 232  # MAD_DATA_LEN: the MAD body after the common header
HEADER_LEN = 4
NONCE_LEN = 12
TAG_LEN = 16
ENTRY_HEADER_LEN = 10  # type, length, 8-byte id
CAPACITY = BODY_LEN - HEADER_LEN - NONCE_LEN - TAG_LEN
"""Bytes of entries one batch holds (200: seven 16-byte keys, four 32-byte ones)."""
BATCHED_TYPES = (KeyType.SM_SK, KeyType.P_SK, KeyType.CA_SK_IJ)
_LABEL = b"ibsec-key-batch"
_HEADER = struct.Struct("!BBH")
_ENTRY = struct.Struct("!BBQ")


class KeyBatchError(Exception):
    """A batch that is malformed or fails authentication; the message never carries key bytes."""


def entry_len(key: Key) -> int:
    """Bytes ``key`` takes in a batch."""
    return ENTRY_HEADER_LEN + len(key.material)


def key_id(key: Key, own_guid: int) -> int:
    """The 8-byte id naming ``key``'s owners to the CA whose GUID is ``own_guid``."""
    if key.type == KeyType.SM_SK and key.owner == ():
        return 0
    if key.type == KeyType.P_SK and len(key.owner) == 1:
        return key.owner[0]
    if key.type == KeyType.CA_SK_IJ and len(key.owner) == 2 and own_guid in key.owner:
        a, b = key.owner
        return b if a == own_guid else a
    raise KeyBatchError(f"a {key.type.name} key of owners {key.owner} cannot be batched for {own_guid:#x}")


def owners(key_type: KeyType, ident: int, own_guid: int) -> tuple[int, ...]:
    """The owner ids of a batched key from its type and id (inverse of :func:`key_id`)."""
    if key_type == KeyType.SM_SK:
        return ()
    if key_type == KeyType.P_SK:
        return (ident,)
    return pair_owner(own_guid, ident)


def pack(keys: Sequence[Key]) -> list[list[Key]]:
    """``keys`` in order, split into batches that each fit one MAD."""
    batches: list[list[Key]] = []
    used = CAPACITY
    for key in keys:
        if used + entry_len(key) > CAPACITY:
            batches.append([])
            used = 0
        batches[-1].append(key)
        used += entry_len(key)
    return batches


def _aad(mad_header: bytes, header: bytes) -> bytes:
    if len(mad_header) != MAD_HEADER_LEN:
        raise KeyBatchError(f"a MAD header is {MAD_HEADER_LEN} bytes, got {len(mad_header)}")
    return _LABEL + mad_header + header


def seal(kek: Key, mad_header: bytes, keys: Sequence[Key], own_guid: int) -> bytes:
    """The 232-byte body of a batch of ``keys`` for the CA ``own_guid``, wrapped under its CA_SK ``kek``."""
    plain = b"".join(_ENTRY.pack(k.type, len(k.material), key_id(k, own_guid)) + k.material for k in keys)
    if not keys or len(plain) > CAPACITY:
        raise KeyBatchError(f"a batch holds 1 to {CAPACITY} bytes of entries, got {len(keys)} keys")
    header = _HEADER.pack(BATCH_VERSION, len(keys), len(plain))
    nonce = os.urandom(NONCE_LEN)
    sealed = AESGCM(kek.material).encrypt(nonce, plain, _aad(mad_header, header))
    return (header + nonce + sealed).ljust(BODY_LEN, b"\0")


def open_batch(kek: Key, mad_header: bytes, body: bytes, own_guid: int) -> list[Key]:
    """The keys of a batch body sent to the CA ``own_guid`` under its CA_SK ``kek``.

    Raises :class:`KeyBatchError` on a wrong version, count or length, a failed tag (any flipped bit of
    the MAD header, the batch header, nonce, ciphertext or tag), or an entry that does not parse.
    """
    if len(body) != BODY_LEN:
        raise KeyBatchError(f"a batch body is {BODY_LEN} bytes, got {len(body)}")
    version, count, length = _HEADER.unpack_from(body)
    if version != BATCH_VERSION:
        raise KeyBatchError(f"unsupported key batch version {version}")
    if not count or length > CAPACITY:
        raise KeyBatchError(f"key batch of {count} keys in {length} bytes")
    start = HEADER_LEN + NONCE_LEN
    try:
        plain = AESGCM(kek.material).decrypt(body[HEADER_LEN:start], body[start:start + length + TAG_LEN],
                                             _aad(mad_header, body[:HEADER_LEN]))
    except InvalidTag:
        raise KeyBatchError(f"key batch of {count} keys failed authentication") from None
    return _entries(plain, count, own_guid)


def _entries(plain: bytes, count: int, own_guid: int) -> list[Key]:
    out, offset = [], 0
    for index in range(count):
        if offset + ENTRY_HEADER_LEN > len(plain):
            raise KeyBatchError(f"key batch entry {index} is cut short")
        kind, size, ident = _ENTRY.unpack_from(plain, offset)
        offset += ENTRY_HEADER_LEN
        if kind not in BATCHED_TYPES or size not in KEY_LENGTHS or offset + size > len(plain):
            raise KeyBatchError(f"key batch entry {index}: type {kind}, length {size} refused")
        key_type = KeyType(kind)
        out.append(Key(key_type, owners(key_type, ident, own_guid), plain[offset:offset + size]))
        offset += size
    if offset != len(plain):
        raise KeyBatchError("key batch has bytes after its last entry")
    return out


def ack_body(body: bytes) -> bytes:
    """The body of the ACK of a batch: its version and count, no length, no key bytes."""
    return body[:2].ljust(BODY_LEN, b"\0")
