"""sRDMA memory keys and the binary one-way function tree: delegation, boundaries and the depth limit."""

import pytest
from ibsec.keys import (
    Key,
    KeyType,
    MemoryKeyError,
    MemoryRegion,
    child_key,
    derive_subregion_key,
    memory_region_key,
    prf,
    verify_subregion_key,
)

K_PD = Key(KeyType.P_SK, (1,), bytes(range(16)))
REGION = MemoryRegion(start=0x10000, length=1 << 16, r_key=0x1234, max_depth=4)
K_MR = memory_region_key(K_PD, REGION)
SUB = (0x10000 + 3 * 0x2000, 0x2000)  # depth 3, the fourth 8 KiB block


def test_region_key_is_prf_of_start_end_rkey() -> None:
    message = (0x10000).to_bytes(8, "big") + (0x20000).to_bytes(8, "big") + (0x1234).to_bytes(4, "big")
    assert K_MR.material == prf(K_PD, message)
    other = MemoryRegion(start=0x10000, length=1 << 16, r_key=0x1235, max_depth=4)
    assert memory_region_key(K_PD, other).material != K_MR.material


def test_tree_walk_is_left_right_right() -> None:
    # offset 0x6000 in a 64 KiB region: left 32 KiB at 0, right 16 KiB at 0x4000, right 8 KiB at 0x6000
    step1 = child_key(K_MR, REGION.start, 1 << 16, b"L")
    step2 = child_key(step1, REGION.start, 1 << 15, b"R")
    step3 = child_key(step2, REGION.start + 0x4000, 1 << 14, b"R")
    assert derive_subregion_key(K_MR, REGION, *SUB) == step3
    assert step3.owner == (SUB[0], SUB[0] + SUB[1])


def test_subregion_key_verifies_its_region_and_its_descendants() -> None:
    k_sr = derive_subregion_key(K_MR, REGION, *SUB)
    assert verify_subregion_key(K_MR, REGION, *SUB, k_sr.material)
    # the delegate derives below its node without knowing K_MR: one more level is still allowed
    delegated = MemoryRegion(start=SUB[0], length=SUB[1], r_key=REGION.r_key, max_depth=1)
    for start in (SUB[0], SUB[0] + SUB[1] // 2):
        k_child = derive_subregion_key(k_sr, delegated, start, SUB[1] // 2)
        assert verify_subregion_key(K_MR, REGION, start, SUB[1] // 2, k_child.material)


def test_subregion_key_fails_one_byte_outside() -> None:
    k_sr = derive_subregion_key(K_MR, REGION, *SUB).material
    start, length = SUB
    for bad in [(start - 1, length), (start + 1, length), (start, length + 1), (start, length * 2),
                (start + length, length), (start - length, length)]:
        assert not verify_subregion_key(K_MR, REGION, *bad, k_sr)
    assert not verify_subregion_key(K_MR, REGION, 0x10000, 1 << 16, k_sr)  # not the whole region


def test_depth_limit() -> None:
    k_sr = derive_subregion_key(K_MR, REGION, *SUB)
    too_deep = (SUB[0], SUB[1] // 4)  # depth 5 > max_depth 4
    with pytest.raises(MemoryKeyError, match="depth 5, the region allows 4"):
        derive_subregion_key(K_MR, REGION, *too_deep)
    delegated = MemoryRegion(start=SUB[0], length=SUB[1], r_key=REGION.r_key, max_depth=2)
    forged = derive_subregion_key(k_sr, delegated, *too_deep).material
    assert not verify_subregion_key(K_MR, REGION, *too_deep, forged)


def test_depth_zero_disables_delegation() -> None:
    flat = MemoryRegion(start=0, length=4096, r_key=1, max_depth=0)
    root = memory_region_key(K_PD, flat)
    assert verify_subregion_key(root, flat, 0, 4096, root.material)
    with pytest.raises(MemoryKeyError):
        derive_subregion_key(root, flat, 0, 2048)


@pytest.mark.parametrize(("start", "length", "depth"), [(0, 3000, 0), (-1, 4096, 0), (0, 4096, 13)])
def test_bad_regions_rejected(start: int, length: int, depth: int) -> None:
    with pytest.raises(MemoryKeyError):
        MemoryRegion(start=start, length=length, r_key=1, max_depth=depth)
