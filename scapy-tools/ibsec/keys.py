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

import contextlib
import enum
import errno
import hmac
import json
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.cmac import CMAC
from cryptography.hazmat.primitives.kdf.kbkdf import KBKDFCMAC, CounterLocation, Mode

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


def pair_owner(guid_a: int, guid_b: int) -> tuple[int, int]:
    """Owner ids of CA_SK_ij: the two GUIDs, smaller first (CA_SK_ij = CA_SK_ji)."""
    return (min(guid_a, guid_b), max(guid_a, guid_b))


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
    if any(not 0 <= oid < 1 << (8 * OWNER_ID_LEN) for oid in owner):
        raise KeyWrapError(f"owner ids of a {type.name} key must be 0 .. 2^128-1")
    nonce = blob[WRAP_HEADER_LEN : WRAP_HEADER_LEN + WRAP_NONCE_LEN]
    try:
        padded = AESGCM(kek.material).decrypt(
            nonce, blob[WRAP_HEADER_LEN + WRAP_NONCE_LEN :], _wrap_aad(header, owner)
        )
    except InvalidTag:
        raise KeyWrapError(f"{type.name} key for owner {tuple(owner)} failed authentication") from None
    return Key(type, tuple(owner), padded[:key_len])


# --------------------------------------------------------------------------------------------------------
# AES-CMAC PRF and derivations (sRDMA PD-level keys)
# --------------------------------------------------------------------------------------------------------

PRF_LEN = 16
GID_LEN = 16
QPN_LEN = 3  # QPNs are 24-bit on the wire (BTH DestQP)


def prf(key: Key | bytes, message: bytes) -> bytes:
    """AES-CMAC (RFC 4493, NIST SP 800-38B) of ``message``: the 128-bit PRF of every derivation here."""
    material = key.material if isinstance(key, Key) else key
    mac = CMAC(algorithms.AES(material))
    mac.update(message)
    return mac.finalize()


def kdf_counter(key: Key, label: bytes, context: bytes, length: int) -> bytes:
    """NIST SP 800-108 KDF in counter mode with AES-CMAC as PRF (cryptography's ``KBKDFCMAC``).

    Block i (i = 1, 2, ...) = CMAC(key, [i]_8 || label || 0x00 || context || [8*length]_16); the output is
    the blocks concatenated and cut to ``length`` bytes.  Used where a derived key must be 256 bits.
    """
    if not 0 < length <= 255 * PRF_LEN:
        raise IbsecKeyError(f"derived key length {length} out of range")
    kdf = KBKDFCMAC(algorithms.AES, Mode.CounterMode, length, rlen=1, llen=2,
                    location=CounterLocation.BeforeFixed, label=label, context=context, fixed=None)
    return kdf.derive(key.material)


@dataclass(frozen=True, order=True)
class Endpoint:
    """One end of a connection: its 128-bit GID (the APA of sRDMA) and 24-bit QPN."""

    gid: int
    qpn: int

    def __post_init__(self) -> None:
        if not 0 <= self.gid < 1 << 128 or not 0 <= self.qpn < 1 << 24:
            raise IbsecKeyError(f"endpoint out of range: GID is 128-bit, QPN 24-bit (qpn={self.qpn:#x})")

    def encode(self) -> bytes:
        return self.gid.to_bytes(GID_LEN, "big") + self.qpn.to_bytes(QPN_LEN, "big")


