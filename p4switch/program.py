"""The program formats p4switch runs, recognised by their content: one entry point for the command line
and for SetForwardingPipelineConfig.

A format is a test on the parsed JSON document and a loader from the program's bytes to an engine
switch: p4switch-cc's IR (docs/p4switch-ir.md), and BMv2's JSON, what p4c-bm2-ss writes (BMv2's
docs/JSON_format.md), read into the same IR by p4switch.bmv2json."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from p4switch import bmv2json
from p4switch.engine import api as engine
from p4switch.engine import loader

BMV2_JSON_VERSION: str = bmv2json.NEWEST_VERSION
"""The newest BMv2 JSON version (``major.minor``) p4switch loads."""


@dataclass(frozen=True)
class ProgramFormat:
    name: str
    recognises: Callable[[dict[str, Any]], bool]
    load: Callable[[bytes, dict[str, Any], logging.Logger, str], engine.Switch]


def _load_ir(program: bytes, _doc: dict[str, Any], log: logging.Logger, back_end: str) -> engine.Switch:
    return loader.load(program, log=log, engine=back_end)


def _load_bmv2(_program: bytes, doc: dict[str, Any], log: logging.Logger, back_end: str) -> engine.Switch:
    try:
        program = bmv2json.load(doc, _compiler(doc))
    except bmv2json.BMv2JsonError as exc:
        raise engine.ProgramError(f"BMv2 JSON: {exc}") from None
    return loader.load(program, log=log, engine=back_end)


def _compiler(doc: dict[str, Any]) -> str:
    """What the program is called in logs: BMv2 JSON has no source name, p4c names itself."""
    meta = doc.get("__meta__")
    version = ".".join(str(v) for v in meta.get("version", [])) if isinstance(meta, dict) else ""
    return f"BMv2 JSON {version}".strip()


FORMATS = (
    ProgramFormat("p4switch-ir", lambda doc: doc.get("format") == "p4switch-ir", _load_ir),
    ProgramFormat("bmv2-json", lambda doc: "header_types" in doc and "pipelines" in doc, _load_bmv2),
)


def program_format(program: bytes) -> tuple[ProgramFormat, dict[str, Any]]:
    """The format of ``program`` and its parsed document. Raises engine.ProgramError."""
    try:
        doc = json.loads(program)
    except ValueError as exc:
        raise engine.ProgramError(f"program is not valid JSON: {exc}") from None
    if isinstance(doc, dict):
        for fmt in FORMATS:
            if fmt.recognises(doc):
                return fmt, doc
    raise engine.ProgramError("program is neither p4switch-cc's IR JSON (format 'p4switch-ir') nor BMv2 JSON")


def load(program: bytes, log: logging.Logger, back_end: str = "python") -> engine.Switch:
    """A new engine switch running ``program``, whichever format it is in, on the engine ``back_end``
    ("python" or "native", loader.load). Raises engine.ProgramError."""
    fmt, doc = program_format(program)
    return fmt.load(program, doc, log, back_end)
