"""Benchmark of the session key cache: hit rate against cache size (model and simulation) and lookup cost.

Run as ``python -m labs.skc_bench [--out DIR] [--packets N]``.  Prints:

1. a table of hit rate against cache size: the seed's eq. 3 estimate F_n(x), the packet-weighted model,
   the simulated LRU alone (one process), and the simulated LRU without and with the prefetch buffer when
   several processes share the adapter and are switched; the same series drawn on one figure saved as
   ``DIR/skc-hit-rate.png`` (default DIR ``runs/bench``);
2. the cache capacity (sources supported at hit probability 0.9) of 2-16 KiB caches, as seed 001 Fig. 3;
3. the cost of one key lookup served from the plaintext LRU against one unsealed from the encrypted store.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
from ibsec.keys import Key, KeyType  # noqa: E402
from ibsec.skc import (  # noqa: E402
    DEFAULT_ENTRY_BYTES,
    SessionKeyCache,
    cache_capacity,
    hit_probability,
    packet_hit_rate,
    simulate,
)

SOURCES = 64  # session keys per process
LAM, MU = 1.0, 4.0  # OFF periods four times as long as ON periods (seed 001: OFF is several times ON)
PROCESSES, SWITCH_RATE = 8, 8.0  # the multi-process scenario: 8 processes, ~2 ON periods per time slice
PACKETS_PER_ON = 20.0
CACHE_SIZES = [1, 2, 4, 8, 12, 16, 24, 32, 48, 64]


def hit_rate_table(packets: int) -> list[dict[str, float]]:
    rows = []
    for x in CACHE_SIZES:
        single = simulate(SOURCES, x, LAM, MU, packets_per_on=PACKETS_PER_ON, max_packets=packets)
        multi = {
            prefetch: simulate(
                SOURCES, x, LAM, MU, packets_per_on=PACKETS_PER_ON, processes=PROCESSES,
                switch_rate=SWITCH_RATE, prefetch_entries=prefetch, max_packets=packets,
            )
            for prefetch in (0, 16)
        }
        rows.append({
            "x": x,
            "eq3": float(hit_probability(x, SOURCES, LAM, MU)),
            "packet_model": packet_hit_rate(x, SOURCES, LAM, MU),
            "sim": single.hit_rate,
            "sim_fit": single.fit_fraction,
            "switched": multi[0].hit_rate,
            "prefetch": multi[16].hit_rate,
        })
    return rows


def print_hit_rates(rows: list[dict[str, float]], packets: int) -> None:
    print(f"hit rate vs cache size: n={SOURCES} ON/OFF sources, lambda={LAM}, mu={MU}, "
          f"{PACKETS_PER_ON:g} packets per ON period, {packets} packets per simulation")
    print(f"  switched: {PROCESSES} processes x {SOURCES} sources, switch rate {SWITCH_RATE}; "
          f"prefetch buffer 16 entries")
    print(f"  {'entries':>7} {'F_n(x)':>8} {'sim-time':>8} {'pkt-model':>9} {'sim-LRU':>8} "
          f"{'switched':>8} {'+prefetch':>9} {'gain':>6}")
    for r in rows:
        print(f"  {r['x']:>7.0f} {r['eq3']:>8.4f} {r['sim_fit']:>8.4f} {r['packet_model']:>9.4f} "
              f"{r['sim']:>8.4f} {r['switched']:>8.4f} {r['prefetch']:>9.4f} "
              f"{r['prefetch'] - r['switched']:>+6.3f}")


def plot_hit_rates(rows: list[dict[str, float]], path: Path) -> None:
    xs = list(range(0, SOURCES + 1))
    fig, ax = plt.subplots(figsize=(8, 5.5))
    ax.plot(xs, [float(hit_probability(x, SOURCES, LAM, MU)) for x in xs], "-", color="tab:blue",
            label="model eq. 3: P(active keys <= x)")
    ax.plot(xs[1:], [packet_hit_rate(x, SOURCES, LAM, MU) for x in xs[1:]], "--", color="tab:green",
            label="model, per packet (LRU keeps x of i active keys; no cold misses)")
    sizes = [r["x"] for r in rows]
    ax.plot(sizes, [r["sim_fit"] for r in rows], "o", mfc="none", color="tab:blue",
            label="simulation: share of time with <= x keys active")
    ax.plot(sizes, [r["sim"] for r in rows], "s", color="tab:green",
            label="simulation: LRU hit rate, 1 process")
    ax.plot(sizes, [r["switched"] for r in rows], "v:", color="tab:red",
            label=f"simulation: {PROCESSES} processes switched, no prefetch")
    ax.plot(sizes, [r["prefetch"] for r in rows], "^-", color="tab:purple",
            label=f"simulation: {PROCESSES} processes switched, 16-entry prefetch buffer")
    ax.set_xlabel(f"cache size x (entries of {DEFAULT_ENTRY_BYTES} bytes)")
    ax.set_ylabel("hit rate (fraction of key lookups)")
    ax.set_title(f"Session key cache: {SOURCES} ON/OFF sessions per process, "
                 f"\N{GREEK SMALL LETTER LAMDA}={LAM:g}, \N{GREEK SMALL LETTER MU}={MU:g}")
    ax.set_xlim(0, SOURCES)
    ax.set_ylim(0, 1.02)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def print_capacities() -> None:
    print("cache capacity (sources supported at hit probability 0.9, eq. 3), seed 001 Fig. 3 style:")
    ratios = [4.0, 9.0, 19.0]
    print(f"  {'cache':>6} {'entries':>7} " + " ".join(f"{f'OFF/ON={r:g}':>10}" for r in ratios))
    for kib in (2, 4, 8, 16):
        entries = kib * 1024 // DEFAULT_ENTRY_BYTES
        caps = [cache_capacity(entries, 0.9, 1.0, r) for r in ratios]
        print(f"  {kib:>4}KB {entries:>7} " + " ".join(f"{c:>10}" for c in caps))


def lookup_cost(rounds: int = 5_000, repeats: int = 5, keys: int = 256) -> tuple[float, float]:
    """Best-of-``repeats`` mean ns per get() of one process's keys: all hits in a 16 KiB cache, and all
    unsealed from the store (no cache).  The best run is the least disturbed by other load."""
    results = []
    for capacity in (16 * 1024, 0):
        skc = SessionKeyCache(capacity_bytes=capacity)
        ids = [(0, i) for i in range(keys)]
        for key_id in ids:
            skc.put(key_id, Key.generate(KeyType.SK, (key_id[1],)))
        for key_id in ids:
            skc.get(key_id)  # warm
        runs = []
        for _ in range(repeats):
            start = time.perf_counter_ns()
            for n in range(rounds):
                skc.get(ids[n % keys])
            runs.append((time.perf_counter_ns() - start) / rounds)
        results.append(min(runs))
    return results[0], results[1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/bench"), help="results directory")
    parser.add_argument("--packets", type=int, default=30_000, help="packets per simulated point")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    started = time.monotonic()
    rows = hit_rate_table(args.packets)
    print_hit_rates(rows, args.packets)
    path = args.out / "skc-hit-rate.png"
    plot_hit_rates(rows, path)
    print(f"figure: {path}")
    print_capacities()
    hit_ns, store_ns = lookup_cost()
    print(f"key lookup (best of 5 x 5000): plaintext LRU hit {hit_ns:.0f} ns, "
          f"unseal from encrypted store {store_ns:.0f} ns, store/hit = {store_ns / hit_ns:.1f}x")
    print(f"skc_bench done in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
