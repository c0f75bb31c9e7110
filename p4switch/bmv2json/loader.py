"""A BMv2 JSON document (what p4c-bm2-ss writes) as p4switch's typed IR program."""

from __future__ import annotations

import dataclasses
from typing import Any

from p4switch import ir
from p4switch.bmv2json.controls import TableBuilder, control, externs
from p4switch.bmv2json.errors import BMv2JsonError, Unsupported, source_position
from p4switch.bmv2json.expressions import Context, Expressions
from p4switch.bmv2json.layout import HEADERS, METADATA, Layout
from p4switch.bmv2json.parsers import ParserBuilder, checksum_controls, deparser
from p4switch.bmv2json.primitives import Primitives
from p4switch.engine.codegen import V1_ERRORS

MAJOR_VERSION = 2
NEWEST_VERSION = "2.24"
"""The BMv2 JSON format version this loader follows (BMv2's docs/JSON_format.md)."""
def load(doc: Any, source: str = "") -> ir.Program:
    """The IR program of a BMv2 JSON document. Raises Unsupported (a construct p4switch does not run)
    or BMv2JsonError (not BMv2 JSON it can read), both naming where."""
    if not isinstance(doc, dict):
        raise BMv2JsonError("(top)", "a BMv2 JSON program is a JSON object")
    try:
        return _Loader(doc, source).program()
    except (KeyError, TypeError, IndexError, ValueError) as exc:
        if isinstance(exc, BMv2JsonError):
            raise
        raise BMv2JsonError("(document)", f"malformed BMv2 JSON ({type(exc).__name__}: {exc})") from None