def derive_connection_key(p_sk: Key, local: Endpoint, remote: Endpoint, length: int = 16) -> Key:
    """K(A,B) = PRF_P_SK(GID_A || QPN_A || GID_B || QPN_B) (DESIGN section 3, sRDMA PD-level keys).

    Canonical order: A is the smaller endpoint by (GID, QPN), so both ends of one connection compute the
    same key whichever side calls it; the two directions are kept apart by the nonce's direction bit.
    A 16-byte key is the CMAC itself; a 32-byte key is :func:`kdf_counter` with label ``b"ibsec K(A,B)"``
    over the same 38-byte message.
    """
    a, b = sorted((local, remote))
    message = a.encode() + b.encode()
    if length == PRF_LEN:
        material = prf(p_sk, message)
    elif length == 32:
        material = kdf_counter(p_sk, b"ibsec K(A,B)", message, length)
    else:
        raise IbsecKeyError(f"derived key length must be 16 or 32, got {length}")
    return Key(KeyType.DERIVED, (a.gid, a.qpn, b.gid, b.qpn), material)


# --------------------------------------------------------------------------------------------------------
# sRDMA memory keys and the binary one-way function tree (sRDMA section 4.6)
# --------------------------------------------------------------------------------------------------------

MAX_TREE_DEPTH = 48
"""Hard cap on any region's tree depth (a 2^48-byte region down to 1-byte blocks)."""

LEFT, RIGHT = b"L", b"R"


class MemoryKeyError(IbsecKeyError):
    """A sub-region is not a node of the region's tree (misaligned, outside, or deeper than allowed)."""


@dataclass(frozen=True)
class MemoryRegion:
    """A registered region [start, start + length) with its R_Key and the depth limit of its key tree.

    ``length`` must be a power of two: each tree level halves the parent, so a node at depth d covers
    length >> d bytes; ``max_depth`` = 0 disables delegation (only the whole region's key verifies).
    """

    start: int
    length: int
    r_key: int
    max_depth: int = 0

    def __post_init__(self) -> None:
        if self.length <= 0 or self.length & (self.length - 1) or self.start < 0:
            raise MemoryKeyError(f"region length must be a power of two, got {self.length}")
        if self.start + self.length > 1 << 64 or not 0 <= self.r_key < 1 << 32:
            raise MemoryKeyError("region must fit 64-bit addresses and a 32-bit R_Key")
        limit = min(MAX_TREE_DEPTH, self.length.bit_length() - 1)
        if not 0 <= self.max_depth <= limit:
            raise MemoryKeyError(f"max_depth {self.max_depth} out of range 0..{limit} for this region")

    @property
    def end(self) -> int:
        return self.start + self.length


def _span(start: int, end: int) -> bytes:
    return start.to_bytes(8, "big") + end.to_bytes(8, "big")


def memory_region_key(k_pd: Key, region: MemoryRegion) -> Key:
    """K_MR = PRF_K_PD(start || end || R_Key): 8-byte start, 8-byte exclusive end, 4-byte R_Key."""
    material = prf(k_pd, _span(region.start, region.end) + region.r_key.to_bytes(4, "big"))
    return Key(KeyType.MEMORY, (region.start, region.end, region.r_key), material)


