"""The control socket under hostile requests: every one answered with an error that names the field and
its range, the connection and the agent go on, and nothing reaches the log as a traceback."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from ibsec import jsonrequest
from ibsec.agent.commands import Commands
from ibsec.control import MAX_REQUEST, ControlServer

from .loopback import Loopback


@pytest.fixture(scope="module")
def control(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp_path = tmp_path_factory.mktemp("control")
    link = Loopback(tmp_path)
    server = ControlServer(tmp_path / "h0.sock", Commands(link.adapters[0]))
    server.start()
    yield server.path
    server.stop()
    link.close()


class Raw:
    """A client that sends bytes as they are and reads one answer line."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(str(path))
        self.file = self.sock.makefile("rb")

    def ask(self, line: bytes) -> dict[str, object]:
        self.sock.sendall(line + b"\n")
        answer: dict[str, object] = json.loads(self.file.readline())
        return answer

    def close(self) -> None:
        self.file.close()
        self.sock.close()


UNFIT = ["Infinity", "-Infinity", "NaN", "1e999", "-1e400", "1" + "0" * 400, "-" + "9" * 5000, "true", '"x"',
         "[]", "{}", '"1e9"']
FIELDS = {  # command, field: what the error names as allowed, values out of that range, what else it needs
    ("recv", "qpn"): ("0x0..0xffffff", ["-1", "16777216", "0.5", '"0x1000000"'], ""),
    ("recv", "timeout"): ("[0, 60]", ["-1", "60.5", "1e308", '"5"'], ', "qpn": 256'),
    ("reg_mr", "length"): ("0x1..0x40000000", ["0", "1073741825", "1e3"], ""),
    ("connect", "pkey"): ("0..65535", ["-1", "65536", '"0x10000"'], ', "remote_gid": "fec0::1"'),
    ("perf", "duration"): ("[0.001, 3600]", ["0", "3601", "-0.0"], ', "qpn": 256'),
}
CASES = [(cmd, field, allowed, value, rest) for (cmd, field), (allowed, values, rest) in FIELDS.items()
         for value in UNFIT + values]


@pytest.mark.parametrize(("cmd", "field", "allowed", "value", "rest"), CASES)
def test_an_unfit_value_is_refused_naming_the_field_and_its_range(
    control: Path, caplog: pytest.LogCaptureFixture, cmd: str, field: str, allowed: str, value: str, rest: str
) -> None:
    client = Raw(control)
    try:
        answer = client.ask(f'{{"cmd": "{cmd}", "{field}": {value}{rest}}}'.encode())
        assert answer["ok"] is False, answer
        error = str(answer["error"])
        assert error.startswith(f"{cmd}: field {field!r} must be ") and allowed in error, error
        assert client.ask(b'{"cmd": "ping"}')["ok"] is True  # the same connection goes on
    finally:
        client.close()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


@pytest.mark.parametrize("line", [
    b"[" * 100_000,
    b"{\"cmd\": \"ping\", \"x\": " + b"[" * 50_000 + b"]" * 50_000 + b"}",
    b"{\"a\":" * 20_000 + b"1" + b"}" * 20_000,
    b"[" * 17 + b"]" * 17,
])
def test_deep_nesting_is_refused_before_the_parser_recurses(control: Path, line: bytes) -> None:
    client = Raw(control)
    try:
        answer = client.ask(line)
        assert answer == {"ok": False, "error": f"request nests deeper than {jsonrequest.MAX_DEPTH} levels"}
        assert client.ask(b'{"cmd": "ping"}')["ok"] is True
    finally:
        client.close()


@pytest.mark.parametrize(("line", "error"), [
    (b"\xff\xfe{}", "request is not UTF-8"),
    (b"{\"cmd\": ", "request is not JSON"),
    (b"null", 'a request is a JSON object with a "cmd" string'),
    (b"[1, 2]", 'a request is a JSON object with a "cmd" string'),
    (b"42", 'a request is a JSON object with a "cmd" string'),
    (b"\"ping\"", 'a request is a JSON object with a "cmd" string'),
    (b"{\"cmd\": 7}", 'a request is a JSON object with a "cmd" string'),
    (b"{\"cmd\": \"ping\", \"extra\": 1}", "ping: unknown field 'extra'"),
    (b"{\"cmd\": \"recv\"}", "recv: field 'qpn' is required"),
    (b"{\"cmd\": \"nope\"}", "unknown command 'nope'"),
    (b"{\"cmd\": \"send\", \"qpn\": 256, \"data_hex\": \"zz\"}", "field 'data_hex' must be hex digits"),
    (b"{\"cmd\": \"connect\", \"remote_gid\": \"not a gid\"}", "field 'remote_gid' must be a GID"),
    (b"{\"cmd\": \"serve\", \"qpn\": 256, \"echo\": \"yes\"}", "field 'echo' must be true or false"),
])
def test_malformed_requests_get_a_clear_answer(control: Path, line: bytes, error: str) -> None:
    client = Raw(control)
    try:
        answer = client.ask(line)
        assert answer["ok"] is False and error in str(answer["error"]), answer
        assert client.ask(b'{"cmd": "ping"}')["ok"] is True
    finally:
        client.close()


def test_an_oversized_request_is_refused_and_the_connection_goes_on(control: Path) -> None:
    client = Raw(control)
    try:
        huge = b'{"cmd": "ping", "pad": "' + b"x" * (MAX_REQUEST + 10) + b'"}'
        assert client.ask(huge) == {"ok": False, "error": f"request longer than {MAX_REQUEST} bytes"}
        assert client.ask(b'{"cmd": "ping"}')["ok"] is True
    finally:
        client.close()


def test_a_client_that_goes_away_mid_request_is_not_an_error(
    control: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for partial in (b'{"cmd": "pi', b'{"cmd": "recv", "qpn": 256, "timeout": 0.2}\n'):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(control))
        sock.sendall(partial)
        sock.close()
    client = Raw(control)
    try:
        assert client.ask(b'{"cmd": "ping"}')["ok"] is True
    finally:
        client.close()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
