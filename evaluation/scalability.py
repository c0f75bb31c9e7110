"""Experiment 4b: the largest fabric each marking scheme supports in the 38-bit MF (seed 000 Tables 2-3),
checked by simulating the marking with ``ibsec.marking`` on those sizes, and the packets a traceback
needs against probabilistic packet marking (Savage et al.'s bound).

Every simulated packet is marked hop by hop with the same operands the SM writes into the switches
(:meth:`DdpmLayout.port_entry`, :meth:`FatTreeLayout.mark`) and decoded at the receiver; a size one step
larger must be refused by the codec's fit check.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from ibsec.addressing import MF_BITS
from ibsec.marking import (
    DdpmLayout,
    FatTreeLayout,
    Kind,
    PortEntry,
    TopologyTooLarge,
    largest_ddpm,
)

from .common import Context, Section, Table, fmt, new_figure

PPM_P = 1 / 25  # Savage et al.: marking probability 1/25
FAT_TREE_PORTS = (2, 4, 8, 16, 32, 64)
DETOUR_PROBABILITY = 0.05  # adaptive routing: a hop away from the destination now and then
MAX_HOPS = 4_000_000  # bound of one simulated walk


def savage_expected_packets(d: int, p: float = PPM_P) -> float:
    """Savage et al.: E[X] < ln(d) / (p (1-p)^(d-1)) packets to rebuild a path of d hops (1 for d = 1)."""
    if d < 1:
        raise ValueError("path length must be >= 1")
    return math.log(d) / (p * (1 - p) ** (d - 1)) if d > 1 else 1 / p


def paper_fat_tree_capacity(ports: int) -> int:
    """Seed 000 Table 2 as printed: p^ceil(38 / log2 p)."""
    return ports ** math.ceil(MF_BITS / math.log2(ports))


# ---- fat trees -------------------------------------------------------------------------------------------


def fat_tree_trial(layout: FatTreeLayout, rng: random.Random) -> bool:
    """One packet from a random source to a random destination: marked going up, decoded at the receiver.

    Adaptive up-routing picks any up-port, which port marking ignores (it records down-port digits), so
    the marks depend only on the source and the level where the packet turns around.
    """
    source = tuple(rng.randrange(layout.ports) for _ in range(layout.levels))
    destination = tuple(rng.randrange(layout.ports) for _ in range(layout.levels))
    differing = [
        lvl for lvl in range(layout.levels) if layout.digit(source, lvl) != layout.digit(destination, lvl)
    ]
    turn = max(differing, default=0)
    mf = layout.encode(layout.marks_of(source, turn))
    return layout.decode(mf, destination) == source


def fat_tree_rows(trials: int, rng: random.Random) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for ports in FAT_TREE_PORTS:
        levels = FatTreeLayout(ports, 1).max_levels
        layout = FatTreeLayout(ports, levels)
        correct = sum(fat_tree_trial(layout, rng) for _ in range(trials))
        rows.append(
            {
                "scheme": "port marking",
                "topology": f"fat tree, {ports}-port switches",
                "ports": ports,
                "paper_max_hosts": paper_fat_tree_capacity(ports),
                "our_max_hosts": ports**levels,
                "our_layout": f"{levels} levels x {layout.slot_bits} bits + 3-bit level field",
                "packets_simulated": trials,
                "traced_correctly": correct,
                "one_larger_refused": refuses(lambda p=ports, lv=levels: FatTreeLayout(p, lv + 1)),
            }
        )
    return rows


def refuses(build: object) -> bool:
    """True when building the next larger layout raises TopologyTooLarge (the codec's fit check)."""
    assert callable(build)
    try:
        build()
    except TopologyTooLarge:
        return True
    return False


# ---- DDPM ------------------------------------------------------------------------------------------------


@dataclass
class Walker:
    """Hop-by-hop DDPM marking over a mesh, torus or hypercube with the switches' table operands."""

    layout: DdpmLayout
    rng: random.Random

    def __post_init__(self) -> None:
        dims = range(len(self.layout.sizes))
        self.entries: dict[tuple[int, int], PortEntry] = {
            (dim, step): self.layout.port_entry(dim, step) for dim in dims for step in (1, -1)
        }

    def neighbour_step(self, here: list[int], dim: int, towards: int) -> int:
        """The +-1 step of a hop in ``dim`` towards coordinate ``towards`` (a detour goes the other way)."""
        size = self.layout.sizes[dim]
        if self.layout.kind is Kind.HYPERCUBE:
            return 1
        if self.layout.kind is Kind.TORUS:  # the shorter way round
            return 1 if (towards - here[dim]) % size <= size // 2 else -1
        return 1 if towards > here[dim] else -1

    def move(self, here: list[int], dim: int, step: int) -> None:
        size = self.layout.sizes[dim]
        if self.layout.kind is Kind.HYPERCUBE:
            here[dim] ^= 1
        elif self.layout.kind is Kind.TORUS:
            here[dim] = (here[dim] + step) % size
        else:
            here[dim] += step

    def walk(self, source: Sequence[int], destination: Sequence[int], host_port: int) -> tuple[int, int]:
        """(MF at the destination switch, hops): adaptive minimal routing with random detours."""
        layout, rng = self.layout, self.rng
        here, mf, hops = list(source), layout.init(host_port), 0
        while hops < MAX_HOPS:
            pending = [d for d in range(len(here)) if here[d] != destination[d]]
            if not pending:
                return mf, hops
            dim = rng.choice(pending)
            step = self.neighbour_step(here, dim, destination[dim])
            if rng.random() < DETOUR_PROBABILITY and layout.kind is not Kind.HYPERCUBE:
                dim = rng.randrange(len(here))
                step = rng.choice((1, -1))
                if layout.kind is Kind.MESH and not 0 <= here[dim] + step < layout.sizes[dim]:
                    step = -step
            mf = layout.apply(mf, self.entries[(dim, step if layout.kind is not Kind.HYPERCUBE else 1)])
            self.move(here, dim, step)
            hops += 1
        raise RuntimeError(f"walk exceeded {MAX_HOPS} hops")


def ddpm_pairs(
    layout: DdpmLayout, rng: random.Random, random_pairs: int
) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """The farthest-apart pairs (the widest distance vector, both signs; one sign only when
    ``random_pairs`` is 0) and ``random_pairs`` random pairs. On a mesh and hypercube the farthest are
    opposite corners; on a torus, the middle."""
    low = tuple(0 for _ in layout.sizes)
    high = tuple(k // 2 if layout.kind is Kind.TORUS else k - 1 for k in layout.sizes)
    pairs = [(low, high), (high, low)][: 2 if random_pairs else 1]  # quick runs walk one way only
    for _ in range(random_pairs):
        source, destination = (tuple(rng.randrange(k) for k in layout.sizes) for _ in range(2))
        pairs.append((source, destination))
    return pairs


def ddpm_row(
    kind: Kind, dims: int, host_bits: int, paper: str, random_pairs: int, rng: random.Random
) -> dict[str, object]:
    sizes = largest_ddpm(kind, dims, host_bits)
    layout = DdpmLayout(kind, sizes, host_bits)
    walker = Walker(layout, rng)
    correct, total, longest = 0, 0, 0
    for source, destination in ddpm_pairs(layout, rng, random_pairs if kind is not Kind.HYPERCUBE else 200):
        port = rng.randrange(1 << host_bits) if host_bits else 0
        mf, hops = walker.walk(source, destination, port)
        correct += layout.decode(tuple(destination), mf) == (tuple(source), port)
        total += 1
        longest = max(longest, hops)
    if kind is Kind.HYPERCUBE:
        larger = (2,) * (dims + 1)
        name = f"{dims}-cube hypercube"
    else:
        larger = (sizes[0] + 1,) + sizes[1:]
        name = f"{'x'.join(f'2^{k.bit_length() - 1}' for k in sizes)} {kind.value}"
    return {
        "scheme": "DDPM",
        "topology": name,
        "host_port_bits": host_bits,
        "paper_max": paper,
        "our_max_hosts": math.prod(sizes),
        "our_layout": f"{len(sizes) if kind is not Kind.HYPERCUBE else 1}"
        f" field(s) of {layout.width if kind is not Kind.HYPERCUBE else dims} bits",
        "packets_simulated": total,
        "traced_correctly": correct,
        "longest_walk_hops": longest,
        "one_larger_refused": refuses(lambda: DdpmLayout(kind, larger, host_bits)),
    }


DDPM_CASES = (
    (Kind.MESH, 2, "2^18 x 2^18"),
    (Kind.TORUS, 2, "2^18 x 2^18"),
    (Kind.MESH, 3, "2^11 x 2^11 x 2^11"),
    (Kind.TORUS, 3, "2^11 x 2^11 x 2^11"),
    (Kind.HYPERCUBE, 38, "2^38 (38-cube)"),
)


def ddpm_rows(random_pairs: int, rng: random.Random, ctx: Context) -> list[dict[str, object]]:
    rows = []
    for host_bits in (0, 4):
        for kind, dims, paper in DDPM_CASES:
            use_dims = dims if kind is not Kind.HYPERCUBE else MF_BITS - host_bits
            rows.append(ddpm_row(kind, use_dims, host_bits, paper, random_pairs, rng))
            ctx.progress(
                "4b",
                f"DDPM {rows[-1]['topology']} (host port {host_bits} bits): "
                f"{rows[-1]['traced_correctly']}/{rows[-1]['packets_simulated']} traced",
            )
    return rows


# ---- packets needed: ours vs PPM -------------------------------------------------------------------------

PATH_LENGTHS = (2, 4, 6, 8, 10, 12, 16, 20, 25, 30, 39)  # 39: the diameter of a 20x20 mesh (seed 000)


def ppm_rows() -> list[dict[str, object]]:
    return [
        {
            "path_hops": d,
            "ppm_expected_packets_bound": savage_expected_packets(d),
            "port_marking_packets": 1,
            "ddpm_packets": 1,
        }
        for d in PATH_LENGTHS
    ]


# ---- the section -----------------------------------------------------------------------------------------


def run(ctx: Context) -> Section:
    rng = random.Random(38)
    ctx.progress("4b", "fat trees: port marking at the largest size per switch radix")
    fat = fat_tree_rows(200 if ctx.profile.name == "quick" else 2_000, rng)
    ddpm = ddpm_rows(ctx.profile.ddpm_random_pairs, rng, ctx)
    ppm = ppm_rows()
    section = Section(
        "4b",
        "Traceback scalability in 38 bits and packets needed (seed 000 Tables 2-3)",
        "Port marking supports p^ceil(38/log p) hosts on a fat tree of p-port switches (Table 2); DDPM "
        "supports a 2^18 x 2^18 2D mesh/torus, 2^11 x 2^11 x 2^11 3D mesh/torus and a 38-cube (Table 3); "
        "both identify the source from one packet, where probabilistic marking needs many.",
    )
    section.csvs = [
        ctx.write_csv("4b_fat_tree_capacity", fat),
        ctx.write_csv("4b_ddpm_capacity", ddpm),
        ctx.write_csv("4b_packets_needed", ppm),
    ]
    section.tables.append(
        Table(
            "Port marking on fat trees: the largest tree, simulated packets traced to their true source",
            [
                "switch ports",
                "paper: max hosts",
                "ours: max hosts",
                "our layout",
                "traced correctly",
                "one level more refused",
            ],
            [
                [
                    str(r["ports"]),
                    fmt(float(str(r["paper_max_hosts"])), 0),
                    fmt(float(str(r["our_max_hosts"])), 0),
                    str(r["our_layout"]),
                    f"{r['traced_correctly']}/{r['packets_simulated']}",
                    "yes" if r["one_larger_refused"] else "NO",
                ]
                for r in fat
            ],
        )
    )
    section.tables.append(
        Table(
            "DDPM: the largest mesh/torus/hypercube, corner-to-corner and random packets walked hop by hop "
            "with adaptive detours",
            [
                "topology (ours)",
                "host-port bits",
                "paper: max",
                "ours: max hosts",
                "traced correctly",
                "longest walk (hops)",
                "one larger refused",
            ],
            [
                [
                    str(r["topology"]),
                    str(r["host_port_bits"]),
                    str(r["paper_max"]),
                    f"2^{math.log2(float(str(r['our_max_hosts']))):.0f}",
                    f"{r['traced_correctly']}/{r['packets_simulated']}",
                    fmt(float(str(r["longest_walk_hops"])), 0),
                    "yes" if r["one_larger_refused"] else "NO",
                ]
                for r in ddpm
            ],
        )
    )
    section.tables.append(
        Table(
            f"Packets needed to identify the source: probabilistic packet marking (Savage et al. bound, "
            f"p = 1/{round(1 / PPM_P)}) vs our deterministic schemes",
            ["path length (hops)", "PPM: expected packets (bound)", "port marking / DDPM (ours)"],
            [[str(r["path_hops"]), fmt(float(str(r["ppm_expected_packets_bound"])), 0), "1"] for r in ppm],
        )
    )
    section.figures = [plot_capacity(ctx, fat, ddpm), plot_packets(ctx, ppm)]
    section.checks = {
        "every simulated packet traced to its true source": all(
            r["traced_correctly"] == r["packets_simulated"] for r in (*fat, *ddpm)
        ),
        "every one-step-larger topology refused by the fit check": all(
            bool(r["one_larger_refused"]) for r in (*fat, *ddpm)
        ),
        "DDPM with no host-port bits matches Table 3": all(
            r["our_max_hosts"]
            == 2 ** {"2^18 x 2^18": 36, "2^11 x 2^11 x 2^11": 33, "2^38 (38-cube)": 38}[str(r["paper_max"])]
            for r in ddpm
            if r["host_port_bits"] == 0
        ),
    }
    section.notes = [
        "Our fat-tree MF keeps a 3-bit level field (the highest level that marked, DESIGN 2.1), so the slots "
        "have 35 bits and the level count is floor(35 / ceil(log2 p)), at most 8. The paper's "
        "p^ceil(38/log p) rounds up, which over-counts whenever log p does not divide 38 "
        "(8-port switches: 13 levels of 3 bits would need 39 bits).",
        "Our DDPM reserves 4 low bits for the source host's port on its first switch (DESIGN 2.2); with 0 "
        "such bits the sizes are exactly Table 3.",
    ]
    ctx.progress("4b", "done")
    return section


def plot_capacity(ctx: Context, fat: list[dict[str, object]], ddpm: list[dict[str, object]]) -> str:
    fig, ax = new_figure(
        "Largest fabric traceable from one packet in the 38-bit MF",
        "switch ports (fat tree)",
        "hosts (log2 scale)",
    )
    ports = [int(str(r["ports"])) for r in fat]
    ax.plot(
        ports,
        [math.log2(float(str(r["paper_max_hosts"]))) for r in fat],
        "o--",
        color="gray",
        label="paper Table 2: p^ceil(38/log p)",
    )
    ax.plot(
        ports,
        [math.log2(float(str(r["our_max_hosts"]))) for r in fat],
        "s-",
        color="tab:blue",
        label="ours: port marking, simulated",
    )
    ax.set_xscale("log", base=2)
    styles = {0: ("tab:green", "-"), 4: ("tab:red", ":")}
    for r in ddpm:
        color, line = styles[int(str(r["host_port_bits"]))]
        ax.axhline(math.log2(float(str(r["our_max_hosts"]))), color=color, linestyle=line, alpha=0.6)
    for r in ddpm:
        if r["host_port_bits"] == 0 and "torus" not in str(r["topology"]):
            ax.annotate(
                f"DDPM {r['topology']} (= Table 3)",
                (2.1, math.log2(float(str(r["our_max_hosts"]))) + 0.2),
                fontsize=8,
                color="tab:green",
                va="bottom",
                bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none", "pad": 1},
            )
    ax.plot([], [], color="tab:green", label="ours: DDPM, 0 host-port bits (Table 3 sizes)")
    ax.plot([], [], color="tab:red", linestyle=":", label="ours: DDPM with a 4-bit host-port field")
    ax.set_ylabel("hosts, log2 (38 = 2^38)")
    ax.legend(loc="lower right", fontsize=8)
    return ctx.save(fig, "4b_capacity")


def plot_packets(ctx: Context, ppm: list[dict[str, object]]) -> str:
    fig, ax = new_figure(
        "Packets needed to trace a source vs path length",
        "path length d (switch hops)",
        "packets (log scale)",
    )
    hops = [int(str(r["path_hops"])) for r in ppm]
    ax.plot(
        hops,
        [float(str(r["ppm_expected_packets_bound"])) for r in ppm],
        "o-",
        color="tab:red",
        label="probabilistic marking, Savage et al. bound ln(d)/(p(1-p)^(d-1)), p=1/25",
    )
    ax.plot(hops, [1] * len(hops), "s-", color="tab:blue", label="ours: port marking / DDPM (1 packet)")
    ax.set_yscale("log")
    ax.legend(loc="upper left", fontsize=8)
    return ctx.save(fig, "4b_packets_needed")
