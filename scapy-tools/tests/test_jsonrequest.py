"""The shared control-socket request reader: bounded lines, nesting, numbers no field accepts, fields."""

from __future__ import annotations

import io

import pytest
from ibsec.jsonrequest import Args, Lines, RequestError, depth, parse


def test_a_long_line_is_read_to_its_end_and_refused_and_the_next_line_is_intact() -> None:
    stream = io.BytesIO(b"x" * 1000 + b"\n" + b'{"cmd": "ping"}\n')
    lines = Lines(100)
    with pytest.raises(RequestError, match="longer than 100 bytes"):
        lines.read(stream.read1)
    assert lines.read(stream.read1) == b'{"cmd": "ping"}\n'
    assert lines.read(stream.read1) is None


@pytest.mark.parametrize(("text", "expected"), [
    (b'{"cmd": "x"}', 1),
    (b'{"cmd": "[[[[{{{{"}', 1),  # brackets inside strings do not count
    (b'{"cmd": "\\"[[[", "a": [[1]]}', 3),
    (b"[" * 40, 40),
    (b"", 0),
])
def test_depth_counts_nesting_outside_strings(text: bytes, expected: int) -> None:
    assert depth(text) == expected


def test_numbers_no_field_accepts_are_kept_and_refused_by_the_field_that_holds_them() -> None:
    cmd, values = parse(b'{"cmd": "c", "a": 1e999, "b": NaN, "c": ' + b"7" * 300 + b', "d": 5}')
    args = Args(cmd, values)
    for name in ("a", "b", "c"):
        with pytest.raises(RequestError, match=f"c: field '{name}' must be a number in \\[0, 10\\]"):
            args.number(name, 0, 10)
    assert args.number("d", 0, 10) == 5.0
    args.done()


def test_args_refuse_fields_nobody_asked_for_and_take_integers_in_any_base() -> None:
    args = Args("connect", {"pkey": "0x8001", "qpn": 7, "speling": 1})
    assert args.integer("pkey", 0, 0xFFFF) == 0x8001 and args.integer("qpn", 0, 10) == 7
    assert args.integer("absent", 0, 1, None) is None
    with pytest.raises(RequestError, match="unknown field 'speling' \\(fields: absent, pkey, qpn\\)"):
        args.done()
