"""The hostile-input suite as CI runs it: ``python -m ibsec.fuzz agent`` with a short run (``make fuzz`` runs
100,000 frames; docs/security.md has the figures), against live agents in namespaces."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

from ibsec.fuzz import COMPONENTS
from ibsec.fuzz.__main__ import main

FRAMES = 20_000


def test_a_short_fuzz_run_holds_every_check(tmp_path: Path) -> None:
    report = tmp_path / "fuzz.json"
    argv = ["agent", "--frames", str(FRAMES), "--control", "100", "--seed", "14", "--run-dir",
            str(tmp_path / "run"), "--report", str(report)]
    command = [sys.executable, "-m", "ibsec.fuzz", *argv]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads(report.read_text())
    assert summary["ok"] and summary["frames"] == FRAMES and summary["tracebacks"] == 0
    assert [c["name"] for c in summary["checks"] if not c["ok"]] == []
    counters = summary["counters"]
    assert counters["stats"].get("internal_errors", 0) == 0
    assert sum(counters["drops"].values()) > FRAMES // 2  # hostile frames are refused, each for a reason
    assert set(summary["by_operator"]) == {"bth", "ext", "sth", "lengths", "cut", "extend", "bitflip", "mad",
                                          "cm", "vendor", "trailer", "splice", "random"}
    assert summary["restart"]["replayed"] > 0 and summary["restart"]["delivered"] == 0
    assert summary["control_requests"] == 100


def test_the_entry_point_names_its_components() -> None:
    assert main([]) == 2 and main(["nothing"]) == 2
    assert set(COMPONENTS) == {"agent", "sm"}  # make fuzz's default FUZZ_TARGETS
    for module in COMPONENTS.values():
        assert callable(importlib.import_module(module).main)
