"""The command line both targets get (p4switch.targets): options read from the switch binary's --help, a
Thrift port of its own for every switch whose build has Thrift, and two switches side by side."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from p4switch import targets
from p4switch.targets import Target

BMV2_HELP = """Usage: SWITCH_NAME [options] <path to JSON config file>
Options:
  -i [ --interface ] arg      <port-num>@<interface-name>: Attach network interface
  --thrift-port arg           TCP port on which to run the Thrift runtime server
  --device-id arg             Device ID, used to identify the device in IPC messages (default 0)
  --no-p4                     Enable the switch to start without an inout configuration
Target options:
  --grpc-server-addr arg      Bind gRPC server to given address [default is 0.0.0.0:9559]"""


def fake_switch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, help_text: str) -> Target:
    """A target whose switch binary (first on PATH) only prints ``help_text``."""
    script = tmp_path / f"fake_switch_{os.getpid()}"
    script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{help_text}\nEOF\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    return Target("fake", "true", script.name)


def split(argv: list[str]) -> tuple[list[str], list[str]]:
    """(general options, target options after "--") of a switch command line, binary left out."""
    at = argv.index("--")
    return argv[1:at], argv[at + 1:]


def option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_a_build_with_thrift_gets_a_free_thrift_port_and_the_bmv2_command_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = fake_switch(tmp_path, monkeypatch, BMV2_HELP)
    argv = target.switch_argv(device_id=3, ports={2: "vb", 1: "va"}, grpc_port=50001, cpu_port=255,
                              log=tmp_path / "s.log")
    general, target_options = split(argv)
    thrift = int(option(general, "--thrift-port"))
    assert general == ["--device-id", "3", "-i", "1@va", "-i", "2@vb", "--log-file", str(tmp_path / "s.log"),
                       "--log-level", "info", "--thrift-port", str(thrift), "--no-p4"]
    assert target_options == ["--grpc-server-addr", "127.0.0.1:50001", "--cpu-port", "255"]
    with socket.socket() as sock:
        sock.bind(("0.0.0.0", thrift))  # nothing listens there: the switch can have it


def test_a_build_without_thrift_gets_no_thrift_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                      ) -> None:
    help_text = "\n".join(line for line in BMV2_HELP.splitlines() if "thrift" not in line)
    target = fake_switch(tmp_path, monkeypatch, help_text)
    argv = target.switch_argv(device_id=1, ports={}, grpc_port=50001, cpu_port=None, pcap_dir=tmp_path,
                              log_level="warn",
                              program=tmp_path / "main.json", target_args=["--grpc-server-ssl"])
    general, target_options = split(argv)
    assert general == ["--device-id", "1", "--log-console", "--log-level", "warn", "--pcap", str(tmp_path),
                       str(tmp_path / "main.json")]  # no log file: the log on stdout
    assert target_options == ["--grpc-server-addr", "127.0.0.1:50001", "--grpc-server-ssl"]  # no CPU port


def test_no_port_is_handed_out_twice() -> None:
    """The kernel's pick for port 0 repeats once the port is released; the launcher picks a port per switch
    (and per Thrift server) before any of them binds."""
    ports = [targets.free_port() for _ in range(3000)]
    assert len(set(ports)) == len(ports)


@contextmanager
def two_switches(target: Target, workdir: Path) -> Iterator[list[list[str]]]:
    """Two switches of ``target`` started side by side with its command line; their argv once both
    answer on P4Runtime."""
    argvs = []
    with ExitStack() as stack:
        for n in (1, 2):
            grpc_port = targets.free_port()
            argv = target.switch_argv(device_id=n, ports={}, grpc_port=grpc_port, cpu_port=None,
                                      log=workdir / f"s{n}.log")
            stack.enter_context(targets.running(argv, grpc_port, workdir / f"s{n}.out"))
            argvs.append(argv)
        yield argvs


def test_p4switch_takes_the_command_line_of_bmv2_twice_side_by_side(tmp_path: Path) -> None:
    p4switch = targets.TARGETS["p4switch"]
    assert "--thrift-port" in p4switch.switch_options()  # so it gets one, as BMv2 does
    with two_switches(p4switch, tmp_path) as argvs:
        assert all(option(argv, "--thrift-port") for argv in argvs)
    for n, argv in enumerate(argvs, start=1):  # accepted, with its note
        note = f"--thrift-port {option(argv, '--thrift-port')} ignored: p4switch has no Thrift server"
        assert note in (tmp_path / f"s{n}.out").read_text()


def test_two_bmv2_switches_run_side_by_side_each_with_its_own_thrift_server(tmp_path: Path) -> None:
    """A standard BMv2 build opens Thrift on 9090 unless told otherwise: the second switch used to exit."""
    bmv2 = targets.TARGETS["bmv2"]
    if bmv2.tool(bmv2.switch) is None:
        print("SKIP: simple_switch_grpc is not on PATH")
        pytest.skip("simple_switch_grpc is not on PATH")
    with two_switches(bmv2, tmp_path) as argvs:
        for argv in argvs:  # each switch's own Thrift server answers on the port it was given
            with socket.create_connection(("127.0.0.1", int(option(argv, "--thrift-port"))), timeout=5):
                pass
