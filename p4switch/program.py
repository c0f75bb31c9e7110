"""The program formats p4switch runs, recognised by their content: one entry point for the command line
and for SetForwardingPipelineConfig.

A format is a test on the parsed JSON document and a loader from the program's bytes to an engine
switch. Today p4switch runs p4switch-cc's IR (docs/p4switch-ir.md). BMv2's JSON, what p4c-bm2-ss writes
(../shared/p4lang/docs/bmv2-JSON_format.md), is recognised so that it is refused with a message saying
what to do instead of "not p4switch IR"; its loader replaces :func:`_refuse_bmv2` and sets
:data:`BMV2_JSON_VERSION` when it lands."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from p4switch.engine import api as engine
from p4switch.engine import loader

BMV2_JSON_VERSION: str | None = None
"""The newest BMv2 JSON version (``major.minor``) p4switch loads; None while it loads none."""


@dataclass(frozen=True)
class ProgramFormat:
    name: str
    recognises: Callable[[dict[str, Any]], bool]
    load: Callable[[bytes, dict[str, Any], logging.Logger], engine.Switch]


def _load_ir(program: bytes, _doc: dict[str, Any], log: logging.Logger) -> engine.Switch:
    return loader.load(program, log=log)


def _refuse_bmv2(_program: bytes, doc: dict[str, Any], _log: logging.Logger) -> engine.Switch:
    meta = doc.get("__meta__")
    meta = meta if isinstance(meta, dict) else {}
    version = ".".join(str(v) for v in meta.get("version", [])) or "unknown"
    raise engine.ProgramError(
        f"program is BMv2 JSON (version {version}, from {meta.get('compiler') or 'p4c-bm2-ss'}), which "
        "p4switch does not load yet: compile the P4 source with p4switch-cc (`p4switch aliases DIR` "
        "installs it as p4c and p4c-bm2-ss)")


FORMATS = (
    ProgramFormat("p4switch-ir", lambda doc: doc.get("format") == "p4switch-ir", _load_ir),
    ProgramFormat("bmv2-json", lambda doc: "header_types" in doc and "pipelines" in doc, _refuse_bmv2),
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


def load(program: bytes, log: logging.Logger) -> engine.Switch:
    """A new engine switch running ``program``, whichever format it is in. Raises engine.ProgramError."""
    fmt, doc = program_format(program)
    return fmt.load(program, doc, log)
