"""`p4switch` and its engines: the native engine and data plane by default; the Python engine with
--engine python, with -L trace, for a program the C back end cannot run and on a machine without a C
compiler, each time with the reason on stdout once; frames are forwarded in every case."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from finsy.proto import p4r

from p4switch.tests.native.test_native_engine import PROGRAM
from p4switch.tests.runtime import harness
from p4switch.tests.runtime.harness import RawPort, update
from p4switch.tests.runtime.test_p4runtime_l2 import dmac_entry, frame_to
from p4switch.tests.runtime.test_p4switch_process import HOST_A, HOST_B


@pytest.fixture(scope="module")
def l2fwd(tmp_path_factory: pytest.TempPathFactory) -> harness.Program:
    return harness.compile_program(harness.SHARED_PROGRAMS / "l2fwd.p4", tmp_path_factory.mktemp("l2fwd"))


@pytest.fixture
def veths() -> Iterator[list[tuple[str, str]]]:
    with harness.veth_pairs(2, harness.unique_prefix("p4e")) as pairs:
        yield pairs


def forwards(proc: harness.SwitchProcess, program: harness.Program, veths: list[tuple[str, str]]) -> bool:
    hosts = [RawPort(host) for _, host in veths]
    try:
        with harness.primary_client(proc.address, program) as client:
            client.write(update(p4r.Update.INSERT, table_entry=dmac_entry(program, HOST_B, b"\x02")))
            hosts[0].send(frame_to(HOST_B, b"engine"))
            return hosts[1].receive(match=HOST_B) == frame_to(HOST_B, b"engine")
    finally:
        for host in hosts:
            host.close()


def ports(veths: list[tuple[str, str]]) -> list[str]:
    return [arg for i, (sw, _) in enumerate(veths) for arg in ("-i", f"{i + 1}@{sw}")]


def notes(proc: harness.SwitchProcess) -> list[str]:
    return [line for line in proc.output if "Python engine" in line]


@pytest.mark.parametrize(("extra", "env", "reason"), [
    ([], {}, None),
    (["--engine", "python"], {}, None),
    (["-L", "trace"], {}, "per-packet trace logging"),
    ([], {"CC": "/nonexistent/cc"}, "no C compiler found"),
], ids=["native", "python", "trace", "no-compiler"])
def test_engine_choice_is_said_once_and_frames_are_forwarded(
        tmp_path: Path, l2fwd: harness.Program, veths: list[tuple[str, str]], extra: list[str],
        env: dict[str, str], reason: str | None) -> None:
    env = {**env, "P4SWITCH_CACHE": str(tmp_path / "cache")} if env else env
    args = [*ports(veths), *extra, str(l2fwd.json_path)]
    with harness.switch_process(args, tmp_path / "s", env=env) as proc:
        assert forwards(proc, l2fwd, veths)
        assert proc.stop() == 0
    log = proc.log_file.read_text()
    native = reason is None and "--engine" not in extra
    assert ("native I/O" in log) == native
    if reason is None:
        assert notes(proc) == []
    else:
        (note,) = notes(proc)
        assert reason in note and log.count(note.removeprefix("p4switch: ")) == 1


def test_a_program_the_c_back_end_cannot_run_runs_on_python(tmp_path: Path, veths: list[tuple[str, str]]
                                                            ) -> None:
    source = tmp_path / "wide.p4"
    source.write_text(PROGRAM % {"wide": 160})
    program = harness.compile_program(source, tmp_path / "wide")
    with harness.switch_process([*ports(veths), str(program.json_path)], tmp_path / "s") as proc:
        (note,) = notes(proc)
        assert "wider than 128 bits" in note
        hosts = [RawPort(host) for _, host in veths]
        try:
            frame = bytes(6) + HOST_A + b"\x08\x00" + bytes(20 + 8)
            hosts[0].send(frame)  # the program sends everything to port 2
            received = hosts[1].receive(match=bytes(6))
            assert received is not None and received[:12] == frame[:12]
        finally:
            for host in hosts:
                host.close()



BUILT_BEFORE_FORK = """
import sys
import p4switch.cli
from p4switch.native.io import IoLibrary
p4switch.cli.before_fork()
native = sys.modules.get("p4switch.engine.native")
print(native is not None and native._ffi is not None, IoLibrary._instance is not None)
"""


@pytest.mark.parametrize(("engine", "built"), [("native", "True True"), ("python", "False False")])
def test_before_fork_builds_the_native_declarations_only_for_the_native_engine(engine: str,
                                                                               built: str) -> None:
    """A zygote's switches share what its before_fork made (topologies.zygote); with the Python engine
    asked for, nothing."""
    done = subprocess.run([sys.executable, "-c", BUILT_BEFORE_FORK], capture_output=True, text=True,
                          check=True, env={**os.environ, "P4SWITCH_ENGINE": engine})
    assert done.stdout.split() == built.split()


INSTALLED_GARBAGE = """
import gc, logging, sys
from p4switch.runtime.device import Device
program = open(sys.argv[1], "rb").read()
device = Device(1, None, logging.getLogger("t"), "native", release_memory=sys.argv[2] == "release")
gc.collect()
gc.disable()
switch = device.load(program)
device.install(switch, program)
print(type(switch).__name__, gc.collect())
"""


def test_installing_a_program_collects_what_its_load_left_behind(l2fwd: harness.Program) -> None:
    """Loading a native program (the Python engine's checks first) leaves objects in cycles; install
    collects them before handing the freed heap back (runtime.device.release_free_memory), so a
    collection right after finds only what the install's logging made (138 for l2fwd without it)."""
    def garbage(mode: str) -> int:
        done = subprocess.run([sys.executable, "-c", INSTALLED_GARBAGE, str(l2fwd.json_path), mode],
                              capture_output=True, text=True, check=True)
        engine, count = done.stdout.split()
        assert engine == "NativeSwitch"
        return int(count)
    assert garbage("release") < 50 < garbage("keep")  # p4switch's own processes release; others need not
