"""BMv2 parsers, deparsers and checksums as IR blocks.

BMv2 extracts into a header stack at its run-time next index; the IR has constant indices only, so the
parser is unrolled as p4c's own parser unroller does: each state is made once per reachable set of
stack positions (``state@1`` when a stack has one element extracted), and a state that would extract
past the end of a stack fails with ``StackOutOfBounds``. Transition values are BMv2's byte-padded
concatenation of the keys, split back per key.

A ``parse_vset`` transition matches the whole transition key against the members of a value set
(BMv2's ParseSwitchCaseVSet): the IR value set gets one field per key, in key order, which is how p4c's
P4Info lists a value set's match fields (one for ``bit<W>``, one per member of a struct type)."""

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
UNBOUNDED = (1 << 31) - 1
"""The size of a value set BMv2 JSON gives no ``max_size``: BMv2 bounds none (P4Info's sizes are int32)."""


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
        self.declared_sets = {str(v["name"]): v for v in prims.layout.doc.get("parse_vsets", [])}
        self.set_keys: dict[str, tuple[int, ...]] = {}  # value set -> the widths of the keys it matches

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
        if kind in ("extract", "extract_VL"):
            length = None
            if kind == "extract_VL":
                if len(params) != 2:
                    raise BMv2JsonError(path, "extract_VL takes a header and the length of its varbit")
                length = self.exprs.to_type(self.exprs.expr(params[1], ctx, path), ir.TBit(32))
            target = self.extract_target(params[0], ctx, path, op)
            if target is None:  # past the end of a stack
                body.append(ir.Verify(ir.Const(False, BOOL), "StackOutOfBounds", src))
                return False
            body.append(ir.Extract(target, src, self.varbit_length(target, length, path, op)))
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

    def extract_target(self, p: dict[str, Any], ctx: Context, path: str, op: Any) -> ir.Expr | None:
        """The header an extract fills (a stack's or union stack's next element, which it advances);
        None past the end of the stack."""
        kind = p.get("type")
        if kind == "regular":
            return self.layout.instance(p["value"], path)
        assert ctx.stack_next is not None
        if kind == "stack":
            stack = str(p["value"])
            index = ctx.stack_next[stack]
            elem = self.layout.stack(stack, path)
            assert isinstance(elem.type, ir.TStack)
            if index >= elem.type.size:
                return None
            ctx.stack_next[stack] = index + 1
            return ir.Index(elem, index, ir.THeader(elem.type.elem))
        if kind == "union_stack":  # member value[1] of the next element of union stack value[0]
            stack, member = str(p["value"][0]), str(p["value"][1])
            index = ctx.stack_next[stack]
            elements = self.union_stacks[stack]
            if index >= len(elements):
                return None
            if member not in elements[index]:
                raise BMv2JsonError(path, f"union stack {stack} has no member {member!r}")
            ctx.stack_next[stack] = index + 1
            return self.layout.instance(elements[index][member], path)
        raise Unsupported(where(op, path), f"extract to a {kind}")

    def varbit_length(self, header: ir.Expr, length: ir.Expr | None, path: str, op: Any) -> ir.Expr | None:
        """The length extract_VL gives a header with a varbit field; a plain extract of such a header
        would take it from the type's ``length_exp`` (P4_14), which p4switch does not evaluate."""
        assert isinstance(header.type, ir.THeader)
        varbit = any(f.varbit for f in self.layout.headers[header.type.name].fields)
        if varbit and length is None:
            raise Unsupported(where(op, path), "extract of a header with a varbit field by its length_exp")
        if length is not None and not varbit:
            raise BMv2JsonError(path, "extract_VL of a header without a variable-length field")
        return length

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
            elif kind == "parse_vset":
                keysets = (self.value_set_case(case, tuple(widths), where(s, path)),)
            else:
                raise Unsupported(where(s, path), f"transition {kind}")
            out.append(ir.SelectCase(keysets, goto(case.get("next_state"))))
        return ir.Select(tuple(keys), tuple(out))

    def value_set_case(self, case: dict[str, Any], widths: tuple[int, ...], path: str) -> ir.Keyset:
        """A ``parse_vset`` transition: the value set matched against all the keys (``widths``)."""
        name = str(case.get("value"))
        declared = self.declared_sets.get(name)
        if declared is None:
            raise BMv2JsonError(path, f"unknown parse_vset {name!r}")
        bits = int(declared["compressed_bitwidth"])
        if bits != sum(widths):
            raise BMv2JsonError(path, f"parse_vset {name} holds {bits}-bit values, the key has {sum(widths)}")
        if case.get("mask") is not None:  # BMv2 masks each member and the key; all ones masks nothing
            full = (1 << bits) - 1
            if hexstr(case["mask"], path) & full != full:
                raise Unsupported(path, "a value set transition with a mask")
        if self.set_keys.setdefault(name, widths) != widths:
            raise Unsupported(path, f"value set {name} matched against keys of different widths")
        return ir.KeysetValueSet(name)

    def value_sets(self) -> tuple[ir.ValueSet, ...]:
        """The ``parse_vsets`` section: one IR value set each, its fields the keys it is matched against
        (one field of its whole width when no transition uses it)."""
        out = []
        for name, v in self.declared_sets.items():
            bits = int(v["compressed_bitwidth"])
            size = int(v.get("max_size", UNBOUNDED))  # p4c writes it; BMv2 itself sets no bound
            out.append(ir.ValueSet(name, size, self.set_keys.get(name, (bits,)), source_position(v)))
        return tuple(out)


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
