"""Stopping a p4switch process on a signal: SIGTERM and SIGINT set an event its main thread waits on.

The switch and the bench's bare forwarder both stop this way, so that what they run ends through their
own ``finally`` (ports closed, threads joined, pcaps flushed) instead of in the middle of a frame."""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType


def stop_on_signals(log: logging.Logger) -> threading.Event:
    """An event SIGTERM and SIGINT set: installed before anything starts, so that a signal arriving while
    the switch starts (right after its "listening" line, say) still stops it cleanly."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("%s received: stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return stop
