"""Configuration and state files, checked before they are used: file, line and reason for every refusal.

``json.loads`` on a file's text lets the file do what no caller expects: bytes that are not UTF-8 end in
``UnicodeDecodeError`` (a traceback), deep nesting in ``RecursionError``, ``1e999`` or ``NaN`` become
numbers nobody can use, and a check that later refuses a decoded value cannot say where it was.
:func:`read_text` refuses non-UTF-8 with ``file:line:column``; :func:`load_file` also refuses bad JSON,
nesting deeper than :data:`MAX_DEPTH` (counted before the parser recurses, ``ibsec.jsonrequest.depth``)
and numbers no field can take, naming the field and its line; :func:`line_of` finds the line of a field
(``switches[0].address``) so a check made on the decoded document can say where the bad value is.

Control-socket requests are ``ibsec.jsonrequest``'s.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ibsec.jsonrequest import Unfit, depth

MAX_DEPTH = 32
INT_MIN, INT_MAX = -(1 << 63), (1 << 64) - 1


class ConfigFileError(ValueError):
    """A file refused; the message starts with ``file:line`` (and column where there is one)."""


def _float(text: str) -> float | Unfit:
    value = float(text)
    return value if math.isfinite(value) else Unfit(text)


def _int(text: str) -> int | Unfit:
    value = int(text) if len(text) <= 21 else None  # 2^64 has 20 digits: longer is never converted
    return value if value is not None and INT_MIN <= value <= INT_MAX else Unfit(text)


def _field(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


def _first_unfit(value: Any, where: str) -> tuple[str, Unfit] | None:
    if isinstance(value, Unfit):
        return where, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = _first_unfit(item, _field(where, key))
        if found:
            return found
    return None


def read_text(path: Path) -> str:
    """A configuration file's text; an unreadable or non-UTF-8 file is refused with where and why."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ConfigFileError(f"{path}: cannot read: {err.strerror or err}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        byte = data[err.start]
        raise ConfigFileError(f"{path}:{line}:{column}: not UTF-8 text (byte {byte:#04x})") from None


def load_file(path: Path, max_depth: int = MAX_DEPTH) -> tuple[Any, str]:
    """(decoded document, text) of a JSON file; errors say ``file:line[:column]: why``."""
    text = read_text(path)
    nested = depth(text.encode())
    if nested > max_depth:
        raise ConfigFileError(f"{path}:1: nested {nested} levels deep: at most {max_depth}")
    try:
        doc = json.loads(text, parse_constant=Unfit, parse_float=_float, parse_int=_int)
    except json.JSONDecodeError as err:
        raise ConfigFileError(f"{path}:{err.lineno}:{err.colno}: not JSON: {err.msg}") from None
    unfit = _first_unfit(doc, "")
    if unfit:
        where, value = unfit
        raise ConfigFileError(f"{path}:{line_of(text, where) or 1}: {where or 'the value'}: {value.text} is "
                              f"not a finite number or an integer within {INT_MIN}..{INT_MAX}")
    return doc, text


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
