"""Marking codecs: the seed's worked examples, random paths with loops, and Table 3's largest sizes."""

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ibsec.addressing import MF_MAX
from ibsec.marking import Coord, DdpmLayout, FatTreeLayout, Kind, TopologyTooLarge, largest_ddpm, walk

# ---- port marking -----------------------------------------------------------------------------------------


def test_fig5_node6_marks_its_own_address() -> None:
    tree = FatTreeLayout(ports=4, levels=3)
    node6 = (0b00, 0b01, 0b10)
    mf = tree.mark(0, level=0, digit=0b10)
    assert mf == 0b10  # (-, -, 10) after the leaf
    mf = tree.mark(mf, level=1, digit=0b01)
    mf = tree.mark(mf, level=2, digit=0b00)
    assert mf == (2 << 35) | 0b00_01_10
    assert tree.decode(mf, destination=(0b11, 0b00, 0b01)) == node6
    assert tree.encode(tree.marks_of(node6, turn_level=2)) == mf


def test_turnaround_below_the_top_takes_the_upper_digits_from_the_destination() -> None:
    tree = FatTreeLayout(ports=4, levels=3)
    node6, node4 = (0, 1, 2), (0, 1, 0)
    mf = tree.encode(tree.marks_of(node6, turn_level=1))
    assert tree.highest_level(mf) == 1
    assert tree.decode(mf, destination=node4) == node6


@given(st.data(), st.integers(2, 64), st.integers(0, MF_MAX))
def test_down_port_operands_do_what_mark_does(data: st.DataObject, ports: int, mf: int) -> None:
    digit = data.draw(st.integers(0, ports - 1))
    tree = FatTreeLayout(ports, FatTreeLayout(ports, 1).max_levels)
    for level in range(tree.levels):
        assert tree.apply(mf, tree.down_port_entry(level, digit)) == tree.mark(mf, level, digit)


def test_fat_tree_too_large_names_the_largest_that_fits() -> None:
    expected = r"largest that fits has 5 levels \(64\^5 = 1073741824 hosts\)"
    with pytest.raises(TopologyTooLarge, match=expected):
        FatTreeLayout(ports=64, levels=6)
    assert FatTreeLayout(ports=4, levels=3).max_levels == 8  # the 3-bit level field caps small switches
    with pytest.raises(ValueError, match="digit 4"):
        FatTreeLayout(ports=4, levels=3).mark(0, 0, 4)


@st.composite
def _fat_tree_case(draw: st.DrawFn) -> tuple[FatTreeLayout, Coord, Coord, int]:
    ports = draw(st.integers(2, 300))
    tree = FatTreeLayout(ports, draw(st.integers(1, FatTreeLayout(ports, 1).max_levels)))
    address = st.tuples(*[st.integers(0, ports - 1)] * tree.levels)
    src, dst = draw(address), draw(address)
    differing = [level for level in range(tree.levels) if tree.digit(src, level) != tree.digit(dst, level)]
    lowest_turn = max(differing, default=0)
    return tree, src, dst, draw(st.integers(lowest_turn, tree.levels - 1))


@given(_fat_tree_case())
def test_port_marking_decodes_to_the_source(case: tuple[FatTreeLayout, Coord, Coord, int]) -> None:
    tree, src, dst, turn = case
    mf = tree.encode(tree.marks_of(src, turn))
    assert 0 <= mf <= MF_MAX
    assert tree.decode(mf, dst) == src


# ---- DDPM: the seed's examples ----------------------------------------------------------------------------


def _path_from_vectors(source: Coord, vectors: Sequence[Coord], xor: bool) -> list[Coord]:
    if xor:
        return [tuple(s ^ v for s, v in zip(source, vec, strict=True)) for vec in vectors]
    return [tuple(s + v for s, v in zip(source, vec, strict=True)) for vec in vectors]


def _vectors_along(layout: DdpmLayout, path: list[Coord]) -> list[Coord]:
    mf = layout.init(host_port=3)
    seen = [layout.unpack(mf)[0]]
    for here, there in zip(path, path[1:], strict=False):
        mf = layout.step(mf, layout.delta(here, there))
        seen.append(layout.unpack(mf)[0])
    return seen


def test_fig6a_mesh_detour_from_1_1_to_2_3() -> None:
    mesh = DdpmLayout(Kind.MESH, (4, 4))
    vectors = [(0, 0), (1, 0), (2, 0), (2, -1), (1, -1), (1, 0), (1, 1), (1, 2)]
    path = _path_from_vectors((1, 1), vectors, xor=False)
    assert path[-1] == (2, 3)
    assert _vectors_along(mesh, path) == vectors
    assert mesh.decode((2, 3), walk(mesh, path, host_port=3)) == ((1, 1), 3)


def test_fig6b_hypercube_from_1_1_0_to_0_0_0() -> None:
    cube = DdpmLayout(Kind.HYPERCUBE, (2, 2, 2))
    vectors = [(0, 0, 0), (1, 0, 0), (1, 0, 1), (0, 0, 1), (0, 1, 1), (0, 1, 0), (1, 1, 0)]
    path = _path_from_vectors((1, 1, 0), vectors, xor=True)
    assert path[-1] == (0, 0, 0)
    assert _vectors_along(cube, path) == vectors
    assert cube.decode((0, 0, 0), walk(cube, path, host_port=3)) == ((1, 1, 0), 3)


