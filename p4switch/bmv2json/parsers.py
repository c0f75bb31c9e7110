"""BMv2 parsers, deparsers and checksums as IR blocks.

BMv2 extracts into a header stack at its run-time next index; the IR has constant indices only, so the
parser is unrolled as p4c's own parser unroller does: each state is made once per reachable set of
stack positions (``state@1`` when a stack has one element extracted), and a state that would extract
past the end of a stack fails with ``StackOutOfBounds``. Transition values are BMv2's byte-padded
concatenation of the keys, split back per key."""

from __future__ import annotations

from collections import deque
from typing import Any

from p4switch import ir
from p4switch.bmv2json import unions
from p4switch.bmv2json.errors import BMv2JsonError, Unsupported, source_position, where
from p4switch.bmv2json.expressions import BOOL, Context, Expressions, hexstr
from p4switch.bmv2json.layout import HDR, HEADERS, META, METADATA, SM, SM_TYPE
from p4switch.bmv2json.primitives import Primitives

Positions = tuple[int, ...]


def block_params(packet: ir.Type | None) -> tuple[ir.Param, ...]:
    """A v1model block's parameters: (packet,) hdr, meta, standard_metadata."""
    params = [ir.Param("packet", "none", packet)] if packet is not None else []
    return (
        *params,
        ir.Param(HDR, "inout", ir.TStruct(HEADERS)),
        ir.Param(META, "inout", ir.TStruct(METADATA)),
        ir.Param(SM, "inout", ir.TStruct(SM_TYPE)),
    )


class ParserBuilder:
    """One BMv2 parser as an IR parser."""

    def __init__(self, parser: dict[str, Any], prims: Primitives, errors: list[str]) -> None:
        self.parser = parser
        self.prims = prims
        self.exprs: Expressions = prims.exprs
        self.layout = prims.layout
        self.errors = errors
        self.states = {s["name"]: s for s in parser.get("parse_states", [])}
        self.union_stacks = unions.stacks(prims.layout.doc)
        self.stacks = sorted(self.layout.stacks) + sorted(self.union_stacks)
        self.path = f"parsers ({parser.get('name')})"

    def build(self, name: str) -> ir.Parser:
        init = self.parser.get("init_state")
        if init not in self.states:
            raise BMv2JsonError(self.path, f"init_state {init!r} is not a parse state")
        start: Positions = tuple(0 for _ in self.stacks)
        names = {(str(init), start): "start"}
        todo = deque([(str(init), start)])
        seen = set(todo)
        out: list[ir.ParserState] = []
        while todo:
            state, positions = todo.popleft()
            built, targets = self.state(state, positions, names)
            out.append(built)
            for target in targets:
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
        return ir.Parser(name, source_position(self.parser), block_params(ir.TPacketIn()), (), tuple(out))

    def state_name(self, state: str, positions: Positions) -> str:
        name = state if state not in ("start", "accept", "reject") else f"{state}_"
        if any(positions):
            name += "@" + ",".join(str(p) for p in positions)
        return name

    def state(
        self, state: str, positions: Positions, names: dict[tuple[str, Positions], str]
    ) -> tuple[ir.ParserState, list[tuple[str, Positions]]]:
        """The IR state for ``state`` entered with ``positions``, and the (state, positions) it reaches."""
        s = self.states[state]
        path = f"{self.path}.parse_states ({state})"
        src = source_position(s)
        next_index = dict(zip(self.stacks, positions, strict=True))
        ctx = Context(stack_next=next_index)
        body: list[ir.Stmt] = []
        for i, op in enumerate(s.get("parser_ops", [])):
            at = f"{path}.parser_ops[{i}]"
            done = self.op(op, ctx, at, body)
            body[:] = self.prims.finish(body)
            if not done:  # past the end of a stack
                return ir.ParserState(names[(state, positions)], src, tuple(body), ir.Goto("reject")), []
        after = tuple(next_index[n] for n in self.stacks)
        targets: list[tuple[str, Positions]] = []

        def goto(next_state: Any) -> str:
            if next_state is None:
                return "accept"
            if next_state not in self.states:
                raise BMv2JsonError(path, f"unknown next_state {next_state!r}")
            target = (str(next_state), after)
            targets.append(target)
            return names.get(target) or names.setdefault(target, self.state_name(*target))

        transition = self.transition(s, ctx, path, goto)
        return ir.ParserState(names[(state, positions)], src, tuple(body), transition), targets

    def op(self, op: dict[str, Any], ctx: Context, path: str, body: list[ir.Stmt]) -> bool:
        """Appends one parser op to ``body``; False when it extracts past the end of a stack."""
        kind = op.get("op")
        params = op.get("parameters") or []
        src = source_position(op)
        if kind == "extract":
            p = params[0]
            if p.get("type") == "regular":
                body.append(ir.Extract(self.layout.instance(p["value"], path), src))
            elif p.get("type") == "stack":
                stack = str(p["value"])
                assert ctx.stack_next is not None
                index = ctx.stack_next[stack]
                elem = self.layout.stack(stack, path)
                assert isinstance(elem.type, ir.TStack)
                if index >= elem.type.size:
                    body.append(ir.Verify(ir.Const(False, BOOL), "StackOutOfBounds", src))
                    return False
                body.append(ir.Extract(ir.Index(elem, index, ir.THeader(elem.type.elem)), src))
                ctx.stack_next[stack] = index + 1
            elif p.get("type") == "union_stack":
                return self.extract_union(p["value"], ctx, path, src, body)
            else:
                raise Unsupported(where(op, path), f"extract to a {p.get('type')}")
        elif kind == "extract_VL":
            raise Unsupported(where(op, path), "varbit")
        elif kind == "set":
            dst = self.exprs.expr(params[0], ctx, path)
            value = self.exprs.expr(params[1], ctx, path)
            body.append(ir.Assign(dst, self.exprs.to_type(value, dst.type), src))
        elif kind == "verify":
            cond = self.exprs.boolean(self.exprs.expr(params[0], ctx, path))
            body.append(ir.Verify(cond, self.error_name(params[1], ctx, path), src))
        elif kind == "shift":
            body.append(ir.Advance(ir.Const(8 * hexstr(params[0]["value"], path), self.exprs.wide), src))
        elif kind == "advance":
            body.append(ir.Advance(self.exprs.data(self.exprs.expr(params[0], ctx, path)), src))
        elif kind == "primitive":
            body += self.prims.call(params[0], ctx, path)
        else:
            raise Unsupported(where(op, path), f"parser op {kind}")
        return True

    def extract_union(self, value: list[str], ctx: Context, path: str, src: str, body: list[ir.Stmt]) -> bool:
        """Extract member ``value[1]`` of the next element of union stack ``value[0]``."""
        stack, member = str(value[0]), str(value[1])
        assert ctx.stack_next is not None
        index = ctx.stack_next[stack]
        elements = self.union_stacks[stack]
        if index >= len(elements):
            body.append(ir.Verify(ir.Const(False, BOOL), "StackOutOfBounds", src))
            return False
        if member not in elements[index]:
            raise BMv2JsonError(path, f"union stack {stack} has no member {member!r}")
        body.append(ir.Extract(self.layout.instance(elements[index][member], path), src))
        ctx.stack_next[stack] = index + 1
        return True

    def error_name(self, v: Any, ctx: Context, path: str) -> str:
        e = self.exprs.expr(v, ctx, path)
        if not isinstance(e, ir.Const) or not isinstance(e.value, int):
            raise Unsupported(path, "verify with an error that is not a constant")
        if not 0 <= e.value < len(self.errors):
            raise BMv2JsonError(path, f"no error with value {e.value}")
        return self.errors[e.value]

    def transition(self, s: dict[str, Any], ctx: Context, path: str, goto: Any) -> ir.Transition:
        cases = s.get("transitions", [])
        keys = [self.exprs.expr(k, ctx, path) for k in s.get("transition_key", [])]
        if not keys:
            first = cases[0] if cases else {"next_state": None}
            return ir.Goto(goto(first.get("next_state")))
        widths = [ir.width(k.type) for k in keys]
        out = []
        for case in cases:
            kind = case.get("type")
            if kind == "default":
                keysets: tuple[ir.Keyset, ...] = tuple(ir.KeysetDefault() for _ in keys)
            elif kind == "hexstr":
                values = split(hexstr(case["value"], path), widths)
                masks = split(hexstr(case["mask"], path), widths) if case.get("mask") else None
                keysets = tuple(
                    keyset(v, None if masks is None else masks[i], widths[i]) for i, v in enumerate(values)
                )
            else:
                raise Unsupported(
                    where(s, path), "value set" if kind == "parse_vset" else f"transition {kind}"
                )
            out.append(ir.SelectCase(keysets, goto(case.get("next_state"))))
        return ir.Select(tuple(keys), tuple(out))


