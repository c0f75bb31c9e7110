"""The parsers part: parser blocks, their states, transitions and packet_in methods.

States are lowered once per reachable header-stack position, as p4c's parser unroller does, so that
`.next`, `.last` and `.lastIndex` become constant indices; a state that would go past the end of a stack
rejects with error.StackOutOfBounds. `lookahead<h_t>().f` becomes a slice of a lookahead of h_t's bits.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from lark import Tree

from p4switch import ir
from p4switch.frontend.errors import Pos, type_error, unsupported
from p4switch.frontend.scope import Ctx, Part, Sym
from p4switch.frontend.source import Node, PTree, kids
from p4switch.frontend.types import BOOL, Type, Value, bit, const, member


class _StackOutOfBounds(Exception):
    """`.next`/`.last` beyond the stack in an unrolled parser state: the state rejects there."""


_Key = tuple[int, str, int, tuple[tuple[str, int], ...]]
"""A state as unrolled: (frame, state name, first statement, header-stack positions)."""


@dataclass(frozen=True)
class _Return:
    """Where a sub-parser's accept goes on: statement `index` of `state` of frame `frame`."""

    frame: int
    state: str
    index: int


@dataclass
class _Frame:
    """A parser being unrolled (the top parser, or one application of a sub-parser): its states, the
    scopes and name prefix they are lowered with, the prefix of their labels, where its accept returns
    (None: the top parser's accept), and the scope of each state interrupted by an apply."""

    trees: dict[str, PTree]
    scopes: list[dict[str, Sym]]
    prefix: str
    label: str
    ret: _Return | None
    locals: dict[tuple[str, int], dict[str, Sym]] = field(default_factory=dict)


