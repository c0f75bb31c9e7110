"""The calls part: what a call means, by callee.

Direct action calls, P4 functions and `sub.apply(...)` go to inlining; extern functions and methods of
extern instances to v1model; packet_in methods to parsers; the methods of headers (isValid, setValid, ...),
stacks (push_front, pop_front), tables (apply) and packet_out (emit) are lowered here.
"""

from __future__ import annotations

import functools
from typing import Any

from lark import Tree

from p4switch import ir
from p4switch.frontend.errors import Pos, type_error, unsupported
from p4switch.frontend.scope import Ctx, Part
from p4switch.frontend.source import Node, PTree, kids
from p4switch.frontend.types import BOOL, Type, Value, bit, const


class Calls(Part):
    """Lowers calls, in statements and (functions, table apply, isValid) in expressions."""

    def call_stmt(self, node: PTree, ctx: Ctx) -> list[ir.Stmt]:
        callee = self.fe.exprs.expr(node.children[0], ctx)
        targs = (
            [self.fe.decls.resolve_type(t) for t in kids(kids(node.children[1])[1])]
            if node.children[1]
            else []
        )
        args_node = node.children[2]
        stmts, _ = self.call(callee, args_node, targs, node, ctx, as_stmt=True)
        return stmts

    def call(
        self, callee: Value, args_node: PTree, targs: list[Type], node: PTree, ctx: Ctx | None, as_stmt: bool
    ) -> tuple[list[ir.Stmt], Value | None]:
        pos = self.pos(node)
        arg_nodes = self.positional(callee, kids(args_node), pos)
        for a in arg_nodes:
            if isinstance(a, Tree) and a.data == "dontcare_arg":
                raise unsupported(self.pos(a), "don't-care arguments")
        kind = callee.t.k
        if kind == "extern_fn" and callee.t.name == "static_assert":
            return [], self.static_assert([self.fe.exprs.expr(a, ctx) for a in arg_nodes], pos)
        if ctx is None:
            raise type_error(pos, "calls are not allowed in constant expressions")
        if kind == "action":
            if not as_stmt:
                raise type_error(pos, "an action call is a statement")
            return self.fe.inliner.inline_action(
                callee.extra["sym"], self.fe.effects.operands(arg_nodes, ctx), arg_nodes, pos, ctx
            ), None
        if kind == "extern_fn":
            return self.fe.v1.extern_fn(callee.t.name, arg_nodes, targs, node, ctx), None
        if kind == "function":
            args = self.fe.effects.operands(arg_nodes, ctx)
            stmts, result = self.fe.inliner.inline_function(callee.extra["sym"], args, arg_nodes, pos, ctx)
            if as_stmt:
                return stmts, None
            if result is None:
                raise type_error(pos, f"function {callee.t.name} returns no value")
            if ctx.pre is None:
                raise unsupported(pos, "a function call outside statements and parser selects")
            ctx.pre.extend(stmts)
            return [], result
        if kind != "method":
            raise type_error(pos, "this expression cannot be called")
        base: Value = callee.extra["base"]
        method: str = callee.extra["method"]
        src = str(pos)
        args = [self.fe.exprs.expr(a, ctx) for a in arg_nodes]
        bk = base.t.k
        if bk == "header" and method in ("isValid", "setValid", "setInvalid"):
            self.arity(args, 0, pos, method)
            if method == "isValid":
                return [], Value(ir.IsValid(base.expr, ir.TBool()), BOOL)
            if method == "setValid":
                return [ir.SetValid(base.expr, src), *self.fe.stmts.made_valid(base.expr, src)], None
            return [ir.SetInvalid(base.expr, src)], None
        if bk == "union" and method == "isValid":  # one of its headers is valid
            self.arity(args, 0, pos, method)
            tests: list[ir.Expr] = [ir.IsValid(h.expr, ir.TBool()) for h in self.headers_in(base, node)]
            return [], Value(functools.reduce(lambda a, b: ir.Binary("||", a, b, ir.TBool()), tests), BOOL)
        if bk == "header" and method in ("minSizeInBits", "minSizeInBytes"):
            self.arity(args, 0, pos, method)
            bits = self.fe.decls.headers[base.t.name].bits
            return [], const(bits if method == "minSizeInBits" else (bits + 7) // 8, bit(32))
        if bk == "stack" and method in ("push_front", "pop_front"):
            self.arity(args, 1, pos, method)
            count = self.fe.exprs.coerce(args[0], bit(32), arg_nodes[0]).const
            if count is None:
                raise type_error(self.pos(arg_nodes[0]), f"{method} needs a constant count")
            return self.fe.stmts.shift_stack(base, int(count), method == "push_front", src), None
        if bk == "table" and method == "apply":
            self.arity(args, 0, pos, method)
            if ctx.in_action:
                raise type_error(pos, f"table {base.t.name} cannot be applied inside an action")
            if as_stmt:
                return [ir.Apply(base.t.name, src)], None
            return [], Value(None, Type("apply_result", name=base.t.name))
        if bk == "subcontrol" and method == "apply":
            if not as_stmt:
                raise type_error(pos, "apply of a control is a statement")
            return self.fe.inliner.inline_control(base.extra["sym"], args, arg_nodes, pos, ctx), None
        if bk == "packet_in":
            return self.fe.parsers.packet_in_call(method, args, targs, arg_nodes, node, ctx)
        if bk == "packet_out" and method == "emit":
            self.arity(args, 1, pos, method)
            return [ir.Emit(h.expr, src) for h in self.headers_in(args[0], arg_nodes[0])], None
        if bk == "extern" and "inst" in base.extra:
            if not as_stmt:
                raise type_error(pos, f"{method} does not return a value")
            return self.fe.v1.extern_method(base.extra["inst"], method, args, arg_nodes, pos), None
        raise type_error(pos, f"unknown method {method} of {base.t}")

    def positional(self, callee: Value, nodes: list[Node], pos: Pos) -> list[Node]:
        """The arguments in parameter order: named ones (`f(b = 1, a = 2)`) placed by the callee's
        declaration (of the overload whose parameters they name), left-out ones by their default value
        (`in bit<8> y = 5`)."""
        named = {
            self.name(a.children[0]): a.children[1]
            for a in nodes
            if isinstance(a, Tree) and a.data == "named_arg"
        }
        if named and len(named) != len(nodes):
            raise type_error(pos, "arguments must be all named or all positional")
        candidates = self.param_lists(callee)
        if not named and all(len(nodes) >= len(params) for params in candidates):
            return nodes
        for params in candidates:
            names = [self.name(p.children[3]) for p in params]
            given = named or dict(zip(names, nodes, strict=False))
            if len(given) != len(nodes) or not set(given) <= set(names):
                continue
            if all(n in given or p.children[4] is not None for n, p in zip(names, params, strict=True)):
                return [given.get(n, p.children[4]) for n, p in zip(names, params, strict=True)]
        if named:
            raise type_error(pos, f"no parameters named {', '.join(named)} in this call's callee")
        return nodes

    def param_lists(self, callee: Value) -> list[list[PTree]]:
        """The parameter lists a callee may have (one per overload)."""
        kind = callee.t.k
        if kind == "extern_fn":
            return [kids(d.children[4]) for d in self.fe.decls.overloads.get(callee.t.name, [])]
        if kind in ("action", "function"):
            tree = callee.extra["sym"].tree
            return [kids(tree.children[2 if kind == "action" else 4])]
        if kind != "method":
            return []
        base: Value = callee.extra["base"]
        if base.t.k == "subcontrol":
            return [kids(base.extra["sym"].tree.children[0].children[3])]
        decl = self.fe.decls.types.get(base.t.name or base.t.k, ("", None))[1]
        protos = decl.children[3:] if decl is not None and decl.data == "extern_obj_decl" else []
        methods = [m for m in protos if m.data == "method_proto"]
        return [kids(m.children[4]) for m in methods if self.name(m.children[2]) == callee.extra["method"]]

    def static_assert(self, args: list[Value], pos: Pos) -> Value:
        """core.p4's static_assert(check[, message]): checked here; its value is true."""
        if not 1 <= len(args) <= 2 or args[0].t != BOOL or args[0].const is None:
            raise type_error(pos, "static_assert needs a compile-time bool and an optional message")
        if not args[0].const:
            raise type_error(pos, f"static assertion failed: {args[1].const if len(args) > 1 else ''}")
        return const(True, BOOL)

    def arity(self, args: list[Any], n: int, pos: Pos, what: str) -> None:
        if len(args) != n:
            raise type_error(pos, f"{what} takes {n} arguments, got {len(args)}")

    def headers_in(self, v: Value, node: Node) -> list[Value]:
        """The headers an emit of `v` writes, in order (structs are flattened, stacks element by element)."""
        if v.t.k == "header":
            return [v]
        if v.t.k in ("struct", "union"):
            out: list[Value] = []
            for fname, ft in self.fe.decls.members(v.t):
                out.extend(self.headers_in(self.fe.exprs.member_value(v, fname, ft), node))
            return out
        if v.t.k == "stack":
            et = v.t.elem
            elems = [Value(ir.Index(v.expr, i, et.to_ir()), et, lv=v.lv) for i in range(v.t.size)]
            return [h for e in elems for h in self.headers_in(e, node)]
        if v.t.k in ("bit", "int", "varbit", "bool", "error", "enum"):
            return []
        raise type_error(self.pos(node), f"cannot emit {v.t}")

    def flatten(self, v: Value, node: Node, log: bool = False) -> list[Value]:
        """The bit fields of a {...} list, struct or header, in order (hash, checksum, digest, log data;
        log_msg also prints enum and error values, as their numbers)."""
        if v.t.k == "list":
            return [
                x
                for item, n in zip(v.extra["items"], v.extra["nodes"], strict=True)
                for x in self.flatten(item, n, log)
            ]
        if v.t.k in ("struct", "header"):
            return [
                x
                for fname, ft in self.fe.decls.members(v.t)
                for x in self.flatten(self.fe.exprs.member_value(v, fname, ft), node, log)
            ]
        if log and v.t.k in ("enum", "error"):
            return [v]
        if v.t.k == "infint":
            raise type_error(
                self.pos(node), "cannot infer the width of an integer literal here; give it a width"
            )
        if v.t.is_bits or v.t.k == "bool":
            return [v]
        raise type_error(self.pos(node), f"{v.t} cannot be used in a field list")

    def lvalue(self, v: Value, node: Node) -> Value:
        if not v.lv:
            raise type_error(self.pos(node), "expected an lvalue (a variable, field or slice)")
        return v