def test_torus_wrap_link_is_one_step_and_a_full_turn_decodes() -> None:
    torus = DdpmLayout(Kind.TORUS, (5, 3))
    assert torus.delta((4, 1), (0, 1)) == (1, 0)
    assert torus.delta((0, 1), (4, 1)) == (-1, 0)
    ring = [(x % 5, 2) for x in range(3, 3 + 11)]  # two full turns and one more hop
    assert torus.decode((ring[-1]), walk(torus, ring, host_port=1)) == ((3, 2), 1)


def test_layout_on_the_wire_and_the_p4_operands() -> None:
    mesh = DdpmLayout(Kind.MESH, (4, 4), host_bits=4)
    assert mesh.width == 17
    assert mesh.pack((-1, 2), host_port=5) == (2 << 21) | (((1 << 17) - 1) << 4) | 5
    entry = mesh.port_entry(0, -1)
    assert entry.mask == ((1 << 17) - 1) << 4
    mf = mesh.pack((0, 1), 5)
    assert mesh.apply(mf, entry) == mesh.pack((-1, 1), 5)  # the borrow stays inside dimension 0
    with pytest.raises(ValueError, match="not neighbours"):
        mesh.delta((0, 0), (1, 1))
    with pytest.raises(ValueError, match="outside the mesh"):
        mesh.decode((0, 0), mesh.pack((1, 0)))


# ---- DDPM: random paths with loops --------------------------------------------------------------------


@st.composite
def _ddpm_walk(draw: st.DrawFn) -> tuple[DdpmLayout, list[Coord], int]:
    kind = draw(st.sampled_from(Kind))
    host_bits = draw(st.integers(0, 8))
    dims = draw(st.integers(1, 12 if kind is Kind.HYPERCUBE else 4))
    if kind is Kind.HYPERCUBE:
        sizes = (2,) * dims
    else:
        largest = largest_ddpm(kind, dims, host_bits)[0]
        sizes = tuple(draw(st.integers(2, min(largest, 12))) for _ in range(dims))
    layout = DdpmLayout(kind, sizes, host_bits)
    here = tuple(draw(st.integers(0, k - 1)) for k in sizes)
    path = [here]
    for _ in range(draw(st.integers(0, 60))):  # loops and detours: any neighbour, any number of times
        dim = draw(st.integers(0, dims - 1))
        k = sizes[dim]
        options = [here[dim] ^ 1] if kind is Kind.HYPERCUBE else [here[dim] - 1, here[dim] + 1]
        if kind is Kind.TORUS:
            options = [o % k for o in options]
        options = [o for o in options if 0 <= o < k and o != here[dim]]
        here = here[:dim] + (draw(st.sampled_from(options)),) + here[dim + 1:]
        path.append(here)
    return layout, path, draw(st.integers(0, (1 << host_bits) - 1))


@given(_ddpm_walk())
def test_ddpm_random_paths_decode_to_the_source(case: tuple[DdpmLayout, list[Coord], int]) -> None:
    layout, path, port = case
    mf = walk(layout, path, port)
    assert 0 <= mf <= MF_MAX
    assert layout.decode(path[-1], mf) == (path[0], port)


# ---- Table 3 ------------------------------------------------------------------------------------------


def _corner_walk(layout: DdpmLayout) -> int:
    """MF after walking from the origin to the far corner, one hop at a time, dimension by dimension."""
    mf = layout.init(host_port=(1 << layout.host_bits) - 1)
    for dim, k in enumerate(layout.sizes):
        entry = layout.port_entry(dim, 1)
        for _ in range(k - 1):
            mf = layout.apply(mf, entry)
    return mf


@pytest.mark.parametrize(
    ("kind", "dims", "host_bits", "size"),
    [
        (Kind.MESH, 2, 0, 2**18),  # Table 3 as printed: the whole 38 bits for the vector
        (Kind.TORUS, 2, 0, 2**18),
        (Kind.MESH, 3, 0, 2**11),
        (Kind.TORUS, 3, 0, 2**11),
        (Kind.MESH, 2, 4, 2**16),  # with the 4-bit host port field the sizes shrink
        (Kind.MESH, 3, 4, 2**10),
        (Kind.TORUS, 2, 4, 2**16),
        (Kind.TORUS, 3, 4, 2**10),
    ],
)
def test_table3_largest_mesh_and_torus(kind: Kind, dims: int, host_bits: int, size: int) -> None:
    assert largest_ddpm(kind, dims, host_bits) == (size,) * dims
    layout = DdpmLayout(kind, (size,) * dims, host_bits)
    far = (size - 1,) * dims
    mf = _corner_walk(layout)
    assert layout.decode(far, mf) == ((0,) * dims, (1 << host_bits) - 1)
    assert layout.decode((0,) * dims, layout.pack((-(size - 1),) * dims)) == (far, 0)
    with pytest.raises(TopologyTooLarge, match=f"the largest {dims}-D {kind.value} is {size} per dimension"):
        DdpmLayout(kind, (size + 1,) + (size,) * (dims - 1), host_bits)


@pytest.mark.parametrize(("host_bits", "n"), [(0, 38), (4, 34)])
def test_table3_largest_hypercube(host_bits: int, n: int) -> None:
    cube = DdpmLayout(Kind.HYPERCUBE, (2,) * n, host_bits)
    assert cube.decode((1,) * n, _corner_walk(cube))[0] == (0,) * n
    with pytest.raises(TopologyTooLarge, match=f"the largest is a {n}-cube"):
        DdpmLayout(Kind.HYPERCUBE, (2,) * (n + 1), host_bits)