def _path(region: MemoryRegion, start: int, length: int) -> list[bytes]:
    """Directions from the region's root down to the node [start, start + length)."""
    if length <= 0 or length & (length - 1) or length > region.length:
        raise MemoryKeyError(f"sub-region length {length} is not a power of two within the region")
    if not region.start <= start <= region.end - length or (start - region.start) % length:
        raise MemoryKeyError(
            f"sub-region [{start:#x}, {start + length:#x}) is not an aligned part of "
            f"[{region.start:#x}, {region.end:#x})"
        )
    depth = (region.length // length).bit_length() - 1
    if depth > region.max_depth:
        raise MemoryKeyError(f"sub-region needs tree depth {depth}, the region allows {region.max_depth}")
    offset = start - region.start
    return [RIGHT if offset & (region.length >> (d + 1)) else LEFT for d in range(depth)]


def child_key(parent: Key, start: int, length: int, direction: bytes) -> Key:
    """One tree step: K_child = PRF_K_parent(direction || start_child || end_child).

    ``start``/``length`` are the parent's; the child is its left or right half.
    """
    half = length // 2
    child_start = start + half if direction == RIGHT else start
    material = prf(parent, direction + _span(child_start, child_start + half))
    return Key(KeyType.MEMORY, (child_start, child_start + half), material)


def derive_subregion_key(region_key: Key, region: MemoryRegion, start: int, length: int) -> Key:
    """Key of the sub-region [start, start + length) by walking the tree down from ``region_key``.

    A delegate holding a sub-region key derives its descendants the same way, passing the sub-region as
    ``region`` (with the depth it may still go down).  Raises :class:`MemoryKeyError` for a sub-region that
    is not a tree node or lies deeper than ``region.max_depth``.
    """
    key, node_start, node_len = region_key, region.start, region.length
    for direction in _path(region, start, length):
        key = child_key(key, node_start, node_len, direction)
        node_len //= 2
        node_start += node_len if direction == RIGHT else 0
    return key


def verify_subregion_key(
    region_key: Key, region: MemoryRegion, start: int, length: int, presented: bytes
) -> bool:
    """Does ``presented`` grant access to [start, start + length)?  Constant-time compare; any sub-region
    that is not a node of the region's tree (misaligned, outside, too deep) is simply refused."""
    try:
        expected = derive_subregion_key(region_key, region, start, length)
    except MemoryKeyError:
        return False
    return hmac.compare_digest(expected.material, presented)


# --------------------------------------------------------------------------------------------------------
# AES-CTR DRBG for bulk n-to-n keys (NIST SP 800-90A section 10.2.1, AES-128, no derivation function)
# --------------------------------------------------------------------------------------------------------


class DrbgError(IbsecKeyError):
    """A DRBG request out of bounds or bad seed material."""


class CtrDrbg:
    """CTR_DRBG with AES-128 and no derivation function (SP 800-90A 10.2.1).

    State (Key, V) is 16 + 16 bytes; seedlen is 32 bytes, so the entropy input is 32 bytes from
    ``os.urandom`` (or given, for known-answer tests), XORed with an optional personalization string of
    at most 32 bytes.  Generate is at most ``MAX_REQUEST`` bytes (2^19 bits, the standard's limit for
    AES-128) and, after ``reseed_interval`` requests, reseeds itself from ``os.urandom``.
    Nothing of the state appears in repr.
    """

    SEED_LEN = 32
    MAX_REQUEST = 1 << 16
    MAX_RESEED_INTERVAL = 1 << 48

    def __init__(
        self, entropy: bytes | None = None, personalization: bytes = b"", reseed_interval: int = 1 << 20
    ) -> None:
        if not 1 <= reseed_interval <= self.MAX_RESEED_INTERVAL:
            raise DrbgError(f"reseed interval must be 1..2^48, got {reseed_interval}")
        self.reseed_interval = reseed_interval
        self._key = bytes(16)
        self._v = bytes(16)
        self._update(self._seed_material(entropy, personalization))
        self.reseed_counter = 1

    def __repr__(self) -> str:
        return f"CtrDrbg(AES-128 no df, requests since reseed={self.reseed_counter - 1})"

    def _seed_material(self, entropy: bytes | None, extra: bytes) -> bytes:
        entropy = os.urandom(self.SEED_LEN) if entropy is None else entropy
        if len(entropy) != self.SEED_LEN or len(extra) > self.SEED_LEN:
            raise DrbgError(f"entropy must be {self.SEED_LEN} bytes and extra input at most {self.SEED_LEN}")
        return bytes(e ^ x for e, x in zip(entropy, extra.ljust(self.SEED_LEN, b"\0"), strict=True))

    def _blocks(self, count: int) -> bytes:
        """Encrypt V+1, V+2, ... (V incremented mod 2^128) and leave V at the last counter."""
        v = int.from_bytes(self._v, "big")
        counters = b"".join(((v + i) % (1 << 128)).to_bytes(16, "big") for i in range(1, count + 1))
        self._v = counters[-16:]
        encryptor = Cipher(algorithms.AES(self._key), modes.ECB()).encryptor()
        return encryptor.update(counters) + encryptor.finalize()

    def _update(self, provided: bytes) -> None:
        temp = bytes(t ^ p for t, p in zip(self._blocks(2), provided, strict=True))
        self._key, self._v = temp[:16], temp[16:]

    def reseed(self, entropy: bytes | None = None, additional: bytes = b"") -> None:
        """Mix fresh entropy (default ``os.urandom``) into the state and restart the reseed counter."""
        self._update(self._seed_material(entropy, additional))
        self.reseed_counter = 1

    def generate(self, length: int, additional: bytes = b"") -> bytes:
        """``length`` pseudorandom bytes (1..MAX_REQUEST)."""
        if not 0 < length <= self.MAX_REQUEST:
            raise DrbgError(f"request of {length} bytes outside 1..{self.MAX_REQUEST}")
        if self.reseed_counter > self.reseed_interval:
            self.reseed()
        provided = self._seed_material(bytes(self.SEED_LEN), additional)
        if additional:
            self._update(provided)
        output = self._blocks(-(-length // 16))[:length]
        self._update(provided)
        self.reseed_counter += 1
        return output

    def generate_key(self, type: KeyType, owner: Sequence[int] = (), length: int = 16) -> Key:
        return Key(type, tuple(owner), self.generate(length))

    def generate_keys(self, type: KeyType, owners: Sequence[Sequence[int]], length: int = 16) -> list[Key]:
        """One key per owner tuple, as many per request as ``MAX_REQUEST`` allows: the SM's n(n-1)/2
        pairwise keys of a large partition cost a few hundred requests, not one each."""
        per_request = self.MAX_REQUEST // length
        out = []
        for start in range(0, len(owners), per_request):
            chunk = owners[start:start + per_request]
            material = self.generate(length * len(chunk))
            out += [Key(type, tuple(owner), material[length * i:length * (i + 1)])
                    for i, owner in enumerate(chunk)]
        return out


def generate_pairwise_keys(
    drbg: CtrDrbg, ca_ids: Sequence[int], length: int = 16
) -> dict[tuple[int, int], Key]:
    """The SM's n-to-n keys: one CA_SK_ij per unordered pair of CAs, keyed by (i, j) with i < j."""
    ids = sorted(set(ca_ids))
    pairs = [(i, j) for n, i in enumerate(ids) for j in ids[n + 1 :]]
    return dict(zip(pairs, drbg.generate_keys(KeyType.CA_SK_IJ, pairs, length), strict=True))


# --------------------------------------------------------------------------------------------------------
# Key files (mode 0600, atomic) and the SM's key database
# --------------------------------------------------------------------------------------------------------

KEY_FILE_FORMAT = "ibsec-keys"
KEY_FILE_VERSION = 1


class KeyFileError(IbsecKeyError):
    """A key file is unsafe (mode, owner) or malformed.  Names the path and mode, never the content."""


def write_key_file(path: str | os.PathLike[str], keys: Sequence[Key]) -> None:
    """Write ``keys`` to ``path`` atomically with mode 0600.

    The temporary file in the same directory is created with mode 0600 before any byte is written, then
    fsynced and renamed over ``path``, so a reader sees either the old file or the complete new one and
    the key bytes are never readable by others, not even for an instant.

    Format (JSON, UTF-8): ``{"format": "ibsec-keys", "version": 1, "keys": [{"type": "CA_SK",
    "owner": [7], "key": "<hex>"}, ...]}``.
    """
    target = os.fspath(path)
    document = {
        "format": KEY_FILE_FORMAT,
        "version": KEY_FILE_VERSION,
        "keys": [{"type": k.type.name, "owner": list(k.owner), "key": k.material.hex()} for k in keys],
    }
    temp = f"{target}.tmp.{os.getpid()}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, 0o600)  # the umask cannot widen it, but make the mode explicit before content
        os.write(fd, json.dumps(document, indent=1).encode())
        os.fsync(fd)
        os.close(fd)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def _check_key_file(fd: int, path: str) -> None:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise KeyFileError(f"key file {path} is not a regular file")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        raise KeyFileError(
            f"key file {path} has mode {mode:04o}: it is readable or writable by group or others; "
            f"chmod 600 it"
        )
    if info.st_uid != os.geteuid():
        raise KeyFileError(f"key file {path} is owned by uid {info.st_uid}, not by this user {os.geteuid()}")


def read_key_file(path: str | os.PathLike[str]) -> list[Key]:
    """Load the keys of a file written by :func:`write_key_file`.

    Refused with :class:`KeyFileError` when the file is group/world accessible, not owned by the current
    user, or malformed; the error names the path and the mode, never the content.
    """
    target = os.fspath(path)
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise KeyFileError(f"key file {target} is a symbolic link; refusing to follow it") from None
        raise
    with os.fdopen(fd, "rb") as file:
        _check_key_file(fd, target)
        raw = file.read()
    try:
        document = json.loads(raw)
        if document.get("format") != KEY_FILE_FORMAT or document.get("version") != KEY_FILE_VERSION:
            raise ValueError
        return [
            Key(KeyType[entry["type"]], tuple(int(o) for o in entry["owner"]), bytes.fromhex(entry["key"]))
            for entry in document["keys"]
        ]
    except (ValueError, KeyError, TypeError, AttributeError, IbsecKeyError):
        raise KeyFileError(f"key file {target} is not a valid {KEY_FILE_FORMAT} file") from None


class KeyStore:
    """The SM's key database: CA_SK_i per CA id (a CA's 64-bit GUID).

    Saved as one key file (mode 0600); :meth:`provision_host` writes the per-host provisioning file
    holding only that host's CA_SK (the emulated tamper-resistant storage of DESIGN section 5).
    """

    def __init__(self, keys: Sequence[Key] = ()) -> None:
        self._by_ca: dict[int, Key] = {}
        for key in keys:
            self.add(key)

    def __repr__(self) -> str:
        return f"KeyStore({len(self._by_ca)} CA keys)"

    def __len__(self) -> int:
        return len(self._by_ca)

    def __contains__(self, ca_id: object) -> bool:
        return ca_id in self._by_ca

    def add(self, key: Key) -> None:
        if key.type is not KeyType.CA_SK or len(key.owner) != 1:
            raise IbsecKeyError(f"a KeyStore holds CA_SK keys owned by one CA id, not {key!r}")
        self._by_ca[key.owner[0]] = key

    def enroll(self, ca_id: int, length: int = 16) -> Key:
        """Create (or replace) the CA_SK of ``ca_id`` from the OS CSPRNG."""
        key = Key.generate(KeyType.CA_SK, (ca_id,), length)
        self.add(key)
        return key

    def ca_key(self, ca_id: int) -> Key:
        try:
            return self._by_ca[ca_id]
        except KeyError:
            raise IbsecKeyError(f"no CA_SK for CA {ca_id:#x}") from None

    def save(self, path: str | os.PathLike[str]) -> None:
        write_key_file(path, sorted(self._by_ca.values(), key=lambda k: k.owner))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> KeyStore:
        return cls(read_key_file(path))

    def provision_host(self, ca_id: int, path: str | os.PathLike[str]) -> None:
        write_key_file(path, [self.ca_key(ca_id)])


def load_host_key(path: str | os.PathLike[str], ca_id: int) -> Key:
    """The agent side of provisioning: read this host's CA_SK from its 0600 file."""
    for key in read_key_file(path):
        if key.type is KeyType.CA_SK and key.owner == (ca_id,):
            return key
    raise KeyFileError(f"key file {os.fspath(path)} holds no CA_SK for CA {ca_id:#x}")
