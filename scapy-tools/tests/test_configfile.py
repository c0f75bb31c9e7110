"""ibsec.configfile: files refused with file, line and reason, never a UnicodeDecodeError, RecursionError
or a number nobody can use."""

from __future__ import annotations

from pathlib import Path

import pytest
from ibsec import configfile


@pytest.mark.parametrize(("content", "message"), [
    (b'{\n  "name": "ok",\n  "kind": "caf\xe9"\n}\n', r"t.json:3:15: not UTF-8 text \(byte 0xe9\)"),
    (b'{\n  "a": 1,\n  "b": [1, 2,]\n}\n', r"t.json:3:14: not JSON: Expecting value"),
    (b'{\n  "a": 1,\n  "b": {\n    "c": [0,\n      1e400]\n  }\n}\n', r"t.json:5: b.c\[1\]: 1e400 is not a "
     r"finite number or an integer within"),
    (b'{"a": [NaN]}', r"t.json:1: a\[0\]: NaN is not a finite"),
    (b'{"n": 18446744073709551616}', r"t.json:1: n: 18446744073709551616 is not"),
    (b'{"n": ' + b"9" * 5000 + b"}", r"t.json:1: n: an integer of 5000 digits is not"),
    (b"[" * 33 + b"]" * 33, r"t.json:1: nested 33 levels deep: at most 32"),
])
def test_bad_files_are_refused_with_file_line_and_reason(tmp_path: Path, content: bytes,
                                                         message: str) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(content)
    with pytest.raises(configfile.ConfigFileError, match=message):
        configfile.load_file(path)


def test_good_file_and_edge_values(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"n": 18446744073709551615, "m": -9223372036854775808, "f": 1.7e308, "s": "[[[["}')
    doc, text = configfile.load_file(path)
    assert doc == {"n": (1 << 64) - 1, "m": -(1 << 63), "f": 1.7e308, "s": "[[[["} and text.startswith("{")
    with pytest.raises(configfile.ConfigFileError, match="missing.json: cannot read: No such file"):
        configfile.load_file(tmp_path / "missing.json")


def test_line_of_a_field() -> None:
    text = '{\n "switches": [\n  {"name": "s1"},\n  {"name": "s2",\n   "ports": [1,\n     2]}\n ]\n}\n'
    assert configfile.line_of(text, "switches[1].ports[1]") == 6
    assert configfile.line_of(text, "switches[1].name") == 4
    assert configfile.line_of(text, "switches[1].level") == 4  # missing: where its object starts
    assert configfile.line_of(text, "switches") == 2
    assert configfile.line_of("[[[", "a") is None
