"""ibsec.jsonin: requests and config files refused with the field or line and the reason, never raised
as RecursionError, OverflowError or UnicodeDecodeError."""

from __future__ import annotations

from pathlib import Path

import pytest
from ibsec import jsonin


@pytest.mark.parametrize(("line", "message"), [
    (b"[]", 'a request is a JSON object with a "cmd" string, got a list'),
    (b"null", "got null"),
    (b"1.5", "got a number"),
    (b"true", "got a boolean"),
    (b"  ", "empty request"),
    (b'{"cmd": null}', "cmd: expected a string, got null"),
    (b'{"cmd": "x", "a": {"b": [0, NaN]}}', "a.b[1]: NaN is not a number JSON allows"),
    (b'{"cmd": "x", "rate": -Infinity}', "rate: -Infinity is not a number JSON allows"),
    (b'{"cmd": "x", "rate": -1e999}', "rate: -1e999 is not a finite number"),
    (b'{"cmd": "x", "n": 18446744073709551616}', "n: 18446744073709551616 is an integer outside"),
    (b'{"cmd": "x", "n": -9223372036854775809}', "n: -9223372036854775809 is an integer outside"),
    (b'{"cmd": "x", "n": ' + b"1" * 100_000 + b"}", "request of 100019 bytes: at most 65536"),
    (b"[" * 33 + b"]" * 33, "nested 33 levels deep: at most 32"),
    (b'{"cmd": "\xc3"}', "request is not UTF-8 (byte 9)"),
])
def test_bad_requests_are_refused_with_the_field(line: bytes, message: str) -> None:
    with pytest.raises(jsonin.JsonInputError) as err:
        jsonin.decode_request(line)
    assert message in str(err.value)


def test_good_request_and_edge_values() -> None:
    request = jsonin.decode_request(b'{"cmd": "x", "n": 18446744073709551615, "m": -9223372036854775808, '
                                    b'"f": 1.7e308, "s": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", "d": '
                                    + b"[" * 31 + b"]" * 31 + b"}")
    assert request["n"] == (1 << 64) - 1 and request["m"] == -(1 << 63) and request["f"] == 1.7e308
    assert jsonin.nesting('{"a": "]]]]{{{{", "b": [[1]]}') == 3


def test_config_file_errors_name_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "topology.json"
    path.write_bytes(b'{\n  "name": "ok",\n  "kind": "caf\xe9"\n}\n')
    with pytest.raises(jsonin.JsonInputError, match=r"topology.json:3:15: not UTF-8 text \(byte 0xe9\)"):
        jsonin.load_file(path)
    path.write_text('{\n  "a": 1,\n  "b": [1, 2,]\n}\n')
    with pytest.raises(jsonin.JsonInputError, match=r"topology.json:3:\d+: not JSON: Expecting value"):
        jsonin.load_file(path)
    path.write_text('{\n  "a": 1,\n  "b": {\n    "c": [0,\n      1e400]\n  }\n}\n')
    with pytest.raises(jsonin.JsonInputError, match=r"topology.json:5: b.c\[1\]: 1e400 is not a finite"):
        jsonin.load_file(path)
    with pytest.raises(jsonin.JsonInputError, match="missing.json: cannot read: No such file"):
        jsonin.load_file(tmp_path / "missing.json")


def test_line_of_a_field() -> None:
    text = '{\n "switches": [\n  {"name": "s1"},\n  {"name": "s2",\n   "ports": [1,\n     2]}\n ]\n}\n'
    assert jsonin.line_of(text, "switches[1].ports[1]") == 6
    assert jsonin.line_of(text, "switches[1].name") == 4
    assert jsonin.line_of(text, "switches[1].level") == 4  # missing: where its object starts
    assert jsonin.line_of(text, "switches") == 2
    assert jsonin.line_of("[[[", "a") is None
