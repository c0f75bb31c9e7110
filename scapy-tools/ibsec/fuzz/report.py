"""What a fuzz run found, for every component alike: frames sent, what the target made of them, and the
checks that decide the exit status (0 only if every one held)."""

from __future__ import annotations

import json
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TRACEBACK = re.compile(r"^Traceback \(most recent call last\)", re.MULTILINE)
ERROR_LINE = re.compile(r"^\S+ \S+ \S+ ERROR ", re.MULTILINE)


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class Summary:
    """One run: filled in as it goes, printed at the end."""

    component: str
    seed: int
    started: float = field(default_factory=time.monotonic)
    frames: int = 0
    by_operator: Counter[str] = field(default_factory=Counter)
    unsent: int = 0
    counters: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        """Record one check; returns ``ok``."""
        self.checks.append(Check(name, bool(ok), detail))
        return bool(ok)

    def scan_logs(self, paths: list[Path]) -> None:
        """Tracebacks and ERROR lines in the logs: a hostile input must not produce either."""
        tracebacks = errors = 0
        for path in paths:
            text = path.read_text(errors="replace") if path.exists() else ""
            tracebacks += len(TRACEBACK.findall(text))
            errors += len(ERROR_LINE.findall(text))
        self.extra["tracebacks"], self.extra["error_lines"] = tracebacks, errors
        self.check("no traceback in the logs", tracebacks == 0, f"{tracebacks} in {len(paths)} logs")
        self.check("no ERROR line in the logs", errors == 0, f"{errors}")

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def as_dict(self) -> dict[str, Any]:
        return {
            "component": self.component, "seed": self.seed, "ok": self.ok,
            "seconds": round(time.monotonic() - self.started, 1), "frames": self.frames,
            "unsent": self.unsent, "by_operator": dict(sorted(self.by_operator.items())),
            "counters": self.counters, **self.extra,
            "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in self.checks],
        }

    def print(self, report: Path | None = None) -> int:
        """Print the summary (text, then one JSON line), write it to ``report`` if given; the exit status."""
        data = self.as_dict()
        lines = [f"== fuzz {self.component}: {self.frames} frames in {data['seconds']} s (seed {self.seed})"]
        drops = {k: v for k, v in self.counters.get("drops", {}).items() if v}
        taken = {k: v for k, v in self.counters.get("taken", {}).items() if v}
        lines.append("   drops by reason: " + ", ".join(f"{k} {v}" for k, v in sorted(drops.items())))
        lines.append("   taken: " + ", ".join(f"{k} {v}" for k, v in sorted(taken.items())))
        lines.append("   mutations: " + ", ".join(f"{k} {v}" for k, v in sorted(self.by_operator.items())))
        lines += [f"   [{'ok' if c.ok else 'FAILED'}] {c.name}: {c.detail}" for c in self.checks]
        print("\n".join(lines))
        print(json.dumps(data), flush=True)
        if report is not None:
            report.write_text(json.dumps(data, indent=1) + "\n")
        return 0 if self.ok else 1


def progress(message: str) -> None:
    """A progress line on stderr (long runs)."""
    print(message, file=sys.stderr, flush=True)
