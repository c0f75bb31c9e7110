"""JSON from outside the process, checked before it is used: control-socket requests and config files.

``json.loads`` alone lets a client or a file do what no caller expects: a request that is a list, a
string or null; ``Infinity``, ``NaN`` or ``1e999`` (a float that is not finite); an integer of a million
digits (``ValueError`` beyond Python's 4,300-digit limit, or an ``OverflowError`` wherever it is used);
100,000 nested ``[`` (``RecursionError``); bytes that are not UTF-8. Everything here refuses those with a
:class:`JsonInputError` whose message names the field (``args.count``) or the line and column, and the
allowed range, before any of it reaches a command or a parser.

:func:`decode_request` reads one control-socket request (a JSON object with a ``"cmd"`` string);
:func:`read_text` and :func:`load_file` read a configuration file; :func:`line_of` finds the line of a
field (``switches[0].address``) in a JSON text, so a check that fails on a decoded document can still
say where in the file the bad value is.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_REQUEST_BYTES = 64 * 1024
MAX_DEPTH = 32
INT_MIN, INT_MAX = -(1 << 63), (1 << 64) - 1
INT_RANGE = "-2^63..2^64-1"
_MAX_INT_DIGITS = 21  # 2^64 - 1 has 20 digits; anything longer is refused without converting it


class JsonInputError(ValueError):
    """Input refused; the message says which field or which line, and why."""


@dataclass(frozen=True)
class _Refused:
    """Stands in for a number the decoder refused, until the walk that knows its field reports it."""

    text: str
    why: str


def _constant(text: str) -> _Refused:
    return _Refused(text, "not a number JSON allows (NaN and Infinity are refused)")


def _float(text: str) -> float | _Refused:
    value = float(text)
    if not math.isfinite(value):
        return _Refused(text, "not a finite number (at most about 1.8e308 in magnitude)")
    return value


def _int(text: str) -> int | _Refused:
    if len(text.lstrip("-")) > _MAX_INT_DIGITS:
        return _Refused(f"{text[:12]}... ({len(text)} characters)", f"an integer outside {INT_RANGE}")
    value = int(text)
    if not INT_MIN <= value <= INT_MAX:
        return _Refused(text, f"an integer outside {INT_RANGE}")
    return value


_DEPTH_STEPS = str.maketrans({"[": "+", "{": "+", "]": "-", "}": "-"})
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")


def nesting(text: str) -> int:
    """How deep arrays and objects nest in ``text`` (brackets inside strings do not count)."""
    brackets = _NOT_BRACKETS.sub("", _STRINGS.sub("", text)).translate(_DEPTH_STEPS)
    steps = (1 if c == "+" else -1 for c in brackets)
    return max(itertools.accumulate(steps, initial=0))


def _path(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


def _check_values(value: Any, where: str) -> None:
    """Raise for the first refused number, naming its field."""
    if isinstance(value, _Refused):
        raise JsonInputError(f"{where or 'the value'}: {value.text} is {value.why}")
    if isinstance(value, dict):
        for key, item in value.items():
            _check_values(item, _path(where, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_values(item, _path(where, i))


def loads(text: str, max_depth: int = MAX_DEPTH) -> Any:
    """Decode ``text`` as JSON, refusing deep nesting, non-finite numbers and out-of-range integers."""
    depth = nesting(text)
    if depth > max_depth:
        raise JsonInputError(f"nested {depth} levels deep: at most {max_depth}")
    try:
        value = json.loads(text, parse_constant=_constant, parse_float=_float, parse_int=_int)
    except json.JSONDecodeError as err:
        raise JsonInputError(f"not JSON: line {err.lineno} column {err.colno}: {err.msg}") from None
    _check_values(value, "")
    return value


def decode_request(line: bytes, max_bytes: int = MAX_REQUEST_BYTES) -> dict[str, Any]:
    """One control-socket request: a JSON object of at most ``max_bytes`` bytes with a ``"cmd"`` string."""
    if len(line) > max_bytes:
        raise JsonInputError(f"request of {len(line)} bytes: at most {max_bytes}")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as err:
        raise JsonInputError(f"request is not UTF-8 (byte {err.start})") from None
    if not text.strip():
        raise JsonInputError('empty request: send one JSON object with a "cmd" string per line')
    request = loads(text)
    if not isinstance(request, dict):
        raise JsonInputError(f'a request is a JSON object with a "cmd" string, got {_kind(request)}')
    if not isinstance(request.get("cmd"), str):
        raise JsonInputError(f'cmd: expected a string, got {_kind(request.get("cmd"))}')
    return request


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), "a number")


# ---------------------------------------------------------------------------------------------------------
# configuration files
# ---------------------------------------------------------------------------------------------------------


def read_text(path: Path) -> str:
    """A configuration file's text; an unreadable or non-UTF-8 file is refused with where and why."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise JsonInputError(f"{path}: cannot read: {err.strerror or err}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        byte = data[err.start]
        raise JsonInputError(f"{path}:{line}:{column}: not UTF-8 text (byte {byte:#04x})") from None


def load_file(path: Path, max_depth: int = MAX_DEPTH) -> tuple[Any, str]:
    """(decoded document, text) of a JSON configuration file; errors say ``file:line:column: why``."""
    text = read_text(path)
    try:
        return loads(text, max_depth), text
    except JsonInputError as err:
        message = str(err)
        match = re.match(r"not JSON: line (\d+) column (\d+): (.*)", message)
        if match:
            raise JsonInputError(f"{path}:{match[1]}:{match[2]}: not JSON: {match[3]}") from None
        field = re.match(r"([^:]+): ", message)
        line = line_of(text, field[1]) if field else None
        raise JsonInputError(f"{path}:{line or 1}: {message}") from None


# ---------------------------------------------------------------------------------------------------------
# where a field is
# ---------------------------------------------------------------------------------------------------------


_WHITESPACE = re.compile(r"[ \t\n\r]*")
_STEP = re.compile(r"\[(\d+)\]|\.?([^.\[\]]+)")


def _skip(text: str, index: int) -> int:
    return _WHITESPACE.match(text, index).end()  # type: ignore[union-attr]  # matches the empty string


def _members(text: str, start: int) -> Iterator[tuple[str | int, int]]:
    """(key or index, offset of the value) of each member of the object or array at ``start``."""
    decoder = json.JSONDecoder()
    closing = "}" if text[start] == "{" else "]"
    index, count = _skip(text, start + 1), 0
    while index < len(text) and text[index] != closing:
        key: str | int = count
        if closing == "}":
            key, index = decoder.raw_decode(text, index)
            index = _skip(text, _skip(text, index) + 1)  # the colon
        yield key, index
        _, index = decoder.raw_decode(text, index)
        index = _skip(text, index)
        if text.startswith(",", index):
            index = _skip(text, index + 1)
        count += 1


def line_of(text: str, field: str) -> int | None:
    """The line where ``field`` (``switches[0].ports[1]``) starts in the JSON ``text``, or None if the
    text is not JSON. For a field that is missing, the line of its closest existing parent."""
    offset = _skip(text, 0)
    try:
        for index, key in _STEP.findall(field):
            wanted = int(index) if index else key
            if not text.startswith(("{", "["), offset):
                break
            found = next((at for name, at in _members(text, offset) if name == wanted), None)
            if found is None:
                break
            offset = found
    except (ValueError, RecursionError):
        return None
    return text.count("\n", 0, offset) + 1
