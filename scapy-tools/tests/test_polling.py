"""The one poll-until loop: what it returns, how often it checks, and that the last check comes after the
deadline. A fake clock drives it, so nothing here depends on how fast the machine is."""

from __future__ import annotations

import asyncio

import pytest
from ibsec import polling


class FakeClock:
    """The poller's ``time`` module: monotonic() and a sleep that advances it instead of
    waiting."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(polling, "time", fake)
    monkeypatch.setattr(polling, "asyncio", FakeAsyncio(fake))
    return fake


class FakeAsyncio:
    """asyncio.sleep on the fake clock."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock

    async def sleep(self, seconds: float) -> None:
        self.clock.sleep(seconds)


def test_the_first_true_result_is_returned(clock: FakeClock) -> None:
    results = iter([None, [], {"event": "fabric-ready"}, {"event": "later"}])
    assert polling.poll_until(lambda: next(results), timeout=10, interval=1) == {"event": "fabric-ready"}
    assert clock.now == 2  # two sleeps between three checks


def test_none_after_the_deadline_with_a_last_check_past_it(clock: FakeClock) -> None:
    seen: list[float] = []

    def check() -> bool:
        seen.append(clock.now)
        return False

    assert polling.poll_until(check, timeout=3, interval=1) is None
    assert seen == [0, 1, 2, 3]


def test_the_async_poller_polls_the_same_way(clock: FakeClock) -> None:
    results = iter([0, 0, 7])
    assert asyncio.run(polling.poll_until_async(lambda: next(results), timeout=10, interval=0.5)) == 7
    assert clock.now == 1
    assert asyncio.run(polling.poll_until_async(lambda: None, timeout=1, interval=0.5)) is None
