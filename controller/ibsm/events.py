"""The run's events file (DESIGN 7, 10): one JSON object per line, with a monotonic and a wall clock.

Every trap, traceback, filter installed or flushed, policy change, key delivery and switch lost or back
is one line, written and flushed as it happens, so ``sm traceback`` and ``sm status`` can read a run
that is still going, and a crash loses nothing already reported. No line ever carries key material:
keys appear by scope and owner only.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO


class EventLog:
    """Appends events to ``path`` (created with its directory)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file: TextIO = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {}

    def emit(self, event: str, **fields: Any) -> dict[str, Any]:
        """Write one event line; returns the record as written."""
        record = {"wall": round(time.time(), 6), "mono": round(time.monotonic(), 6), "event": event, **fields}
        line = json.dumps(record, sort_keys=False, default=str)
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()
            self.counts[event] = self.counts.get(event, 0) + 1
        return record

    def close(self) -> None:
        with self._lock:
            self._file.close()


def read_events(path: Path) -> Iterator[dict[str, Any]]:
    """The events of a file, skipping a torn last line (the SM may be writing it right now)."""
    with open(path, encoding="utf-8") as file:
        for line in file:
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue
