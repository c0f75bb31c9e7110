"""The p4switch front end as a list of passes, each one concern, in the order they run (PASSES below).

The passes share one `Compilation`: each reads what earlier passes left there and adds its own result.
Lowering the blocks (the parsers and controls passes) is done by the front end's parts, one concern each
(frontend/parts.py): declarations, expressions and constant folding, calls, inlining, statements, parsers,
tables and v1model. The result is a program in the typed IR (p4switch.ir, docs/p4switch-ir.md) and its
P4Info; bad input raises P4Error with the original file:line:col.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from google.protobuf import json_format, text_format

from p4switch import ir
from p4switch.frontend import p4info
from p4switch.frontend.parser import parse
from p4switch.frontend.parts import FrontEnd
from p4switch.frontend.preprocess import SourceMap, preprocess
from p4switch.frontend.source import PTree, Source
from p4switch.frontend.v1model import V1Switch


@dataclass
class Compilation:
    """The input of one compile, and what each pass adds for the passes after it."""

    path: Path
    include_dirs: list[Path] | None = None
    defines: dict[str, str] | None = None
    text: str = field(init=False)
    smap: SourceMap = field(init=False)
    tree: PTree = field(init=False)
    fe: FrontEnd = field(init=False)
    v1switch: V1Switch = field(init=False)
    parsers: list[ir.Parser] = field(init=False)
    controls: list[ir.Control] = field(init=False)
    program: ir.Program = field(init=False)
    ids: p4info.Ids = field(init=False)
    p4info: Any = field(init=False)


def preprocess_source(c: Compilation) -> None:
    c.text, c.smap = preprocess(c.path, c.include_dirs, c.defines)


def parse_source(c: Compilation) -> None:
    c.tree = parse(c.text, c.smap)


def declarations(c: Compilation) -> None:
    c.fe = FrontEnd(Source(c.smap, c.text, c.path.name))
    c.fe.decls.declare_all(c.tree)


def v1switch(c: Compilation) -> None:
    c.v1switch = c.fe.v1.bind_pipeline()


def parsers(c: Compilation) -> None:
    c.parsers = [c.fe.parsers.lower_parser(decl) for decl in c.v1switch.parsers()]


def controls(c: Compilation) -> None:
    c.controls = [c.fe.stmts.lower_control(decl) for decl in c.v1switch.controls()]


def program(c: Compilation) -> None:
    c.program = c.fe.program(c.v1switch, c.parsers, c.controls)


def ids(c: Compilation) -> None:
    c.program, c.ids = p4info.assign_ids(c.program, c.fe.p4info_extras())


def build_p4info(c: Compilation) -> None:
    c.p4info = p4info.build(c.program, c.fe.p4info_extras(), c.ids)


@dataclass(frozen=True)
class Pass:
    name: str
    run: Callable[[Compilation], None]
    does: str


PASSES: tuple[Pass, ...] = (
    Pass("preprocess", preprocess_source, "#include and #define, with a map back to the original files"),
    Pass("parse", parse_source, "the LALR parse tree (declared type names told apart first)"),
    Pass("declarations", declarations, "types, constants, externs, actions and blocks by name"),
    Pass("v1switch", v1switch, "`V1Switch(...) main`: the six blocks, the headers and metadata types"),
    Pass("parsers", parsers, "parser blocks: states unrolled per header-stack position, selects"),
    Pass("controls", controls, "control blocks: statements, tables and actions, calls inlined"),
    Pass("program", program, "the program in the typed IR"),
    Pass("ids", ids, "P4Runtime ids: @id, else p4c's hash of the name"),
    Pass("p4info", build_p4info, "the P4Info message"),
)


@dataclass
class Compiled:
    """The two outputs of a compile: the program in the typed IR (p4switch.ir) and the P4Info message."""

    program: ir.Program
    p4info: Any
    preprocessed: str = ""
    """the program after the preprocessor (p4c's driver writes it as NAME.p4i)"""

    @cached_property
    def ir(self) -> dict[str, Any]:
        """The program's JSON form (docs/p4switch-ir.md)."""
        return ir.to_json(self.program)

    def ir_json(self) -> str:
        return json.dumps(self.ir, indent=1) + "\n"

    def p4info_text(self) -> str:
        return str(text_format.MessageToString(self.p4info))

    def write_p4info(self, path: Path, fmt: str | None = None) -> None:
        """Write the P4Info in ``fmt`` (binary, json, text) or, without it, in the format p4c picks from
        the extension: .json, .bin/.pb, else text."""
        fmt = fmt or {".json": "json", ".bin": "binary", ".pb": "binary"}.get(path.suffix, "text")
        if fmt == "json":
            path.write_text(json_format.MessageToJson(self.p4info))
        elif fmt == "binary":
            path.write_bytes(self.p4info.SerializeToString())
        else:
            path.write_text(self.p4info_text())


def compile_file(
    path: Path, include_dirs: list[Path] | None = None, defines: dict[str, str] | None = None
) -> Compiled:
    """Compile one P4 program: every pass of PASSES in order. Raises P4Error (file:line:col) on bad input."""
    c = Compilation(path, include_dirs, defines)
    for step in PASSES:
        step.run(c)
    return Compiled(c.program, c.p4info, c.text)