def split(value: int, widths: list[int]) -> list[int]:
    """A byte-padded concatenation of one value per key, split back (first key first)."""
    out = []
    for w in reversed(widths):
        nbits = 8 * ((w + 7) // 8)
        out.append(value & ((1 << nbits) - 1) & ((1 << w) - 1))
        value >>= nbits
    return out[::-1]


def keyset(value: int, mask: int | None, width: int) -> ir.Keyset:
    full = (1 << width) - 1
    if mask is None or mask & full == full:
        return ir.KeysetExact(value)
    if mask & full == 0:
        return ir.KeysetDefault()
    return ir.KeysetMask(value & mask, mask & full)


def deparser(dep: dict[str, Any], layout: Any, name: str) -> ir.Control:
    path = f"deparsers ({dep.get('name')})"
    body = tuple(ir.Emit(layout.instance(h, path), source_position(dep)) for h in dep.get("order", []))
    params = (ir.Param("packet", "none", ir.TPacketOut()), ir.Param(HDR, "in", ir.TStruct(HEADERS)))
    return ir.Control(name, source_position(dep), params, (), body)


def checksum_controls(doc: dict[str, Any], prims: Primitives) -> tuple[ir.Control, ir.Control]:
    """The verify_checksum and compute_checksum controls of BMv2's ``checksums``."""
    verify: list[ir.Stmt] = []
    update: list[ir.Stmt] = []
    for i, c in enumerate(doc.get("checksums", [])):
        path = f"checksums[{i}] ({c.get('name')})"
        calc = prims.calculation(str(c.get("calculation")), path)
        data, payload = prims.calculation_data(calc, path)
        target = prims.exprs.expr({"type": "field", "value": c["target"]}, Context(), path)
        cond: ir.Expr = ir.Const(True, BOOL)
        if c.get("if_cond") is not None:
            cond = prims.exprs.boolean(prims.exprs.expr(c["if_cond"], Context(), path))
        suffix = "_with_payload" if payload else ""
        src = source_position(c)
        algo = str(calc.get("algo"))
        if c.get("verify", True):
            verify.append(
                ir.Call("verify_checksum" + suffix, algorithm=algo, args=(cond, target), data=data, src=src)
            )
        if c.get("update", True):
            update.append(
                ir.Call("update_checksum" + suffix, algorithm=algo, args=(cond, target), data=data, src=src)
            )
    return (
        ir.Control("verify_checksum", "", block_params(None), (), tuple(verify)),
        ir.Control("compute_checksum", "", block_params(None), (), tuple(update)),
    )
