"""No key bytes in any repr, str or exception message the key module produces."""

import traceback
from collections.abc import Callable
from pathlib import Path

import pytest
from ibsec.keys import (
    CtrDrbg,
    Endpoint,
    IbsecKeyError,
    Key,
    KeyStore,
    KeyType,
    MemoryRegion,
    derive_connection_key,
    derive_subregion_key,
    memory_region_key,
    read_key_file,
    unwrap_key,
    wrap_key,
    write_key_file,
)

SECRET = Key(KeyType.P_SK, (0x8001,), bytes.fromhex("c0ffee00deadbeef0123456789abcdef"))
KEK = Key(KeyType.CA_SK, (7,), bytes.fromhex("00112233445566778899aabbccddeeff"))


def leaks(text: str, *secrets: Key) -> bool:
    """Does ``text`` contain a key as hex (either case), as raw bytes, or as a Python bytes literal?"""
    for key in secrets:
        raw = key.material
        forms = [raw.hex(), raw.hex().upper(), raw.decode("latin-1"), repr(raw)[2:-1], str(list(raw))[1:-1]]
        if any(form in text for form in forms):
            return True
    return False


def error_text(action: Callable[[], object]) -> str:
    with pytest.raises(IbsecKeyError) as raised:
        action()
    return "".join(traceback.format_exception(raised.value)) + repr(raised.value) + str(raised.value.args)


def test_the_leak_detector_detects() -> None:
    assert leaks(f"x {SECRET.material!r} y", SECRET) and leaks(SECRET.material.hex().upper(), SECRET)


def test_reprs_and_strs_hide_key_bytes(tmp_path: Path) -> None:
    derived = derive_connection_key(SECRET, Endpoint(1, 2), Endpoint(3, 4))
    region = MemoryRegion(0, 4096, 9, max_depth=2)
    k_mr = memory_region_key(SECRET, region)
    sub = derive_subregion_key(k_mr, region, 1024, 1024)
    drbg = CtrDrbg(SECRET.material * 2)
    store = KeyStore([KEK])
    texts = [repr(x) + str(x) + f"{x}" for x in (SECRET, KEK, derived, k_mr, sub, drbg, store, [SECRET])]
    assert not any(leaks(text, SECRET, KEK, derived, k_mr, sub) for text in texts)
    assert "P_SK" in repr(SECRET) and "128-bit" in str(SECRET)


def test_error_messages_hide_key_bytes(tmp_path: Path) -> None:
    blob = wrap_key(KEK, SECRET)
    wrong_kek = Key(KeyType.CA_SK, (7,), SECRET.material)
    texts = [
        error_text(lambda: unwrap_key(wrong_kek, blob, KeyType.P_SK, (0x8001,))),
        error_text(lambda: unwrap_key(KEK, blob, KeyType.SK, (0x8001,))),
        error_text(lambda: unwrap_key(KEK, blob[:-1], KeyType.P_SK, (0x8001,))),
        error_text(lambda: Key(KeyType.SK, (), SECRET.material[:15])),
    ]
    path = tmp_path / "k"
    write_key_file(path, [SECRET, KEK])
    path.chmod(0o640)
    texts.append(error_text(lambda: read_key_file(path)))
    path.chmod(0o600)
    path.write_text(path.read_text()[:-5])  # truncated JSON that still holds both keys in hex
    texts.append(error_text(lambda: read_key_file(path)))
    assert not any(leaks(text, SECRET, KEK) for text in texts)