class Parsers(Part):
    """Lowers parser blocks; `lower_parser(decl)` is the parsers pass for one parser."""

    def lower_parser(self, decl: PTree) -> ir.Parser:
        """The parsers pass for one parser: its local declarations run first in the start state."""
        ctx = self.fe.stmts.new_ctx(decl, "parser")
        body, frame = self.enter(decl, ctx, "", None)
        out_states = self.unroll_states(frame, ctx)
        if body:
            out_states[0] = replace(out_states[0], body=tuple(body) + out_states[0].body)
        return ir.Parser(ctx.block, self.src(decl), tuple(ctx.params), tuple(ctx.locals), tuple(out_states))

    def enter(self, decl: PTree, ctx: Ctx, label: str, ret: _Return | None) -> tuple[list[ir.Stmt], _Frame]:
        """A parser's states to run with ctx's scopes and prefix (its parameters bound there), and its
        local declarations lowered as the statements it starts with."""
        states = [c for c in decl.children[2:] if isinstance(c, Tree) and c.data == "parser_state"]
        body: list[ir.Stmt] = []
        for c in decl.children[2:]:
            if isinstance(c, Tree) and c.data != "parser_state":
                body.extend(self.fe.stmts.local_decl(c, ctx))
        trees = {self.name(s.children[1]): s for s in states}
        if "start" not in trees:
            raise type_error(
                self.pos(decl), f"parser {self.name(decl.children[0].children[1])} has no start state"
            )
        return body, _Frame(trees, list(ctx.scopes), ctx.prefix, label, ret)

    def unroll_states(self, top: _Frame, ctx: Ctx) -> list[ir.ParserState]:
        """Lower the states reachable from start, one copy per header-stack position (as p4c's unroller).

        `.next`, `.last` and `.lastIndex` then become constant indices: a state reached with stack
        positions other than all-zero is named `state@i` (one number per stack in use). A sub-parser
        applied in a state (`p.apply(...)`) ends that state: its states follow, named `p.state`, and its
        accept goes on with the rest of the calling state (`state~i`, i the statement after the apply).
        """
        frames = [top]
        labels: dict[_Key, str] = {}
        queue: list[_Key] = []

        def label(frame: int, name: str, index: int, positions: dict[str, int]) -> str:
            ret = frames[frame].ret
            if name == "accept" and ret is not None:  # a sub-parser's accept: the rest of its caller
                return label(ret.frame, ret.state, ret.index, positions)
            if name in ("accept", "reject"):
                return name
            key = (frame, name, index, tuple(sorted((k, v) for k, v in positions.items() if v)))
            if key not in labels:
                text = frames[frame].label + name + (f"~{index}" if index else "")
                text += "".join(f"@{v}" for _, v in key[3])
                while text in labels.values():
                    text += "'"
                labels[key] = text
                queue.append(key)
            return labels[key]

        def apply(
            sym: Sym, args: list[Value], nodes: list[Node], pos: Pos, at: _Key
        ) -> tuple[list[ir.Stmt], str]:
            """A sub-parser applied at statement `at[2] - 1` of a state: what starts it, and its start."""
            assert sym.tree is not None
            frames[at[0]].locals[(at[1], at[2])] = ctx.scopes[-1]  # for the rest of the calling state
            stmts, scope = self.fe.inliner.bind_block(sym, args, nodes, pos, ctx)
            saved = ctx.scopes, ctx.prefix
            ctx.scopes, ctx.prefix = [self.fe.decls.globals, sym.ctor or {}, scope], sym.qname
            try:
                body, frame = self.enter(sym.tree, ctx, sym.qname.rsplit(".", 1)[-1] + ".", _Return(*at[:3]))
            finally:
                ctx.scopes, ctx.prefix = saved
            frames.append(frame)
            return stmts + body, label(len(frames) - 1, "start", 0, ctx.stack_next or {})

        def goto(frame: int, name: str) -> str:
            return label(frame, name, 0, ctx.stack_next or {})

        label(0, "start", 0, {})
        out: list[ir.ParserState] = []
        while queue:
            key = queue.pop(0)
            frame = frames[key[0]]
            if len(out) > 1000:
                raise unsupported(
                    self.pos(frame.trees[key[1]]), "a parser that unrolls to more than 1000 states"
                )
            ctx.stack_next = dict(key[3])
            saved = ctx.scopes, ctx.prefix
            ctx.scopes, ctx.prefix = (
                list(frame.scopes) + [frame.locals.get((key[1], key[2]), {})],
                frame.prefix,
            )
            try:
                state = self.lower_state(
                    frame.trees[key[1]],
                    key,
                    ctx,
                    set(frame.trees),
                    functools.partial(goto, key[0]),
                    apply,
                )
            finally:
                ctx.scopes, ctx.prefix = saved
            out.append(replace(state, name=labels[key]))
        ctx.stack_next = None
        return out

    def lower_state(
        self,
        state: PTree,
        key: _Key,
        ctx: Ctx,
        names: set[str],
        goto: Callable[[str], str],
        apply: Callable[[Sym, list[Value], list[Node], Pos, _Key], tuple[list[ir.Stmt], str]],
    ) -> ir.ParserState:
        """One state from its statement `key[2]` on (the scope ctx.scopes[-1] its locals so far)."""
        body: list[ir.Stmt] = []
        src = self.src(state)
        transition: ir.Transition
        statements = state.children[2:-1]
        try:
            for i in range(key[2], len(statements)):
                applied = self.applied_parser(statements[i], ctx)
                if applied is not None:  # the rest of this state runs when the sub-parser accepts
                    ctx.pre = []
                    sub, nodes = applied
                    args = self.fe.effects.operands(nodes, ctx)
                    stmts, start = apply(
                        sub, args, nodes, self.pos(statements[i]), (key[0], key[1], i + 1, key[3])
                    )
                    body += ctx.pre + stmts
                    ctx.pre = None
                    return ir.ParserState(self.name(state.children[1]), src, tuple(body), ir.Goto(start))
                body.extend(self.fe.stmts.stmt(statements[i], ctx))
            tr = state.children[-1]
            if tr is None:  # no transition statement: P4_16 says reject (p4c warns and accepts it)
                transition = ir.Goto("reject")
            elif tr.data == "goto_transition":
                transition = ir.Goto(goto(self.state_name(tr.children[0], names)))
            else:
                ctx.pre = []
                select = self.lower_select(tr.children[0], ctx, names)
                body.extend(ctx.pre)
                ctx.pre = None
                cases = [ir.SelectCase(case.keysets, goto(case.next)) for case in select.cases]
                transition = ir.Select(select.keys, tuple(cases))
        except _StackOutOfBounds:
            body.append(ir.Verify(const(False, BOOL).expr, "StackOutOfBounds", src))
            transition = ir.Goto("reject")
        return ir.ParserState(self.name(state.children[1]), src, tuple(body), transition)

    def applied_parser(self, node: PTree, ctx: Ctx) -> tuple[Sym, list[Node]] | None:
        """The parser instance a statement `p.apply(...);` applies, if it is one, and its arguments in
        parameter order (named ones placed, left-out ones by their default)."""
        if node.data != "call_stmt":
            return None
        callee = self.fe.exprs.expr(node.children[0], ctx)
        base = callee.extra.get("base")
        if callee.t.k != "method" or callee.extra.get("method") != "apply" or base is None:
            return None
        sym = base.extra.get("sym") if base.t.k == "subcontrol" else None
        if sym is None or sym.tree is None or sym.tree.data != "parser_decl":
            return None
        return sym, self.fe.calls.positional(callee, kids(node.children[2]), self.pos(node))

    def state_name(self, node: Node, names: set[str]) -> str:
        name = self.name(node)
        if name not in names and name not in ("accept", "reject"):
            raise type_error(self.pos(node), f"unknown parser state {name}")
        return name

    def lower_select(self, sel: PTree, ctx: Ctx, names: set[str]) -> ir.Select:
        keys = [self.fe.exprs.expr(k, ctx) for k in kids(sel.children[0])]
        for k, node in zip(keys, kids(sel.children[0]), strict=True):
            if not (k.t.is_bits or k.t.k == "bool"):
                raise type_error(self.pos(node), f"select key of type {k.t}")
        cases = []
        for case in sel.children[1:]:
            ks = case.children[0]
            elems = kids(ks) if ks.data == "tuple_keyset" else [ks]
            if len(elems) == 1 and elems[0].data == "ks_default":
                elems = elems * len(keys)
            keysets: list[ir.Keyset] = []
            at = 0  # the key the next element matches
            for e in elems:
                vs = self.value_set_of(e, ctx)
                if vs is None:
                    keysets.append(self.keyset(e, keys[at].t if at < len(keys) else BOOL, ctx))
                    at += 1
                    continue
                covered = keys[at : at + len(vs.widths)]
                if [k.t.w if k.t.is_bits else -1 for k in covered] != list(vs.widths):
                    raise type_error(self.pos(e), f"value set {vs.name} does not match the select's keys")
                keysets.append(ir.KeysetValueSet(vs.name))
                at += len(vs.widths)
            if at != len(keys):
                raise type_error(self.pos(ks), f"keyset has {at} elements, select has {len(keys)} keys")
            cases.append(ir.SelectCase(tuple(keysets), self.state_name(case.children[1], names)))
        return ir.Select(tuple(k.expr for k in keys), tuple(cases))

    def value_set_of(self, node: PTree, ctx: Ctx) -> ir.ValueSet | None:
        """The value set a keyset element names, if it is one."""
        if node.data != "ks_exact":
            return None
        v = self.fe.exprs.expr(node.children[0], ctx)
        if v.t.k != "value_set":
            return None
        inst = self.fe.v1.extern_by_name[v.t.name]
        assert isinstance(inst, ir.ValueSet)
        return inst

    def keyset(self, node: PTree, t: Type, ctx: Ctx) -> ir.Keyset:
        def value(n: Node) -> int:
            v = self.fe.exprs.coerce(self.fe.exprs.expr(n, ctx), t, n)  # constants of the parser too
            if v.const is None:
                raise unsupported(self.pos(n), "non-constant keyset (value_set)")
            return int(v.const)

        if node.data == "ks_default":
            return ir.KeysetDefault()
        if node.data == "ks_mask":
            mask = value(node.children[1])
            return ir.KeysetMask(value(node.children[0]) & mask, mask)
        if node.data == "ks_range":
            return ir.KeysetRange(value(node.children[0]), value(node.children[1]))
        return ir.KeysetExact(value(node.children[0]))

    def packet_in_call(
        self, method: str, args: list[Value], targs: list[Type], nodes: list[Node], node: PTree, ctx: Ctx
    ) -> tuple[list[ir.Stmt], Value | None]:
        pos = self.pos(node)
        if ctx.kind != "parser":
            raise type_error(pos, f"packet.{method} is only available in a parser")
        if method == "extract":
            return self.extract(args, nodes, pos, ctx), None
        if method == "advance":
            self.fe.calls.arity(args, 1, pos, method)
            bits = self.fe.exprs.coerce(args[0], bit(32), nodes[0])
            return [ir.Advance(bits.expr, str(pos))], None
        if method == "lookahead":
            if len(targs) == 1 and targs[0].k == "header":
                # only its fields are used (`lookahead<h_t>().f`): member_of slices a bit lookahead
                return [], Value(None, Type("lookahead_header", name=targs[0].name))
            if len(targs) == 1 and targs[0].k in ("struct", "stack"):
                return self.lookahead_value(targs[0], ctx, pos)
            if len(targs) != 1 or not targs[0].is_bits:
                raise unsupported(
                    pos, "lookahead of anything but bit<W>/int<W>, a struct or a header's fields"
                )
            return [], Value(ir.Lookahead(targs[0].to_ir()), targs[0])
        raise unsupported(pos, f"packet_in.{method}")

    def lookahead_value(self, t: Type, ctx: Ctx, pos: Pos) -> tuple[list[ir.Stmt], Value]:
        """`lookahead<T>()` of a struct (or stack): a fresh local of type T whose headers are valid and
        whose fields are the next bits of the packet, in order (nothing is consumed)."""
        var = ir.Var(ctx.add_local("lookahead", t, pos), t.to_ir())
        leaves: list[tuple[ir.Expr, int]] = []
        valid: list[ir.Stmt] = []
        self.leaves(var, t, leaves, valid, pos)
        total = sum(w for _, w in leaves)
        bits = ir.Lookahead(ir.TBit(total))
        stmts: list[ir.Stmt] = list(valid)
        hi = total - 1
        for leaf, w in leaves:
            value: ir.Expr = ir.Slice(bits, hi, hi - w + 1, ir.TBit(w))
            if not isinstance(leaf.type, ir.TBit):
                value = ir.Cast(value, leaf.type)
            stmts.append(ir.Assign(leaf, value, str(pos)))
            hi -= w
        if ctx.pre is None:
            raise unsupported(pos, "lookahead of a struct outside a statement")
        ctx.pre.extend(stmts)
        return [], Value(var, t)

    def leaves(
        self, e: ir.Expr, t: Type, out: list[tuple[ir.Expr, int]], valid: list[ir.Stmt], pos: Pos
    ) -> None:
        """The bit fields of a value of type t, in packet order; `valid` gets a setValid per header."""
        if t.k == "header":
            valid.append(ir.SetValid(e, str(pos)))
            for f in self.fe.decls.headers[t.name].fields:
                if f.varbit:
                    raise unsupported(pos, "lookahead of a header with a varbit field")
                out.append((ir.Member(e, f.name, ir.TInt(f.w) if f.signed else ir.TBit(f.w)), f.w))
        elif t.k == "struct":
            for fname, ft in self.fe.decls.members(t):
                self.leaves(member(e, fname, ft.to_ir()), ft, out, valid, pos)
        elif t.k == "stack":
            for i in range(t.size):
                self.leaves(ir.Index(e, i, t.elem.to_ir()), t.elem, out, valid, pos)
        elif t.is_bits or t.k == "bool":
            out.append((e, t.w if t.is_bits else 1))
        else:
            raise unsupported(pos, f"lookahead of {t}")

    def extract(self, args: list[Value], nodes: list[Node], pos: Pos, ctx: Ctx) -> list[ir.Stmt]:
        """`extract(h)`, or `extract(h, bits)` of a header with a varbit field (`bits` its length)."""
        if len(args) not in (1, 2):
            self.fe.calls.arity(args, 1, pos, "extract")
        h = args[0]
        if h.t.k != "header" or not h.lv:
            raise type_error(self.pos(nodes[0]), f"extract needs a header lvalue, got {h.t}")
        varbit = any(f.varbit for f in self.fe.decls.headers[h.t.name].fields)
        if varbit != (len(args) == 2):
            what = (
                "needs the length of its varbit field" if varbit else "has no varbit field to give a length"
            )
            raise type_error(pos, f"extract: {h.t} {what}")
        length = self.fe.exprs.coerce(args[1], bit(32), nodes[1]).expr if varbit else None
        if "stack_key" in h.extra and ctx.stack_next is not None:  # extract(s.next) advances s
            ctx.stack_next[h.extra["stack_key"]] = ctx.stack_next.get(h.extra["stack_key"], 0) + 1
        return [ir.Extract(h.expr, str(pos), length), *self.fe.stmts.made_valid(h.expr, str(pos))]

    def stack_position(self, stack: Value, member: str, node: PTree, ctx: Ctx | None) -> Value:
        """`.next`/`.last`/`.lastIndex` in an unrolled parser state: constant positions in the stack."""
        if ctx is None or ctx.stack_next is None:
            raise unsupported(self.pos(node.children[1]), f"header stack .{member} outside a parser")
        key = json.dumps(ir.node_to_json(stack.expr), sort_keys=True)
        nxt = ctx.stack_next.get(key, 0)
        if member == "lastIndex":
            return const(nxt - 1, bit(32))
        index = nxt if member == "next" else nxt - 1
        if not 0 <= index < stack.t.size:
            raise _StackOutOfBounds()
        ht = stack.t.elem
        elem = ir.Index(stack.expr, index, ht.to_ir())
        return Value(elem, ht, lv=stack.lv, extra={"stack_key": key} if member == "next" else {})

    def lookahead_field(self, header: str, member: str, node: PTree) -> Value:
        """`pkt.lookahead<h_t>().f` as a slice of a lookahead of the whole header's bits."""
        h = self.fe.decls.headers[header]
        offset = 0
        for f in h.fields:
            if f.name == member:
                whole = ir.Lookahead(ir.TBit(h.bits))
                hi = h.bits - 1 - offset
                t = Type("int" if f.signed else "bit", f.w)
                sliced = ir.Slice(whole, hi, hi - f.w + 1, ir.TBit(f.w))
                return Value(sliced if t.k == "bit" else ir.Cast(sliced, t.to_ir()), t)
            offset += f.w
        raise type_error(self.pos(node.children[1]), f"header {header} has no field {member}")
