"""pytest entry point of the PTF data-plane suite: one switch process, the `ptf` runner against it.

TARGET=p4switch (default) or TARGET=bmv2 picks the compiler and switch; PTF_TESTS selects PTF tests
(ptf test specs, e.g. "partition routing.EcmpSpreadsFlows"). Skipped, with the reason printed, only
where the target's tools or root are missing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from p4switch import targets

sys.path.insert(0, str(Path(__file__).parent / "lib"))

from dataplane_harness import ROOT, VENV_BIN, running_switch, unavailable  # noqa: E402

PORTS = list(range(1, 9))
PTF_TIMEOUT = 540  # bounds a hung run (below pytest's 600 s per test), not a slow one
VERIFY_TIMEOUT = 30  # seconds a positive verify waits for its frame: it comes in milliseconds, on any load


def test_ptf_suite(tmp_path: Path) -> None:
    """Every PTF test in ptf-tests/tests passes against the target."""
    target = targets.from_env()
    if reason := unavailable(target):
        print(f"SKIP: {reason}")
        pytest.skip(reason)
    with running_switch(target, PORTS, tmp_path) as switch:
        params = (f"grpc_addr='{switch.grpc_addr}';device_id=1;p4info='{switch.p4info}';"
                  f"device_config='{switch.device_config}'")
        interfaces = [arg for p, iface in sorted(switch.tester_ifaces.items())
                      for arg in ("-i", f"{p}@{iface}")]
        command = [str(VENV_BIN / "ptf"), "--test-dir", str(ROOT / "ptf-tests" / "tests"),
                   "--pypath", str(ROOT / "ptf-tests" / "lib"), *interfaces, "--test-params", params,
                   "--log-file", str(tmp_path / "ptf.log"), "--default-timeout", str(VERIFY_TIMEOUT),
                   "--default-negative-timeout", "0.3", *os.environ.get("PTF_TESTS", "").split()]
        result = subprocess.run(command, capture_output=True, text=True, timeout=PTF_TIMEOUT, cwd=tmp_path)
        print(result.stdout[-6000:], result.stderr[-6000:])
        if result.returncode != 0:
            log = switch.log.read_text()[-4000:] if switch.log.exists() else "(none)"
            print(f"switch log ({switch.log}):\n{log}")
        assert result.returncode == 0, "PTF tests failed (output above)"
