"""JSON-lines requests from a control socket, read and checked before anything runs.

The agent's control socket and the SM's take one JSON object per line from whoever can open the socket.
A request is hostile until proven otherwise, so this module refuses, with a message meant for the client:

- a line longer than ``max_bytes`` (:class:`Lines` discards the rest of it, memory stays bounded);
- bytes that are not UTF-8, nesting deeper than ``max_depth`` (checked before the JSON parser recurses);
- anything but an object with a string ``"cmd"``;
- and, through :class:`Args`, every argument outside its type and range, named with its allowed range:
  ``Infinity``, ``NaN``, ``1e999`` and integers of hundreds of digits are kept as :class:`Unfit` values by
  the parser, so the field that holds one is refused by name, never turned into an OverflowError later.

Both servers answer a :class:`RequestError` with ``{"ok": false, "error": str(exc)}`` and go on serving.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
from collections.abc import Callable, Collection
from typing import Any

MAX_BYTES = 1 << 16
MAX_DEPTH = 16
MAX_INT_DIGITS = 40  # 128-bit values (GIDs, owner ids) have 39 decimal digits
MAX_TEXT = 4096

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_REQUIRED = object()


class RequestError(ValueError):
    """A request refused before it runs; ``str()`` is the whole answer for the client."""


class Unfit:
    """A JSON number no field accepts (non-finite, or too many digits), kept as the text the client sent."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text if len(text) <= 24 else f"an integer of {len(text)} digits"

    def __repr__(self) -> str:
        return self.text


class Lines:
    """The request lines of one connection, cut from its bytes as they arrive, each at most ``max_bytes``:
    a longer one is discarded as it comes (memory stays bounded), refused once its end arrives, and the
    next line is intact. It does no I/O, so both servers use it: the agent's threads feed it from a socket
    file (:meth:`read`), the SM's event loop from an asyncio stream (ibsm.control)."""

    CHUNK = 1 << 16

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._buffer = bytearray()  # appended to in place: a line of megabytes is not copied per chunk
        self._scanned = 0  # bytes of the buffer known to hold no newline
        self._too_long = False

    def feed(self, chunk: bytes) -> None:
        """Bytes received from the client."""
        self._buffer += chunk

    def next(self) -> bytes | None:
        """The next whole line, or None until more bytes come; RequestError for one that was too long."""
        end = self._buffer.find(b"\n", self._scanned)
        if end < 0:
            self._scanned = len(self._buffer)
            if self._scanned > self.max_bytes:
                self._too_long, self._scanned = True, 0
                self._buffer.clear()
            return None
        line = bytes(self._buffer[:end + 1])
        del self._buffer[:end + 1]
        self._scanned = 0
        self._check(end)
        return line

    def end(self) -> bytes | None:
        """Once the client has closed: its last line if it sent one without a newline, else None."""
        line = bytes(self._buffer)
        self._buffer.clear()
        self._scanned = 0
        self._check(len(line))
        return line or None

    def _check(self, length: int) -> None:
        too_long, self._too_long = self._too_long or length > self.max_bytes, False
        if too_long:
            raise RequestError(f"request longer than {self.max_bytes} bytes")

    def read(self, read: Callable[[int], bytes]) -> bytes | None:
        """The next line from a blocking stream's ``read`` (a socket file's ``read1``); None at its end."""
        while (line := self.next()) is None:
            chunk = read(self.CHUNK)
            if not chunk:
                return self.end()
            self.feed(chunk)
        return line


def parse(line: bytes, max_depth: int = MAX_DEPTH, max_bytes: int = MAX_BYTES) -> tuple[str, dict[str, Any]]:
    """(command, arguments) of one request line; :class:`RequestError` says what is wrong with it."""
    if len(line) > max_bytes:
        raise RequestError(f"request longer than {max_bytes} bytes")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise RequestError("request is not UTF-8") from None
    if depth(line) > max_depth:
        raise RequestError(f"request nests deeper than {max_depth} levels")
    try:
        request = json.loads(text, parse_constant=Unfit, parse_int=_integer, parse_float=_number)
    except json.JSONDecodeError as exc:
        raise RequestError(f"request is not JSON: {exc}") from None
    if not isinstance(request, dict) or not isinstance(request.get("cmd"), str):
        raise RequestError('a request is a JSON object with a "cmd" string')
    cmd = request.pop("cmd")
    return cmd, request


def depth(line: bytes) -> int:
    """How deep arrays and objects nest in a JSON text (strings skipped), without parsing it."""
    deepest = level = 0
    for byte in _STRING.sub(b'""', line).translate(None, _NOT_BRACKETS):
        if byte in b"[{":
            level += 1
            deepest = max(deepest, level)
        else:
            level -= 1
    return deepest


