"""AES-128 CTR_DRBG without df against NIST CAVP DRBGVS vectors, and its bounds."""

import pytest
from ibsec.keys import CtrDrbg, DrbgError, KeyType, generate_pairwise_keys

# NIST CAVP drbgvectors_no_reseed CTR_DRBG.rsp, [AES-128 no df], PersonalizationStringLen = 0, COUNT = 0
NO_RESEED_ENTROPY = "ce50f33da5d4c1d3d4004eb35244b7f2cd7f2e5076fbf6780a7ff634b249a5fc"
NO_RESEED_BITS = (
    "6545c0529d372443b392ceb3ae3a99a30f963eaf313280f1d1a1e87f9db373d3"
    "61e75d18018266499cccd64d9bbb8de0185f213383080faddec46bae1f784e5a"
)
# NIST CAVP drbgvectors_pr_false CTR_DRBG.rsp, [AES-128 no df], PersonalizationStringLen = 0, COUNT = 0
PR_FALSE_ENTROPY = "ed1e7f21ef66ea5d8e2a85b9337245445b71d6393a4eecb0e63c193d0f72f9a9"
PR_FALSE_RESEED = "303fb519f0a4e17d6df0b6426aa0ecb2a36079bd48be47ad2a8dbfe48da3efad"
PR_FALSE_BITS = (
    "f80111d08e874672f32f42997133a5210f7a9375e22cea70587f9cfafebe0f6a"
    "6aa2eb68e7dd9164536d53fa020fcab20f54caddfab7d6d91e5ffec1dfd8deaa"
)


def test_nist_no_reseed_vector() -> None:
    drbg = CtrDrbg(bytes.fromhex(NO_RESEED_ENTROPY))
    drbg.generate(64)  # DRBGVS: the first generate's output is discarded
    assert drbg.generate(64).hex() == NO_RESEED_BITS


def test_nist_reseed_vector() -> None:
    drbg = CtrDrbg(bytes.fromhex(PR_FALSE_ENTROPY))
    drbg.reseed(bytes.fromhex(PR_FALSE_RESEED))
    drbg.generate(64)
    assert drbg.generate(64).hex() == PR_FALSE_BITS


def test_outputs_differ_per_call_and_after_reseed() -> None:
    seeded = CtrDrbg(bytes(32))
    outputs = {seeded.generate(32) for _ in range(100)}
    assert len(outputs) == 100
    twin = CtrDrbg(bytes(32))
    twin.reseed(bytes(32))
    assert twin.generate(32) != CtrDrbg(bytes(32)).generate(32)
    assert CtrDrbg().generate(32) != CtrDrbg().generate(32)  # os.urandom seeding


def test_automatic_reseed_after_interval() -> None:
    drbg = CtrDrbg(bytes(32), reseed_interval=2)
    reference = CtrDrbg(bytes(32))
    assert [drbg.generate(16) for _ in range(2)] == [reference.generate(16) for _ in range(2)]
    assert drbg.generate(16) != reference.generate(16)  # the third request reseeded from os.urandom
    assert drbg.reseed_counter == 2


def test_request_bounds() -> None:
    drbg = CtrDrbg()
    assert len(drbg.generate(CtrDrbg.MAX_REQUEST)) == CtrDrbg.MAX_REQUEST
    for bad in (0, CtrDrbg.MAX_REQUEST + 1):
        with pytest.raises(DrbgError):
            drbg.generate(bad)
    with pytest.raises(DrbgError):
        CtrDrbg(bytes(31))
    with pytest.raises(DrbgError):
        CtrDrbg(reseed_interval=0)


def test_pairwise_keys_cover_every_pair_once() -> None:
    keys = generate_pairwise_keys(CtrDrbg(), [5, 1, 3, 1])
    assert sorted(keys) == [(1, 3), (1, 5), (3, 5)]
    assert all(k.type is KeyType.CA_SK_IJ and k.owner == pair for pair, k in keys.items())
    assert len({k.material for k in keys.values()}) == 3


def test_keys_in_bulk_are_the_generate_output_cut_per_key() -> None:
    """generate_keys takes MAX_REQUEST bytes per request (4096 16-byte keys), each key its own slice."""
    entropy = bytes(range(32))
    owners = [(i, i + 1) for i in range(4097)]
    bulk = CtrDrbg(entropy).generate_keys(KeyType.CA_SK_IJ, owners)
    reference = CtrDrbg(entropy)
    first, second = reference.generate(CtrDrbg.MAX_REQUEST), reference.generate(16)
    assert [k.owner for k in bulk] == owners and {k.type for k in bulk} == {KeyType.CA_SK_IJ}
    assert b"".join(k.material for k in bulk) == first + second
    assert len({k.material for k in bulk}) == len(bulk)
