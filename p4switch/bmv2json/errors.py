"""Errors of the BMv2 JSON loader: a construct p4switch does not run, or a document that is not BMv2 JSON.

Both name where: the P4 source position p4c recorded (``source_info``: ``file.p4:line:col``) when the
JSON object has one, else the JSON path of the object (``actions[3] (MyIngress.set_port)``)."""

from __future__ import annotations

from pathlib import PurePath
from typing import Any


class BMv2JsonError(ValueError):
    """The document is not BMv2 JSON p4switch can read (a missing or malformed attribute)."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message


class Unsupported(BMv2JsonError):
    """A construct of valid BMv2 JSON that p4switch does not run: refused, never run wrongly."""

    def __init__(self, where: str, construct: str) -> None:
        super().__init__(where, f"{construct} is not supported by p4switch")
        self.construct = construct


def source_position(obj: Any) -> str:
    """``file.p4:line:col`` from an object's ``source_info``, or "" when it has none."""
    info = obj.get("source_info") if isinstance(obj, dict) else None
    if not isinstance(info, dict) or "line" not in info:
        return ""
    return f"{PurePath(str(info.get('filename', '?'))).name}:{info['line']}:{info.get('column', 0)}"


def where(obj: Any, path: str) -> str:
    """The best name for the place of ``obj``: its source position, else its JSON path."""
    return source_position(obj) or path
