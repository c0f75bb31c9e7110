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
from p4switch.tests.bmv2json.test_bmv2json_p4c import NO_P4C, find_p4c

sys.path.insert(0, str(Path(__file__).parent / "lib"))

from dataplane_harness import ROOT, VENV_BIN, running_switch, unavailable  # noqa: E402

PORTS = list(range(1, 9))
PTF_TIMEOUT = 540  # bounds a hung run (below pytest's 600 s per test), not a slow one
VERIFY_TIMEOUT = 30  # seconds a positive verify waits for its frame: it comes in milliseconds, on any load
BMV2_JSON_TESTS = "parsing partition port_marking packetio"
"""The PTF groups run from p4c's BMv2 JSON (PTF_TESTS overrides): the parser, the P_Key filters, the
marking and the CPU port; the whole suite runs on p4switch-cc's output."""


def test_ptf_suite(tmp_path: Path) -> None:
    """Every PTF test in ptf-tests/tests passes against the target."""
    run_suite(targets.from_env(), tmp_path)


def test_ptf_suite_on_p4switch_from_p4c_bmv2_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PTF groups on p4switch running the BMv2 JSON the real p4c-bm2-ss writes for p4src/main.p4
    (skipped, with the reason, where p4c-bm2-ss is neither on PATH nor runnable in ../shared/p4lang/bin)."""
    if os.environ.get("TARGET", "p4switch") != "p4switch":
        pytest.skip("runs once, beside the default target")
    p4c = find_p4c()
    if p4c is None:
        print(f"SKIP: {NO_P4C}")
        pytest.skip(NO_P4C)
    monkeypatch.setenv("PATH", f"{Path(p4c).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    run_suite(targets.Target("p4switch-bmv2json", "p4c-bm2-ss", "p4switch"), tmp_path, BMV2_JSON_TESTS)


def run_suite(target: targets.Target, tmp_path: Path, tests: str = "") -> None:
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
                   "--default-negative-timeout", "0.3", *os.environ.get("PTF_TESTS", tests).split()]
        result = subprocess.run(command, capture_output=True, text=True, timeout=PTF_TIMEOUT, cwd=tmp_path)
        print(result.stdout[-6000:], result.stderr[-6000:])
        if result.returncode != 0:
            log = switch.log.read_text()[-4000:] if switch.log.exists() else "(none)"
            print(f"switch log ({switch.log}):\n{log}")
        assert result.returncode == 0, "PTF tests failed (output above)"
