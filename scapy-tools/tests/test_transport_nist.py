"""NIST CAVS AES-GCM known answers (AES-128, 96-bit IV; 128- and 32-bit tags) through ibsec's primitives.

The vectors come from the ``cryptography-vectors`` package (a dev dependency): gcmEncryptExtIV128.rsp
for sealing, gcmDecrypt128.rsp for opening, including its FAIL cases.
"""

from collections.abc import Iterator
from importlib import resources

import pytest
from ibsec import transport

GCM_DIR = resources.files("cryptography_vectors") / "ciphers" / "AES" / "GCM"


def cavs_vectors(name: str, taglen: int) -> Iterator[dict[str, bytes | bool]]:
    """The vectors of one CAVS .rsp file with a 96-bit IV and a ``taglen``-bit tag."""
    section: dict[str, str] = {}
    vector: dict[str, bytes | bool] = {}
    for line in (GCM_DIR / name).read_text().splitlines() + [""]:
        line = line.strip()
        if line.startswith("[") and "=" in line:
            field, value = line[1:-1].split("=")
            section[field.strip()] = value.strip()
        elif "=" in line and not line.startswith(("#", "Count")):
            field, value = (part.strip() for part in line.split("=", 1))
            vector[field] = bytes.fromhex(value)
        elif line == "FAIL":
            vector["FAIL"] = True
        elif not line and "Key" in vector:
            if section.get("IVlen") == "96" and section.get("Taglen") == str(taglen):
                yield vector
            vector = {}


def _b(vector: dict[str, bytes | bool], field: str) -> bytes:
    value = vector[field]
    assert isinstance(value, bytes)
    return value


@pytest.mark.parametrize("taglen", [128, 32])
def test_seal_matches_nist_encrypt_vectors(taglen: int) -> None:
    vectors = list(cavs_vectors("gcmEncryptExtIV128.rsp", taglen))
    assert len(vectors) == 375  # 5 plaintext x 5 AAD lengths x 15
    for vector in vectors:
        ciphertext, tag = transport.gcm_seal(_b(vector, "Key"), _b(vector, "IV"), _b(vector, "PT"),
                                             _b(vector, "AAD"), tag_len=taglen // 8)
        assert (ciphertext, tag) == (_b(vector, "CT"), _b(vector, "Tag"))
        assert transport.gcm_open(_b(vector, "Key"), _b(vector, "IV"), ciphertext, _b(vector, "AAD"),
                                  tag) == _b(vector, "PT")


@pytest.mark.parametrize("taglen", [128, 32])
def test_open_matches_nist_decrypt_vectors_including_failures(taglen: int) -> None:
    vectors = list(cavs_vectors("gcmDecrypt128.rsp", taglen))
    failures = [v for v in vectors if v.get("FAIL")]
    assert len(vectors) == 375 and 0 < len(failures) < len(vectors)
    for vector in vectors:
        args = (_b(vector, "Key"), _b(vector, "IV"), _b(vector, "CT"), _b(vector, "AAD"), _b(vector, "Tag"))
        if vector.get("FAIL"):
            with pytest.raises(transport.MacFailure):
                transport.gcm_open(*args)
        else:
            assert transport.gcm_open(*args) == _b(vector, "PT")


def test_a_truncated_tag_is_the_prefix_of_the_full_tag() -> None:
    vector = next(cavs_vectors("gcmEncryptExtIV128.rsp", 128))
    args = (_b(vector, "Key"), _b(vector, "IV"), _b(vector, "PT"), _b(vector, "AAD"))
    assert transport.gcm_seal(*args, tag_len=4)[1] == _b(vector, "Tag")[:4]
    with pytest.raises(ValueError, match="tag length 8"):
        transport.gcm_seal(*args, tag_len=8)
    with pytest.raises(transport.MacFailure, match="neither 16 nor 4"):
        transport.gcm_open(_b(vector, "Key"), _b(vector, "IV"), b"", b"", b"\x00" * 8)
