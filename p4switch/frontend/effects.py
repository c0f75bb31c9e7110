"""The side-effects part: expressions evaluate in P4's order.

A function call inside an expression runs as statements queued in ctx.pre before the statement that uses
its value. These helpers keep P4's order: operands are read left to right (a value read before a later
operand's call is copied first), and `&&`, `||`, `?:` run only the calls of the operands they evaluate.
"""

from __future__ import annotations

from dataclasses import replace

from p4switch import ir
from p4switch.frontend.scope import Ctx, Part
from p4switch.frontend.source import Node, PTree
from p4switch.frontend.types import BOOL, Value, const, from_ir


class Effects(Part):
    """Orders the calls inside expressions; `operands(nodes, ctx)` evaluates operands left to right."""

    def pre_mark(self, ctx: Ctx | None) -> int:
        return len(ctx.pre) if ctx is not None and ctx.pre is not None else 0

    def take_pre(self, ctx: Ctx | None, mark: int) -> list[ir.Stmt]:
        """The statements queued since `mark`, removed from ctx.pre (to run them conditionally)."""
        if ctx is None or ctx.pre is None:
            return []
        taken = ctx.pre[mark:]
        del ctx.pre[mark:]
        return taken

    def operands(self, nodes: list[Node], ctx: Ctx | None) -> list[Value]:
        """Evaluate left to right; a value a later operand's call could change is read into a temporary."""
        values: list[Value] = []
        ends: list[int] = []
        for n in nodes:
            values.append(self.fe.exprs.expr(n, ctx))
            ends.append(self.pre_mark(ctx))
        for i in range(len(values) - 2, -1, -1):
            if ends[-1] > ends[i]:
                values[i] = self.spill(values[i], ends[i], ctx, nodes[i])
        return values

    def spill(self, v: Value, at: int, ctx: Ctx | None, node: Node) -> Value:
        """Copy a run-time value to a fresh local by a statement inserted at ctx.pre[at]."""
        if ctx is None or ctx.pre is None or v.const is not None or v.node is None:
            return v
        if v.t.k not in ("bit", "int", "bool", "header", "struct", "error", "enum"):
            return v
        ref = ir.Var(ctx.add_local("tmp", v.t, self.pos(node)), v.t.to_ir())
        ctx.pre[at:at] = self.fe.stmts.store(ref, v.expr, self.src(node))
        return Value(ref, v.t, extra={"lvalue": v} if v.lv else {})

    def pin_place(self, v: Value, ctx: Ctx, node: Node) -> tuple[list[ir.Stmt], Value]:
        """The statements that read the run-time stack indices of lvalue `v` into fresh locals, and `v`
        naming them: the place an out/inout argument or an alias names is fixed when the call starts."""
        pre: list[ir.Stmt] = []

        def pin(e: ir.Expr) -> ir.Expr:
            if isinstance(e, ir.DynIndex):
                index = e.index
                if not isinstance(index, ir.Const):
                    t = from_ir(index.type)
                    index = ir.Var(ctx.add_local("index", t, self.pos(node)), index.type)
                    pre.append(ir.Assign(index, e.index, self.src(node)))
                return replace(e, expr=pin(e.expr), index=index)
            if isinstance(e, ir.Member | ir.Index | ir.Slice):
                return replace(e, expr=pin(e.expr))
            return e

        if v.node is None or not v.lv:
            return [], v
        return pre, replace(v, node=pin(v.node))

    def short_circuit(self, node: PTree, ctx: Ctx | None, op: str) -> Value:
        """`a && b`, `a || b`: b (and the calls in it) is evaluated only when a does not decide."""
        exprs = self.fe.exprs
        a = exprs.coerce(exprs.expr(node.children[0], ctx), BOOL, node.children[0])
        mark = self.pre_mark(ctx)
        b = exprs.coerce(exprs.expr(node.children[-1], ctx), BOOL, node.children[-1])
        b_pre = self.take_pre(ctx, mark)
        if a.const is not None:
            if bool(a.const) == (op == "||"):
                return const(bool(a.const), BOOL)
            if ctx is not None and ctx.pre is not None:
                ctx.pre.extend(b_pre)
            return b
        if not b_pre:
            return exprs.binop_ir(op, a, b, BOOL)
        assert ctx is not None and ctx.pre is not None
        ref = ir.Var(ctx.add_local("cond", BOOL, self.pos(node)), ir.TBool())
        test: ir.Expr = ref if op == "&&" else ir.Unary("!", ref, ir.TBool())
        src = self.src(node)
        then = (*b_pre, ir.Assign(ref, b.expr, src))
        ctx.pre += [ir.Assign(ref, a.expr, src), ir.If(test, then, (), src)]
        return Value(ref, BOOL)

    def mux_with_calls(
        self,
        node: PTree,
        ctx: Ctx | None,
        cond: Value,
        then: tuple[Value, list[ir.Stmt]],
        other: tuple[Value, list[ir.Stmt]],
    ) -> Value:
        """`c ? f(x) : g(y)`: an if/else that runs only the chosen branch's calls, into a temporary."""
        assert ctx is not None and ctx.pre is not None
        a, b = self.fe.exprs.unify(then[0], other[0], "?:", node)
        ref = ir.Var(ctx.add_local("mux", a.t, self.pos(node)), a.t.to_ir())
        src = self.src(node)
        branch_a = (*then[1], ir.Assign(ref, a.expr, src))
        branch_b = (*other[1], ir.Assign(ref, b.expr, src))
        ctx.pre.append(ir.If(cond.expr, branch_a, branch_b, src))
        return Value(ref, a.t)
