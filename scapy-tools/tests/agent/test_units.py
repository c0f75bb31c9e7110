"""Small pieces of the agent and the tools: rate limiting, failure streaks, percentiles, P_Key matching,
memory tree nodes, the CLI's requests, and every attack tool's --help and bounds; the pacing and duration
bounds of the flood loop and of write_bw with a clock of their own."""

from __future__ import annotations

import argparse
import importlib

import pytest
from ibsec.agent import ctl, perf
from ibsec.agent.memory import MemoryTable, RegionError
from ibsec.agent.qp import pkey_matches
from ibsec.agent.traps import FailureStreak, RateLimiter
from ibsec.attacks import common

TOOLS = ("pkey_flood", "spoof", "eavesdrop", "forge", "replay", "tag_brute", "forge_trap", "trap_flood",
         "forge_dreq", "qp_error", "rkey_guess", "req_flood")


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


class FakeTime:
    """A module's view of ``time`` in which time passes only when the code sleeps or a fake costs some:
    bounds on rates and durations checked exactly, whatever else the machine is doing."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    perf_counter = monotonic

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class FakeSocket:
    """Records when each frame went out; each send costs ``cost`` seconds (a CPU that allows 1/cost)."""

    def __init__(self, clock: FakeTime, cost: float) -> None:
        self.clock, self.cost = clock, cost
        self.sent_at: list[float] = []

    def send(self, frame: bytes) -> None:
        self.sent_at.append(self.clock.now)
        self.clock.now += self.cost


@pytest.mark.parametrize(("cost", "sent"), [(0.0, 200), (0.01, 50)])  # a free send; a starved tool
def test_a_flood_never_runs_ahead_of_its_rate_and_stops_when_its_duration_is_up(
    monkeypatch: pytest.MonkeyPatch, cost: float, sent: int
) -> None:
    clock = FakeTime()
    monkeypatch.setattr(common, "time", clock)
    sock = FakeSocket(clock, cost)
    args = argparse.Namespace(count=1_000_000, rate=400.0, duration=0.5)
    summary = common.blast(sock, lambda i: bytes([i % 256]), args)  # type: ignore[arg-type]
    assert summary["sent"] == len(sock.sent_at) == sent
    assert all(at >= i / 400 - 1e-9 for i, at in enumerate(sock.sent_at))  # frame i not before i / rate
    assert summary["seconds"] == pytest.approx(0.5)  # the first check past its duration ends it


def test_a_flood_stops_at_its_count(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeTime()
    monkeypatch.setattr(common, "time", clock)
    sock = FakeSocket(clock, 0.001)
    summary = common.blast(sock, bytes, argparse.Namespace(count=7, rate=0.0, duration=10.0))  # type: ignore[arg-type]
    assert summary["sent"] == len(sock.sent_at) == 7 and summary["seconds"] == pytest.approx(0.007)


class FakeWrites:
    """One QP for write_bw: each post costs ``cost`` seconds; acknowledged at once, or never."""

    def __init__(self, clock: FakeTime, cost: float, acks: bool) -> None:
        self.clock, self.cost, self.acks = clock, cost, acks
        self.posted = self.acked = 0

    def post_write(self, qpn: int, va: int, r_key: int, data: bytes, memory_key: bytes | None = None) -> None:
        self.clock.now += self.cost
        self.posted += 1
        self.acked = self.posted if self.acks else 0

    def outstanding(self, qpn: int) -> int:
        return self.posted - self.acked

    def wait_outstanding(self, qpn: int, at_most: int, timeout: float) -> bool:
        if self.outstanding(qpn) <= at_most:
            return True
        self.clock.now += timeout
        return False


def test_write_bw_runs_for_its_duration_and_reports_progress_every_second(monkeypatch: pytest.MonkeyPatch
                                                                          ) -> None:
    clock = FakeTime()
    monkeypatch.setattr(perf, "time", clock)
    progress: list[dict[str, object]] = []
    result = perf.write_bw(FakeWrites(clock, 0.125, acks=True), 1, 0, 0, 1024, 1_000_000, 3.0,  # type: ignore[arg-type]
                           progress.append)
    assert result["iterations"] == 24 and result["seconds"] == pytest.approx(3.0)
    assert result["mbit_s"] == pytest.approx(24 * 1024 * 8 / 3.0 / 1e6)
    assert [p["done"] for p in progress] == [8, 16, 24]  # once a second, with the count so far


def test_write_bw_without_acknowledgements_gives_up_within_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeTime()
    monkeypatch.setattr(perf, "time", clock)
    result = perf.write_bw(FakeWrites(clock, 0.0, acks=False), 1, 0, 0, 1024, 1_000_000, 3.0,  # type: ignore[arg-type]
                           lambda _: None, window=4)
    assert result["iterations"] == 0  # nothing acknowledged is nothing counted
    assert result["seconds"] == pytest.approx(2 * perf.ACK_WAIT)  # a full window's wait, then the drain's
