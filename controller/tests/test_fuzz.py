"""The SM's part of the hostile-input suite as CI runs it: ``python -m ibsec.fuzz.sm`` with a short run (the
long run, 100,000 frames, is in docs/security.md), against ``sm run`` and software switches over gRPC."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FRAMES = 1500


def test_a_short_fuzz_run_holds_every_check_and_reaches_every_outcome(tmp_path: Path) -> None:
    report = tmp_path / "fuzz.json"
    done = subprocess.run([sys.executable, "-m", "ibsec.fuzz.sm", "--frames", str(FRAMES), "--seed", "14",
                           "--run-dir", str(tmp_path / "run"), "--report", str(report)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads(report.read_text())
    assert summary["failures"] == [] and summary["frames"] == FRAMES
    dropped = sum(summary["switch_drops"].values())
    assert summary["frames"] == summary["punted"] + summary["delivered"] + dropped
    sm = summary["sm"]
    assert sm["packet_ins"] == summary["punted"] == sum(sm["traps"].values()) + sum(sm["mads"].values())
    # the mutations reach every outcome, the accepted ones included (so the handlers behind them ran)
    assert {"accepted", "forged", "replay", "stale", "malformed"} <= set(sm["traps"])
    assert {"ignored-not-rocev2", "key-ack-unexpected"} <= set(sm["mads"])
    assert "internal-error" not in sm["mads"] and summary["tracebacks"] == summary["error_lines"] == 0
    assert summary["control"]["answered ok"] > 0 and summary["control"]["answered with an error"] > 0
    assert set(summary["control"]) == {"answered ok", "answered with an error"}
    assert summary["switch_errors"] == 0