class _Loader:
    def __init__(self, doc: dict[str, Any], source: str) -> None:
        self.doc = doc
        self.source = source
        version = (doc.get("__meta__") or {}).get("version") or []
        if version and version[0] != MAJOR_VERSION:
            raise BMv2JsonError("__meta__", f"BMv2 JSON version {version} is not {MAJOR_VERSION}.x")
        self.layout = Layout(doc).build()
        self.exprs = Expressions(self.layout)
        self.prims = Primitives(doc, self.exprs)
        self.errors = self.error_names()

    def error_names(self) -> list[str]:
        """Error names by their BMv2 value: the engine's error codes are indices into this list."""
        by_value = {int(v): str(n) for n, v in self.doc.get("errors", [])}
        names = [by_value.get(i, "") for i in range(max(by_value, default=-1) + 1)]
        if "" in names:
            raise Unsupported("errors", "error values that are not 0, 1, 2, ...")
        return names + [e for e in V1_ERRORS if e not in names]

    def program(self) -> ir.Program:
        doc = self.doc
        parsers = doc.get("parsers", [])
        deparsers = doc.get("deparsers", [])
        pipelines = {p.get("name"): p for p in doc.get("pipelines", [])}
        if len(parsers) != 1 or len(deparsers) != 1 or set(pipelines) != {"ingress", "egress"}:
            raise Unsupported(
                "(top)", "a program that is not v1model (one parser, ingress, egress, deparser)"
            )
        for key in ("field_aliases",):
            self.check_aliases(doc.get(key, []))
        actions_by_id, actions = self.actions()
        tables = TableBuilder(self.layout, self.exprs, actions_by_id, doc)
        tables.pipeline(pipelines["ingress"], "ingress")
        tables.pipeline(pipelines["egress"], "egress")
        actions = [self.with_meter_read(a, tables.direct_meter_reads) for a in actions]
        if tables.needs_noaction and "NoAction" not in {a.name for a in actions}:
            actions.append(ir.Action("NoAction", None, "", ()))
        verify, compute = checksum_controls(doc, self.prims)
        controls = (
            verify,
            control(pipelines["ingress"], self.exprs, "ingress"),
            control(pipelines["egress"], self.exprs, "egress"),
            compute,
            deparser(deparsers[0], self.layout, "deparser"),
        )
        parser_builder = ParserBuilder(parsers[0], self.prims, self.errors)
        parser = parser_builder.build("parser")
        program = ir.Program(
            source=self.source,
            errors=tuple(self.errors),
            headers=self.layout.headers,
            structs=self.layout.structs,
            externs=(*externs(doc, tables.tables), *tables.externs, *parser_builder.value_sets()),
            actions=tuple(actions),
            tables=tuple(tables.tables),
            parsers=(parser,),
            controls=controls,
            digests=tuple(self.prims.digests.values()),
            pipeline=ir.Pipeline(
                parser="parser",
                verify_checksum="verify_checksum",
                ingress="ingress",
                egress="egress",
                compute_checksum="compute_checksum",
                deparser="deparser",
                headers_type=HEADERS,
                metadata_type=METADATA,
            ),
        )
        refuse_varbit_values(program)
        return program

    def check_aliases(self, aliases: list[Any]) -> None:
        """simple_switch's own field aliases map to standard_metadata; others would need renaming."""
        for alias in aliases:
            target = alias[1] if len(alias) > 1 else None
            if not (isinstance(target, list) and target and target[0] == "standard_metadata"):
                raise Unsupported(
                    "field_aliases", f"field alias {alias[0]} to a field outside standard_metadata"
                )

    def actions(self) -> tuple[dict[int, str], list[ir.Action]]:
        """Every action, one IR action per distinct body. p4c repeats an action per table (NoAction),
        and makes specialised copies of one action under its name for its direct calls: the copy a
        control-plane table uses keeps the name, the others are named ``name@N``."""
        visible = {
            a
            for pl in self.doc.get("pipelines", [])
            for t in pl.get("tables", [])
            if not str(t["name"]).split(".")[-1].startswith("tbl_")
            for a in t.get("action_ids", [])
        }
        raw = self.doc.get("actions", [])
        order = sorted(range(len(raw)), key=lambda i: (raw[i]["id"] not in visible, i))
        by_id: dict[int, str] = {}
        distinct: dict[str, list[tuple[Any, ir.Action]]] = {}
        for i in order:
            action = self.action(raw[i], i)
            copies = distinct.setdefault(action.name, [])
            key = _without_src(action)
            found = next((a for k, a in copies if k == key), None)
            if found is None:
                name = action.name if not copies else f"{action.name}@{len(copies)}"
                found = dataclasses.replace(action, name=name)
                copies.append((key, found))
            by_id[int(raw[i]["id"])] = found.name
        return by_id, [a for copies in distinct.values() for _, a in copies]

    def action(self, a: dict[str, Any], i: int) -> ir.Action:
        name = str(a["name"])
        runtime: list[tuple[str, ir.Type]] = [
            (f"rd{n}", ir.TBit(int(rd["bitwidth"]))) for n, rd in enumerate(a.get("runtime_data", []))
        ]
        body = self.prims.body(a.get("primitives", []), Context(runtime=runtime), f"actions[{i}] ({name})")
        params = tuple(
            ir.ActionParam(name=str(rd["name"]), var=var, type=t)
            for rd, (var, t) in zip(a.get("runtime_data", []), runtime, strict=True)
        )
        return ir.Action(name, None, source_position(a), params, (), body)

    @staticmethod
    def with_meter_read(a: ir.Action, reads: dict[str, tuple[str, ir.Expr]]) -> ir.Action:
        """BMv2 writes a direct meter's colour to its result_target when the table hits, before the
        action runs: the action reads it first."""
        if a.name not in reads:
            return a
        meter, dst = reads[a.name]
        return ir.Action(
            a.name,
            a.control,
            a.src,
            a.params,
            a.locals,
            (ir.MethodCall(meter, "read", (dst,), a.src), *a.body),
            a.p4info_id,
        )


def refuse_varbit_values(program: ir.Program) -> None:
    """BMv2 extracts, emits and copies (assign_VL) a varbit field; the IR's varbit is a length and bits,
    not a number, so any other use (a hash, a table key, a digest, arithmetic) is refused, named where."""

    def walk(node: Any, at: str) -> None:
        at = getattr(node, "src", "") or at
        if isinstance(node, ir.Assign) and isinstance(node.lhs.type, ir.TVarbit):
            if node.lhs.type == node.rhs.type:
                return
        if isinstance(node, ir.Expr) and isinstance(node.type, ir.TVarbit):
            raise Unsupported(at, "a varbit field used other than extracted, emitted or copied (assign_VL)")
        for child in ir.children(node):
            walk(child, at)

    for kind, roots in (
        ("actions", program.actions),
        ("tables", program.tables),
        ("parsers", program.parsers),
        ("controls", program.controls),
    ):
        for root in roots:
            walk(root, f"{kind} ({root.name})")


def _without_src(a: ir.Action) -> Any:
    """An action's JSON without source positions: two copies p4c made of one action compare equal."""

    def strip(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if k != "src"}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    return strip(ir.node_to_json(a))
