"""Waiting for an effect: poll a check until it gives something or a deadline passes.

Frames cross software switches and agents on a machine that may be loaded, so nothing in the project waits a
fixed time for an effect: it polls the effect itself (an event, a counter, a table entry) with a deadline
far beyond what the effect takes. This is that loop, once; the caller says what a timeout means (an
assertion in a test, an error naming what was awaited in a product).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Generator
from typing import TypeVar

T = TypeVar("T")


def _polls(check: Callable[[], T | None], timeout: float) -> Generator[None, None, T | None]:
    """Checks until one gives something true (returned) or ``timeout`` passed (None), yielding between
    two checks so the caller sleeps its own way; the last check comes after the deadline, so an effect
    that lands while the caller sleeps still counts."""
    deadline = time.monotonic() + timeout
    while not (result := check()):
        if time.monotonic() >= deadline:
            return None
        yield
    return result


def poll_until(check: Callable[[], T | None], timeout: float, interval: float = 0.05) -> T | None:
    """The first result of ``check()`` that is true, polled every ``interval`` seconds; None once
    ``timeout`` seconds passed without one."""
    polls = _polls(check, timeout)
    try:
        while True:
            next(polls)
            time.sleep(interval)
    except StopIteration as done:
        return done.value


async def poll_until_async(check: Callable[[], T | None], timeout: float, interval: float = 0.05
                           ) -> T | None:
    """:func:`poll_until` for a check that runs on an event loop (it sleeps without blocking the loop)."""
    polls = _polls(check, timeout)
    try:
        while True:
            next(polls)
            await asyncio.sleep(interval)
    except StopIteration as done:
        return done.value
