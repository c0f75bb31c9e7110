"""Small pieces of the agent and the tools: rate limiting, failure streaks, percentiles, P_Key matching,
memory tree nodes, the CLI's requests, and every attack tool's --help and bounds."""

from __future__ import annotations

import importlib

import pytest
from ibsec.agent import ctl, perf
from ibsec.agent.memory import MemoryTable, RegionError
from ibsec.agent.qp import pkey_matches
from ibsec.agent.traps import FailureStreak, RateLimiter
from ibsec.attacks import common

TOOLS = ("pkey_flood", "spoof", "eavesdrop", "forge", "replay", "tag_brute", "forge_trap", "trap_flood",
         "forge_dreq")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_rate_limiter_allows_one_per_window_per_key_and_a_bounded_total() -> None:
    clock = Clock()
    limiter = RateLimiter(window=10.0, burst=3, clock=clock)
    assert limiter.allow(("257", "a", 1)) and not limiter.allow(("257", "a", 1))
    assert limiter.allow(("257", "a", 2)) and limiter.allow(("258", "a", 1))
    assert not limiter.allow(("257", "b", 1))  # a fourth key within the same second: over the budget
    clock.now += 1.0
    assert limiter.allow(("257", "b", 1)) and not limiter.allow(("257", "a", 1))
    clock.now += 9.5
    assert limiter.allow(("257", "a", 1))  # its window passed


def test_rate_limiter_memory_is_bounded() -> None:
    clock = Clock()
    limiter = RateLimiter(window=10.0, burst=10**6, max_keys=100, clock=clock)
    for key in range(1000):
        assert limiter.allow(key)
    assert len(limiter._last) <= 100


def test_failure_streak_traps_every_threshold_and_retires_once() -> None:
    streak = FailureStreak(threshold=3, retire_after=7)
    results = [streak.failure(5) for _ in range(7)]
    assert [trap for _, trap, _ in results] == [False, False, True, False, False, True, False]
    assert [retire for _, _, retire in results] == [False] * 6 + [True]
    streak.success(5)
    assert streak.streak(5) == 0 and streak.failure(5)[0] == 1


def test_percentiles_and_summary() -> None:
    values = [float(v) for v in range(1, 101)]
    assert perf.percentile(values, 0.5) == 50.0 and perf.percentile(values, 0.99) == 99.0
    summary = perf.latency_summary(list(reversed(values)))
    assert (summary["min_us"], summary["median_us"], summary["max_us"]) == (1.0, 50.0, 100.0)
    with pytest.raises(ValueError):
        perf.send_lat(None, 1, 64, 0, 1.0, print)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("table", "packet", "match"),
    [
        (0xFFFF, 0xFFFF, True),
        (0x8001, 0x0001, True),
        (0x0001, 0x8001, True),
        (0x0001, 0x0001, False),
        (0x8001, 0x8002, False),
        (0x8000, 0x8000, False),
    ],
)
def test_pkey_matching_follows_iba_membership(table: int, packet: int, match: bool) -> None:
    assert pkey_matches(table, packet) is match


def test_memory_regions_bounds_and_tree_nodes() -> None:
    table = MemoryTable()
    region = table.register(4096, 1, ext_depth=2)
    assert region.contains(region.addr, 4096) and not region.contains(region.addr + 1, 4096)
    nodes = list(region.candidate_nodes(region.addr + 1100, 10))
    assert nodes == [(region.addr, 4096), (region.addr, 2048), (region.addr + 1024, 1024)]
    assert list(region.candidate_nodes(region.addr + 1020, 10)) == [(region.addr, 4096), (region.addr, 2048)]
    with pytest.raises(RegionError):
        table.register(1000, 1, ext_depth=1)  # the tree needs a power of two
    with pytest.raises(RegionError):
        table.delegate(table.register(64, 1).r_key, 0, 64)  # no extended protection on this one
    described = table.describe()
    assert {k for entry in described for k in entry} == {"addr", "length", "rkey", "pd", "access", "ext_mem",
                                                         "ext_depth"}
    assert region.key is not None and region.key.material.hex() not in str(described) + repr(region)


def test_agentctl_turns_arguments_into_requests() -> None:
    parser = ctl.build_parser()
    cmd, args = ctl.request_of(
        parser.parse_args(
            ["-s", "x", "connect", "fec0::1", "--mode", "2", "--scope", "session", "--pkey", "0x8001"]
        )
    )
    assert cmd == "connect" and args == {
        "remote_gid": "fec0::1",
        "service": "RC",
        "mode": 2,
        "scope": "session",
        "pkey": 0x8001,
    }
    cmd, args = ctl.request_of(parser.parse_args(["-s", "x", "recv", "0x100", "--wait", "2"]))
    assert (cmd, args) == ("recv", {"qpn": 0x100, "timeout": 2.0})
    assert ctl.main(["-s", "/nonexistent/agent.sock", "ping"]) == 2


@pytest.mark.parametrize("tool", TOOLS)
def test_every_attack_tool_has_help_with_its_bounds(tool: str, capsys: pytest.CaptureFixture[str]) -> None:
    module = importlib.import_module(f"ibsec.attacks.{tool}")
    with pytest.raises(SystemExit) as exit_:
        module.main(["--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert "--count" in text and "--duration" in text and "--rate" in text


@pytest.mark.parametrize(
    "bounds",
    [
        ["--count", "0"],
        ["--count", "20000000"],
        ["--duration", "0"],
        ["--duration", "4000"],
        ["--rate", "-1"],
    ],
)
def test_attack_tools_refuse_unbounded_runs(bounds: list[str]) -> None:
    parser = common.parser("test")
    with pytest.raises(SystemExit):
        common.checked(parser.parse_args(["--iface", "lo", *bounds]))


def test_delegation_stops_at_the_region_depth_limit() -> None:
    table = MemoryTable()
    region = table.register(4096, 1, ext_depth=1)
    assert table.delegate(region.r_key, region.addr + 2048, 2048).material  # depth 1: allowed
    with pytest.raises(RegionError):
        table.delegate(region.r_key, region.addr + 1024, 1024)  # depth 2: beyond the limit
    assert list(region.candidate_nodes(region.addr + 1024, 8)) == [(region.addr, 4096), (region.addr, 2048)]
