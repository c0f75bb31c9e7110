"""Key hierarchy, authenticated key wrap and key derivations (DESIGN section 5).

Keys are small typed objects (:class:`Key`) whose ``repr``/``str`` never show key bytes.  Keys travel
between the SM and the CAs only as *wrapped* blobs produced by :func:`wrap_key`: AES-GCM under a
key-encryption key (KEK), with the key's type and owner ids bound as associated data.

Wrap blob (always ``WRAPPED_KEY_LEN`` = 64 bytes, whatever the key size, so that a MAD or a CM
PrivateData can give it one fixed field)::

    offset  size  field
    0       1     version      WRAP_VERSION (1)
    1       1     key type     KeyType value
    2       1     key length   16 or 32
    3       1     reserved     0
    4       12    nonce        fresh random 96-bit GCM nonce (os.urandom)
    16      32    ciphertext   AES-GCM encryption of the key, zero-padded to 32 bytes
    48      16    tag          128-bit GCM tag

GCM associated data = the 4 header bytes || ``b"ibsec-key-wrap"`` || the owner ids, each as 16 bytes
big-endian (enough for a 128-bit GID).  So the recipient must name the key type and the owner ids it
expects; a blob replayed as another type, for another partition or another connection fails to unwrap.
"""

from __future__ import annotations

import enum
import hmac
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

WRAP_VERSION = 1
WRAP_HEADER_LEN = 4
WRAP_NONCE_LEN = 12
WRAP_TAG_LEN = 16
WRAP_MAX_KEY_LEN = 32
WRAPPED_KEY_LEN = WRAP_HEADER_LEN + WRAP_NONCE_LEN + WRAP_MAX_KEY_LEN + WRAP_TAG_LEN
"""Length in bytes of every wrapped key blob (64), for 16- and 32-byte keys alike."""

KEY_LENGTHS = (16, 32)
OWNER_ID_LEN = 16
_WRAP_LABEL = b"ibsec-key-wrap"


class IbsecKeyError(Exception):
    """Base of every key error.  Messages never carry key bytes."""


class KeyWrapError(IbsecKeyError):
    """A wrapped blob failed to unwrap: wrong KEK, wrong type or owner ids, or tampering."""


class KeyType(enum.IntEnum):
    """The key scopes of DESIGN section 5 (values are the wrap blob's type byte)."""

    CA_SK = 1  # CA i <-> SM, provisioned
    SM_SK = 2  # SM -> every CA, never used for data
    P_SK = 3  # per partition, members only
    CA_SK_IJ = 4  # n-to-n key of CA i and CA j
    SK = 5  # per connection (QP-level)
    DERIVED = 6  # K(A,B) derived from a partition key
    MEMORY = 7  # sRDMA memory key K_MR
    STORE = 8  # sealing key of a session key cache backing store


@dataclass(frozen=True)
class Key:
    """A symmetric key with its type and owner ids; repr/str show the scope, never the bytes.

    ``owner`` names whose key it is: the CA id for CA_SK, the P_Key for P_SK, (CA i, CA j) for CA_SK_ij,
    (GID_A, QPN_A, GID_B, QPN_B) for a session key.  Equality is constant time over the bytes.
    """

    type: KeyType
    owner: tuple[int, ...]
    material: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if len(self.material) not in KEY_LENGTHS:
            raise IbsecKeyError(f"{self.type.name} key must be 16 or 32 bytes, got {len(self.material)}")
        for oid in self.owner:
            if not 0 <= oid < 1 << (8 * OWNER_ID_LEN):
                raise IbsecKeyError(f"owner id out of range for {self.type.name} (0 .. 2^128-1)")

    @classmethod
    def generate(cls, type: KeyType, owner: Sequence[int] = (), length: int = 16) -> Key:
        """A fresh random key from the OS CSPRNG."""
        return cls(type, tuple(owner), os.urandom(length))

    def __repr__(self) -> str:
        return f"Key({self.type.name}, owner={self.owner}, {8 * len(self.material)}-bit)"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Key):
            return NotImplemented
        return (self.type, self.owner) == (other.type, other.owner) and hmac.compare_digest(
            self.material, other.material
        )

    def __hash__(self) -> int:
        return hash((self.type, self.owner, len(self.material)))


def wrapped_len(key_len: int = WRAP_MAX_KEY_LEN) -> int:
    """Length of the wrap blob of a key of ``key_len`` bytes: always ``WRAPPED_KEY_LEN``."""
    if key_len not in KEY_LENGTHS:
        raise IbsecKeyError(f"key length must be 16 or 32, got {key_len}")
    return WRAPPED_KEY_LEN


def _wrap_aad(header: bytes, owner: Sequence[int]) -> bytes:
    return header + _WRAP_LABEL + b"".join(oid.to_bytes(OWNER_ID_LEN, "big") for oid in owner)


def wrap_key(kek: Key, key: Key) -> bytes:
    """Wrap ``key`` under ``kek`` with AES-GCM; returns a ``WRAPPED_KEY_LEN``-byte blob."""
    header = bytes((WRAP_VERSION, key.type, len(key.material), 0))
    nonce = os.urandom(WRAP_NONCE_LEN)
    padded = key.material.ljust(WRAP_MAX_KEY_LEN, b"\0")
    sealed = AESGCM(kek.material).encrypt(nonce, padded, _wrap_aad(header, key.owner))
    return header + nonce + sealed


def unwrap_key(kek: Key, blob: bytes, type: KeyType, owner: Sequence[int]) -> Key:
    """Unwrap a blob from :func:`wrap_key`, checking it is a ``type`` key of ``owner``.

    Raises :class:`KeyWrapError` (without key bytes) on a wrong length, version, type, owner, KEK or any
    flipped bit.
    """
    if len(blob) != WRAPPED_KEY_LEN:
        raise KeyWrapError(f"wrapped key must be {WRAPPED_KEY_LEN} bytes, got {len(blob)}")
    header = blob[:WRAP_HEADER_LEN]
    version, btype, key_len, reserved = header
    if version != WRAP_VERSION:
        raise KeyWrapError(f"unsupported wrap version {version}")
    if btype != type:
        raise KeyWrapError(f"wrapped key has type {btype}, expected {type.name} ({int(type)})")
    if key_len not in KEY_LENGTHS or reserved:
        raise KeyWrapError("malformed wrap header")
    nonce = blob[WRAP_HEADER_LEN : WRAP_HEADER_LEN + WRAP_NONCE_LEN]
    try:
        padded = AESGCM(kek.material).decrypt(
            nonce, blob[WRAP_HEADER_LEN + WRAP_NONCE_LEN :], _wrap_aad(header, owner)
        )
    except InvalidTag:
        raise KeyWrapError(f"{type.name} key for owner {tuple(owner)} failed authentication") from None
    return Key(type, tuple(owner), padded[:key_len])
