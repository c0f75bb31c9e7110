"""The ON/OFF Markov model of seed 001 (eq. 1-3) and the trace-driven simulator against it."""

from fractions import Fraction
from functools import partial

import pytest
from ibsec.skc import cache_capacity, hit_probability, packet_hit_rate, simulate, state_probabilities


def test_seed_worked_example_exactly() -> None:
    # seed 001 sec. 3.2: lambda = mu, x = 3, n = 4: P0 = P4 = 1/16, P1 = P3 = 1/4, P2 = 3/8, p >= 15/16
    assert state_probabilities(4, 1, 1) == [Fraction(1, 16), Fraction(1, 4), Fraction(3, 8), Fraction(1, 4),
                                            Fraction(1, 16)]
    assert hit_probability(3, 4, 1, 1) == Fraction(15, 16)
    # ... and with n = 5 the sum to 3 is 13/16 < 0.9, so the capacity at p = 0.9 is 4
    assert hit_probability(3, 5, 1, 1) == Fraction(13, 16)
    assert cache_capacity(3, 0.9, 1, 1) == 4


def test_float_path_agrees_with_exact_and_scales() -> None:
    for n, x, lam, mu in [(4, 3, 1, 1), (30, 7, 1, 5), (12, 0, 2, 3)]:
        assert hit_probability(x, n, float(lam), float(mu)) == pytest.approx(
            float(hit_probability(x, n, lam, mu)), abs=1e-12
        )
    large = state_probabilities(20_000, 1.0, 9.0)
    assert sum(large) == pytest.approx(1.0) and max(large) == pytest.approx(large[2000], rel=1e-2)


def test_capacity_grows_with_cache_and_falls_with_target() -> None:
    capacities = [cache_capacity(x, 0.9, 1.0, 9.0) for x in (8, 16, 64, 512)]
    assert capacities == sorted(capacities) and capacities[-1] > 4000  # 16 KiB supports thousands of keys
    assert cache_capacity(64, 0.99, 1.0, 9.0) < cache_capacity(64, 0.9, 1.0, 9.0)
    for x in (8, 64):
        n = cache_capacity(x, 0.9, 1.0, 9.0)
        assert hit_probability(x, n, 1.0, 9.0) >= 0.9 > hit_probability(x, n + 1, 1.0, 9.0)


def test_simulator_is_seeded_and_bounded() -> None:
    first = simulate(16, 4, 1.0, 3.0, max_packets=5000, seed=7)
    assert first == simulate(16, 4, 1.0, 3.0, max_packets=5000, seed=7)
    assert first.packets == first.stats.lookups == 5000
    assert first != simulate(16, 4, 1.0, 3.0, max_packets=5000, seed=8)


GRID = [(4, 3, 1.0, 1.0), (8, 2, 1.0, 1.0), (16, 4, 1.0, 3.0), (32, 8, 1.0, 4.0), (64, 16, 1.0, 4.0)]


@pytest.mark.parametrize(("n", "x", "lam", "mu"), GRID)
def test_simulated_occupancy_matches_eq3(n: int, x: int, lam: float, mu: float) -> None:
    """Share of time with at most x sources ON vs F_n(x): tolerance 0.02 (about 4 standard deviations)."""
    result = simulate(n, x, lam, mu, packets_per_on=1.0, max_packets=60_000, seed=3)
    assert result.fit_fraction == pytest.approx(float(hit_probability(x, n, lam, mu)), abs=0.02)


@pytest.mark.parametrize(("n", "x", "lam", "mu"), GRID)
def test_simulated_lru_hit_rate_matches_packet_model(n: int, x: int, lam: float, mu: float) -> None:
    """LRU hit rate per packet vs the packet-weighted model: tolerance 0.04 (noise plus compulsory misses),
    and never below the seed's estimate F_n(x)."""
    result = simulate(n, x, lam, mu, packets_per_on=200.0, max_packets=150_000, seed=5)
    assert result.hit_rate == pytest.approx(packet_hit_rate(x, n, lam, mu), abs=0.04)
    assert result.hit_rate >= float(hit_probability(x, n, lam, mu)) - 0.02


def test_prefetch_buffer_raises_hit_rate_under_context_switches() -> None:
    run = partial(simulate, 32, 8, 1.0, 4.0, processes=8, switch_rate=8.0, packets_per_on=20.0,
                  max_packets=30_000, seed=11)
    without, with_prefetch = run(), run(prefetch_entries=16)
    assert without.stats.prefetch_hits == 0 and with_prefetch.stats.prefetch_hits > 1000
    assert with_prefetch.hit_rate > without.hit_rate + 0.03