def _integer(text: str) -> int | Unfit:
    return Unfit(text) if len(text.lstrip("-")) > MAX_INT_DIGITS else int(text)


def _number(text: str) -> float | Unfit:
    value = float(text)
    return value if math.isfinite(value) else Unfit(text)


class Args:
    """The arguments of one command, taken out one by one with their type and range checked.

    Each getter removes its field; :meth:`done` refuses any field left over (a misspelt option must not
    be ignored silently). Integers may come as JSON numbers or as strings in any base (``"0x8001"``).
    """

    def __init__(self, cmd: str, values: dict[str, Any]) -> None:
        self.cmd = cmd
        self._values = dict(values)
        self._known: list[str] = []

    def _take(self, name: str, default: Any) -> tuple[bool, Any]:
        """(given, value): the field's value if the client gave one (null counts as absent), else the
        default; a required field that is absent is refused."""
        self._known.append(name)
        value = self._values.pop(name, None)
        if value is not None:
            return True, value
        if default is _REQUIRED:
            raise RequestError(f"{self.cmd}: field {name!r} is required")
        return False, default

    def _refuse(self, name: str, expected: str, value: Any) -> RequestError:
        shown = json.dumps(value[:40]) if isinstance(value, str) else repr(value)[:60]
        return RequestError(f"{self.cmd}: field {name!r} must be {expected}, got {shown}")

    def has(self, name: str) -> bool:
        """Was ``name`` given (and not null)?"""
        return self._values.get(name) is not None

    def integer(self, name: str, low: int, high: int, default: Any = _REQUIRED) -> Any:
        """An integer in [low, high] (JSON number or a string in any base)."""
        given, value = self._take(name, default)
        if not given:
            return value
        expected = f"an integer in {low:#x}..{high:#x}" if high > 0xFFFF else f"an integer in {low}..{high}"
        number = value
        if isinstance(value, str) and len(value) <= MAX_INT_DIGITS + 2:
            try:
                number = int(value, 0)
            except ValueError:
                raise self._refuse(name, expected, value) from None
        if isinstance(number, bool) or not isinstance(number, int) or not low <= number <= high:
            raise self._refuse(name, expected, value)
        return number

    def number(self, name: str, low: float, high: float, default: Any = _REQUIRED) -> Any:
        """A finite number in [low, high]."""
        given, value = self._take(name, default)
        if not given:
            return value
        if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
            raise self._refuse(name, f"a number in [{low:g}, {high:g}]", value)
        return float(value)

    def flag(self, name: str, default: Any = _REQUIRED) -> Any:
        """true or false."""
        given, value = self._take(name, default)
        if given and not isinstance(value, bool):
            raise self._refuse(name, "true or false", value)
        return value

    def text(self, name: str, max_len: int = MAX_TEXT, default: Any = _REQUIRED) -> Any:
        """A string of at most ``max_len`` characters."""
        given, value = self._take(name, default)
        if not given:
            return value
        if not isinstance(value, str) or len(value) > max_len:
            raise self._refuse(name, f"a string of at most {max_len} characters", value)
        return value

    def choice(self, name: str, choices: Collection[str], default: Any = _REQUIRED) -> Any:
        """One of ``choices``."""
        given, value = self._take(name, default)
        if not given:
            return value
        if not isinstance(value, str) or value not in choices:
            raise self._refuse(name, "one of " + ", ".join(sorted(choices)), value)
        return value

    def hex(self, name: str, max_bytes: int, default: Any = _REQUIRED) -> Any:
        """Bytes given as a hex string of at most ``max_bytes`` bytes."""
        given, value = self._take(name, default)
        if not given:
            return value
        expected = f"hex digits for at most {max_bytes} bytes"
        if not isinstance(value, str) or len(value) > 2 * max_bytes:
            raise self._refuse(name, expected, value)
        try:
            return bytes.fromhex(value)
        except ValueError:
            raise self._refuse(name, expected, value) from None

    def gid(self, name: str, default: Any = _REQUIRED) -> Any:
        """A GID: an IPv6 address, returned in its canonical text form."""
        given, value = self._take(name, default)
        if not given:
            return value
        try:
            if not isinstance(value, str) or len(value) > 64:
                raise ValueError
            return str(ipaddress.IPv6Address(value))
        except ValueError:
            raise self._refuse(name, "a GID (IPv6 address)", value) from None

    def done(self) -> None:
        """Refuse any field no getter asked for."""
        if self._values:
            extra = ", ".join(sorted(map(repr, self._values)))
            known = ", ".join(sorted(self._known)) or "none"
            raise RequestError(f"{self.cmd}: unknown field {extra} (fields: {known})")
