"""The conformance cases (p4switch/tests/conformance/<case>.p4 + .stf) through one real `p4switch`
process: each case is pushed with SetForwardingPipelineConfig, programmed over P4Runtime, and its frames
go in and out of veth interfaces (the in-process driver beside the cases runs the same files through
the engine API). Cases that advance the clock need the in-process driver's injected clock and run there
only; ``check_stat`` lines (engine statistics) are checked there too and skipped here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from p4switch import stf
from p4switch.tests.runtime import harness
from p4switch.tests.runtime.stf_p4runtime import StfRun, ports_used

CASES = harness.HERE.parent / "conformance"


def real_process_cases() -> list[Path]:
    cases = []
    for path in sorted(CASES.glob("*.stf")):
        kinds = {cmd.kind for cmd in stf.load(path)}
        if path.with_suffix(".p4").exists() and "clock" not in kinds:
            cases.append(path)
    return cases


CASE_FILES = real_process_cases()
CPU_PORT = 255
"""the CPU port of the cases' programs (their CPU_PORT): reached through PacketOut / PacketIn here"""
PORTS = sorted(set().union(*(ports_used(stf.load(p)) for p in CASE_FILES)) - {CPU_PORT} | {0, 1})


@pytest.fixture(scope="module")
def conformance_switch(tmp_path_factory: pytest.TempPathFactory
                       ) -> Iterator[tuple[harness.SwitchProcess, dict[int, harness.RawPort]]]:
    """One p4switch (--no-p4) with a veth per port any case uses, and the CPU port."""
    workdir = tmp_path_factory.mktemp("conformance")
    with harness.veth_pairs(len(PORTS), harness.unique_prefix("p4c")) as pairs:
        args = [arg for port, (sw, _) in zip(PORTS, pairs, strict=True) for arg in ("-i", f"{port}@{sw}")]
        hosts = {port: harness.RawPort(host) for port, (_, host) in zip(PORTS, pairs, strict=True)}
        try:
            with harness.switch_process([*args, "--cpu-port", str(CPU_PORT), "--no-p4"],
                                        workdir / "switch.log") as proc:
                yield proc, hosts
        finally:
            for host in hosts.values():
                host.close()


def test_cases_exist() -> None:
    assert CASE_FILES, f"no conformance case for the real-process driver in {CASES}"


@pytest.mark.parametrize("case", CASE_FILES, ids=[p.stem for p in CASE_FILES])
def test_case_over_p4runtime_and_veths(case: Path, conformance_switch: tuple[harness.SwitchProcess, dict],
                                       tmp_path_factory: pytest.TempPathFactory) -> None:
    proc, hosts = conformance_switch
    program = harness.compile_program(case.with_suffix(".p4"), tmp_path_factory.mktemp(case.stem))
    with harness.primary_client(proc.address) as client:
        failures = StfRun(program, client, hosts, CPU_PORT).run(stf.load(case))
    assert not failures, "\n".join(failures)
