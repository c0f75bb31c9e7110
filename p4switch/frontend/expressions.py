"""The expressions part: type checking and constant folding of expressions.

Names are resolved through the scopes of the block being lowered, every expression gets its exact type
(integer literals take the type of their context, see `coerce`), and operations on constants are folded
with P4's wrap-around (bit<W> modulo 2^W, int<W> two's complement). The result is a `types.Value`: the IR
expression, its type, its constant value if it has one, and whether it is an lvalue.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from lark import Token, Tree

from p4switch import ir
from p4switch.frontend.errors import type_error, unsupported
from p4switch.frontend.scope import Ctx, Part, Sym
from p4switch.frontend.source import Node, PTree, kids, parse_int
from p4switch.frontend.types import ANY, BOOL, ERROR, INFINT, STRING, Type, Value, bit, const, member, wrap


class Expressions(Part):
    """Types and folds expressions; `expr(node, ctx)` is the entry point, one `x_<node>` per kind.

    Over 400 lines because it is one front-end concern, the typing of expressions: one short
    method per expression kind of the grammar plus the typing and folding rules they share (`coerce`,
    `unify`, `fold`), which call back into `expr` for sub-expressions."""

    def const_int(self, node: Node, ctx: Ctx | None) -> int:
        if isinstance(node, Token):
            return parse_int(str(node))[0]
        v = self.expr(node, ctx)
        if not isinstance(v.const, int) or isinstance(v.const, bool):
            raise type_error(self.pos(node), "expected a compile-time integer constant")
        return v.const

    def member_value(self, base: Value, fname: str, ft: Type) -> Value:
        return Value(member(base.expr, fname, ft.to_ir()), ft, lv=base.lv)

    def lookup_sym(self, name: str, node: Node, ctx: Ctx | None) -> Sym:
        scopes = ctx.scopes if ctx else [self.fe.decls.globals]
        for scope in reversed(scopes):
            if name in scope:
                return scope[name]
        raise type_error(self.pos(node), f"unknown name {name}")

    def sym_value(self, sym: Sym, name: str, node: Node) -> Value:
        if sym.kind == "var":
            return Value(ir.Var(sym.qname, sym.t.to_ir()), sym.t, lv=not sym.readonly)
        if sym.kind == "const":
            assert sym.value is not None
            return sym.value
        if sym.kind == "table":
            return Value(None, Type("table", name=sym.qname))
        if sym.kind == "action":
            return Value(None, Type("action", name=sym.qname), extra={"sym": sym})
        if sym.kind == "inst":
            inst = self.fe.v1.extern_by_name[sym.qname]
            return Value(None, Type("extern", name=sym.t.name), extra={"inst": inst})
        if sym.kind == "extern_fn":
            return Value(None, Type("extern_fn", name=name))
        if sym.kind == "alias":
            assert sym.value is not None
            return sym.value
        if sym.kind == "value_set":
            return Value(None, Type("value_set", name=sym.qname))
        if sym.kind == "subcontrol":
            return Value(None, Type("subcontrol", name=sym.qname), extra={"sym": sym})
        if sym.kind == "function":
            return Value(None, Type("function", name=sym.qname), extra={"sym": sym})
        raise type_error(self.pos(node), f"{name} cannot be used here")

    def expr(self, node: Node, ctx: Ctx | None) -> Value:
        if isinstance(node, Token):
            raise type_error(self.pos(node), f"unexpected {node}")
        handler: Callable[[PTree, Ctx | None], Value] | None = getattr(self, "x_" + node.data, None)
        if handler is None:
            raise unsupported(self.pos(node), f"expression {node.data}")
        return handler(node, ctx)

    def x_int_lit(self, node: PTree, ctx: Ctx | None) -> Value:
        value, t = parse_int(str(node.children[0]))
        return const(value, t)

    def x_string_lit(self, node: PTree, ctx: Ctx | None) -> Value:
        s = str(node.children[0])[1:-1]
        return Value(None, STRING, s)

    def x_true_lit(self, node: PTree, ctx: Ctx | None) -> Value:
        return const(True, BOOL)

    def x_false_lit(self, node: PTree, ctx: Ctx | None) -> Value:
        return const(False, BOOL)

    def x_name_ref(self, node: PTree, ctx: Ctx | None) -> Value:
        name = str(node.children[0])
        return self.sym_value(self.lookup_sym(name, node, ctx), name, node)

    x_prefixed_name = x_name_ref

    def x_top_ref(self, node: PTree, ctx: Ctx | None) -> Value:
        name = str(node.children[0])
        return self.sym_value(self.lookup_sym(name, node, None), name, node)

    x_top_name = x_top_ref

    def x_type_member(self, node: PTree, ctx: Ctx | None) -> Value:
        tname = str(node.children[0])
        member = self.name(node.children[1])
        if ctx is not None and any(tname in scope for scope in ctx.scopes[1:]):
            # a variable or instance that shadows a type of the same name (e.g. `packet_out`)
            base = self.sym_value(self.lookup_sym(tname, node, ctx), tname, node)
            return self.member_of(base, member, node, ctx)
        kind, info = self.fe.decls.types.get(tname, ("", None))
        if kind == "enum":
            if member not in self.fe.decls.enums[tname]:
                raise type_error(self.pos(node), f"{tname} has no member {member}")
            t = Type("enum", name=tname)
            return Value(ir.Const(member, t.to_ir()), t, member)
        if kind == "serenum":
            base, members = info
            if member not in members:
                raise type_error(self.pos(node), f"{tname} has no member {member}")
            return const(members[member], base)
        if kind == "block" and member == "apply" and ctx is not None:
            # `C.apply(...)`: an instance of its own, named by the type (p4c's InstantiateDirectCalls)
            qname = self.fe.decls.fq(ctx.prefix, tname, {})
            sym = Sym("subcontrol", Type("block", name=tname), qname, tree=info)
            base = Value(None, Type("subcontrol", name=sym.qname), extra={"sym": sym})
            return self.member_of(base, member, node, ctx)
        raise unsupported(self.pos(node), f"member access on type {tname}")

    def x_error_member(self, node: PTree, ctx: Ctx | None) -> Value:
        member = self.name(node.children[0])
        if member not in self.fe.decls.errors:
            raise type_error(self.pos(node), f"unknown error {member}")
        return Value(ir.Const(member, ir.TError()), ERROR, member)

    def x_member(self, node: PTree, ctx: Ctx | None) -> Value:
        return self.member_of(self.expr(node.children[0], ctx), self.name(node.children[1]), node, ctx)

    def member_of(self, base: Value, member: str, node: PTree, ctx: Ctx | None) -> Value:
        t = base.t
        if t.k == "lookahead_header":
            return self.fe.parsers.lookahead_field(t.name, member, node)
        if t.k in ("header", "union", "struct"):
            for fname, ft in self.fe.decls.members(t):
                if fname == member:
                    field = self.member_value(base, fname, ft)
                    if "stack_key" in base.extra:  # extract(s.next.h) of a stack of unions advances s
                        field.extra["stack_key"] = base.extra["stack_key"]
                    return field
            if t.k == "struct":
                raise type_error(self.pos(node.children[1]), f"{t} has no field {member}")
        if t.k == "apply_result":
            if member in ("hit", "miss"):
                if member == "hit":
                    return Value(ir.TableHit(t.name, ir.TBool()), BOOL)
                return Value(ir.TableMiss(t.name, ir.TBool()), BOOL)
            if member == "action_run":
                return Value(None, Type("action_run", name=t.name))
        if t.k == "stack" and member == "size":
            return const(t.size, bit(32))
        if t.k == "stack" and member in ("next", "last", "lastIndex"):
            return self.fe.parsers.stack_position(base, member, node, ctx)
        if t.k in ("header", "union", "table", "packet_in", "packet_out", "extern", "stack", "subcontrol"):
            return Value(None, Type("method"), extra={"base": base, "method": member})
        raise type_error(self.pos(node.children[1]), f"{t} has no member {member}")

    x_lv_member = x_member

    def x_index(self, node: PTree, ctx: Ctx | None) -> Value:
        base = self.expr(node.children[0], ctx)
        if base.t.k == "struct" and base.t.name.startswith("tuple$"):  # t[i]: the tuple's member fi
            i = self.const_int(node.children[1], ctx)
            members = self.fe.decls.members(base.t)
            if not 0 <= i < len(members):
                raise type_error(
                    self.pos(node.children[1]), f"index {i} out of bounds of a {len(members)}-tuple"
                )
            return self.member_value(base, *members[i])
        if base.t.k != "stack":
            raise type_error(self.pos(node), f"cannot index {base.t}")
        idx = self.expr(node.children[1], ctx)
        ht = base.t.elem
        if idx.const is None:  # known at run time only: the engine checks the range (ir.DynIndex)
            if not idx.t.is_bits:
                raise type_error(
                    self.pos(node.children[1]), f"a stack index must be bit<W> or int<W>, not {idx.t}"
                )
            return Value(ir.DynIndex(base.expr, idx.expr, ht.to_ir()), ht, lv=base.lv)
        if not isinstance(idx.const, int) or isinstance(idx.const, bool):
            raise type_error(self.pos(node.children[1]), f"a stack index must be an integer, not {idx.t}")
        if not 0 <= idx.const < base.t.size:
            raise type_error(self.pos(node.children[1]), f"index {idx.const} out of bounds of {base.t}")
        return Value(ir.Index(base.expr, idx.const, ht.to_ir()), ht, lv=base.lv)

    x_lv_index = x_index

    def x_slice(self, node: PTree, ctx: Ctx | None) -> Value:
        base = self.expr(node.children[0], ctx)
        hi, lo = self.const_int(node.children[1], ctx), self.const_int(node.children[2], ctx)
        if not base.t.is_bits:
            raise type_error(self.pos(node), f"cannot slice {base.t}")
        if not base.t.w > hi >= lo >= 0:
            raise type_error(self.pos(node), f"slice [{hi}:{lo}] out of range for {base.t}")
        t = bit(hi - lo + 1)
        if base.const is not None:
            return const(int(base.const) >> lo, t)
        return Value(ir.Slice(base.expr, hi, lo, t.to_ir()), t, lv=base.lv)

    x_lv_slice = x_slice

    def x_call(self, node: PTree, ctx: Ctx | None) -> Value:
        callee = self.expr(node.children[0], ctx)
        return self.call_value(callee, node.children[1], [], node, ctx)

    def x_generic_call(self, node: PTree, ctx: Ctx | None) -> Value:
        callee = self.expr(node.children[0], ctx)
        targs_node = next(c for c in node.children if isinstance(c, Tree) and c.data == "type_args")
        args_node = node.children[-1]
        return self.call_value(
            callee, args_node, [self.fe.decls.resolve_type(t) for t in kids(targs_node)], node, ctx
        )

    def call_value(
        self, callee: Value, args: PTree, targs: list[Type], node: PTree, ctx: Ctx | None
    ) -> Value:
        stmts, v = self.fe.calls.call(callee, args, targs, node, ctx, as_stmt=False)
        if v is None or stmts:
            raise type_error(self.pos(node), "this call does not return a value")
        return v

    def x_ctor_call(self, node: PTree, ctx: Ctx | None) -> Value:
        raise unsupported(self.pos(node), "instantiation inside an expression")

    def x_this_ref(self, node: PTree, ctx: Ctx | None) -> Value:
        raise unsupported(self.pos(node), "this")

    def x_list_expr(self, node: PTree, ctx: Ctx | None) -> Value:
        nodes = kids(kids(node)[0]) if kids(node) else []
        items = self.fe.effects.operands(nodes, ctx)
        return Value(None, Type("list"), extra={"items": items, "nodes": nodes})

    def x_struct_expr(self, node: PTree, ctx: Ctx | None) -> Value:
        raise unsupported(self.pos(node), "struct initializer outside an assignment")

    def x_cast(self, node: PTree, ctx: Ctx | None) -> Value:
        t = self.fe.decls.resolve_type(node.children[0])
        v = self.expr(node.children[1], ctx)
        src = v.t
        if src == t:
            return v
        ok = (t.is_bits and (src.is_bits or src.k == "infint" or (src.k == "bool" and t == bit(1)))) or (
            t == BOOL and src in (bit(1), INFINT)
        )
        if not ok:
            raise type_error(self.pos(node), f"cannot cast {src} to {t}")
        if v.const is not None:
            if t == BOOL:
                return const(bool(v.const), BOOL)
            return const(int(v.const), t)
        if src.k == "infint":
            return self.coerce(v, t, node)  # (bit<8>) (c ? 1 : 2)
        return Value(ir.Cast(v.expr, t.to_ir()), t)

    def coerce(self, v: Value, t: Type, node: Node) -> Value:
        """Implicit conversion: integer literals take the expected type; anything else must match exactly."""
        if v.t == t or t == ANY:
            return v
        if v.t.k == "infint" and t.is_bits and v.const is not None:
            return const(int(v.const), t)
        if v.t.k == "infint" and t.is_bits and "mux" in v.extra:
            cond, a, b = v.extra["mux"]
            a, b = self.coerce(a, t, node), self.coerce(b, t, node)
            return Value(ir.Mux(cond.expr, a.expr, b.expr, t.to_ir()), t)
        if v.t.k == "infint" and v.const is None:
            raise type_error(
                self.pos(node), "cannot infer the width of this integer expression; give it a width"
            )
        raise type_error(self.pos(node), f"expected {t}, got {v.t}")

    def unify(self, a: Value, b: Value, op: str, node: PTree) -> tuple[Value, Value]:
        if a.t.k == "infint" and b.t.is_bits:
            a = self.coerce(a, b.t, node)
        elif b.t.k == "infint" and a.t.is_bits:
            b = self.coerce(b, a.t, node)
        if a.t != b.t:
            raise type_error(self.pos(node), f"{op}: cannot operate on {a.t} and {b.t}")
        if a.t.k == "infint" and (a.const is None or b.const is None):
            raise type_error(
                self.pos(node), f"{op}: cannot infer the width of an integer expression; give it a width"
            )
        return a, b

    def binary(self, node: PTree, ctx: Ctx | None, op: str) -> Value:
        if op in ("&&", "||"):
            return self.fe.effects.short_circuit(node, ctx, op)
        a, b = self.fe.effects.operands([node.children[0], node.children[-1]], ctx)
        if op in ("<<", ">>"):
            return self.shift(a, b, op, node)
        a, b = self.unify(a, b, op, node)
        t = a.t
        if op in ("==", "!="):
            if t.k in ("list", "string"):
                raise unsupported(self.pos(node), f"{op} on {t}")
            if t.k in ("header", "union", "struct", "stack"):
                same = self.equal(a.expr, b.expr)
                return Value(same if op == "==" else ir.Unary("!", same, ir.TBool()), BOOL)
            if a.const is not None and b.const is not None:
                return const((a.const == b.const) == (op == "=="), BOOL)
            return self.binop_ir(op, a, b, BOOL)
        if not (t.is_bits or t.k == "infint"):
            raise type_error(self.pos(node), f"{op} is not defined on {t}")
        if op in ("/", "%") and t.k == "int":
            raise unsupported(self.pos(node), f"{op} on signed values")
        if op in ("<", ">", "<=", ">="):
            if a.const is not None and b.const is not None:
                x, y = int(a.const), int(b.const)
                return const({"<": x < y, ">": x > y, "<=": x <= y, ">=": x >= y}[op], BOOL)
            return self.binop_ir(op, a, b, BOOL)
        if a.const is not None and b.const is not None:
            return const(self.fold(op, int(a.const), int(b.const), t, node), t)
        if op in ("/", "%"):
            return self.divide(a, b, op, node)
        return self.binop_ir(op, a, b, t)

    def divide(self, a: Value, b: Value, op: str, node: PTree) -> Value:
        """`/` and `%` with a run-time operand, as p4c's strength reduction leaves them for BMv2 (which
        has no division): by a power of two a shift or a mask, of 0 the constant 0 (the operands are
        still evaluated); any other is refused, as p4c refuses it."""
        t = a.t
        if a.const == 0:
            return const(0, t)
        divisor = int(b.const) if b.const is not None else 0
        if divisor <= 0 or divisor & (divisor - 1):
            raise unsupported(self.pos(node), f"{op} of values known only at run time")
        if op == "%":
            return self.binop_ir("&", a, const(divisor - 1, t), t)
        k = divisor.bit_length() - 1
        return a if k == 0 else self.binop_ir(">>", a, const(k, t), t)

    def equal(self, a: ir.Expr, b: ir.Expr) -> ir.Expr:
        """`a == b` of two values of one type, member by member: headers are equal when both are invalid,
        or both valid with equal fields; structs (and unions) when all members are, stacks all elements."""
        t = a.type
        tests: list[ir.Expr]
        if isinstance(t, ir.THeader):
            return self.header_equal(a, b, self.fe.decls.headers[t.name])
        if isinstance(t, ir.TStruct):
            members = self.fe.decls.structs[t.name].fields
            tests = [self.equal(member(a, f.name, f.type), member(b, f.name, f.type)) for f in members]
        elif isinstance(t, ir.TStack):
            elem = self.fe.decls.elem_type(t)
            tests = [self.equal(ir.Index(a, i, elem), ir.Index(b, i, elem)) for i in range(t.size)]
        else:
            return ir.Binary("==", a, b, ir.TBool())
        return _all(tests)

    def header_equal(self, a: ir.Expr, b: ir.Expr, h: ir.HeaderType) -> ir.Expr:
        """(both valid && every field equal) || !(either valid)."""
        valid_a, valid_b = ir.IsValid(a, ir.TBool()), ir.IsValid(b, ir.TBool())
        tests: list[ir.Expr] = [ir.Binary("&&", valid_a, valid_b, ir.TBool())]
        for f in h.fields:
            ft: ir.Type = ir.TVarbit(f.w) if f.varbit else ir.TInt(f.w) if f.signed else ir.TBit(f.w)
            tests.append(ir.Binary("==", ir.Member(a, f.name, ft), ir.Member(b, f.name, ft), ir.TBool()))
        invalid = ir.Unary("!", ir.Binary("||", valid_a, valid_b, ir.TBool()), ir.TBool())
        return ir.Binary("||", _all(tests), invalid, ir.TBool())

    def fold(self, op: str, x: int, y: int, t: Type, node: PTree) -> int:
        if op in ("/", "%") and y == 0:
            raise type_error(self.pos(node), "division by zero")
        if op in ("|+|", "|-|"):
            r = x + y if op == "|+|" else x - y
            if t.k == "bit":
                return max(0, min(r, (1 << t.w) - 1))
            if t.k == "int":
                return max(-(1 << (t.w - 1)), min(r, (1 << (t.w - 1)) - 1))
            return r
        ops: dict[str, Callable[[int, int], int]] = {
            "+": lambda p, q: p + q,
            "-": lambda p, q: p - q,
            "*": lambda p, q: p * q,
            "/": lambda p, q: p // q,
            "%": lambda p, q: p % q,
            "&": lambda p, q: p & q,
            "|": lambda p, q: p | q,
            "^": lambda p, q: p ^ q,
        }
        return wrap(ops[op](x, y), t)

    def binop_ir(self, op: str, a: Value, b: Value, t: Type) -> Value:
        return Value(ir.Binary(op, a.expr, b.expr, t.to_ir()), t)

    def shift(self, a: Value, b: Value, op: str, node: PTree) -> Value:
        if (
            b.t.k == "int"
            or (b.t.k == "infint" and int(b.const or 0) < 0)
            or not (b.t.is_bits or b.t.k == "infint")
        ):
            raise type_error(self.pos(node), f"{op}: the shift amount must be unsigned, got {b.t}")
        if not (a.t.is_bits or a.t.k == "infint"):
            raise type_error(self.pos(node), f"{op} is not defined on {a.t}")
        unknown = [v for v in (a, b) if v.t.k == "infint" and v.const is None]
        if unknown or (a.t.k == "infint" and b.const is None):
            raise type_error(self.pos(node), f"{op}: cannot infer the width of an integer expression")
        if b.t.k == "infint":
            b = const(int(b.const or 0), bit(max(int(b.const or 0).bit_length(), 1)))
        if a.const is not None and b.const is not None:
            x, y = int(a.const), int(b.const)
            return const(x << y if op == "<<" else x >> y, a.t)
        return self.binop_ir(op, a, b, a.t)

    def x_concat(self, node: PTree, ctx: Ctx | None) -> Value:
        a, b = self.fe.effects.operands([node.children[0], node.children[1]], ctx)
        if not (a.t.is_bits and b.t.is_bits):
            raise type_error(self.pos(node), f"++ needs bit<W>/int<W> operands, got {a.t} and {b.t}")
        t = Type(a.t.k, a.t.w + b.t.w)
        if a.const is not None and b.const is not None:
            return const((int(a.const) << b.t.w) | wrap(int(b.const), bit(b.t.w)), t)
        return Value(ir.Concat(a.expr, b.expr, t.to_ir()), t)

    def unary(self, node: PTree, ctx: Ctx | None, op: str) -> Value:
        v = self.expr(node.children[0], ctx)
        if op == "!":
            v = self.coerce(v, BOOL, node.children[0])
            if v.const is not None:
                return const(not v.const, BOOL)
        elif op == "~":
            if not v.t.is_bits:
                raise type_error(self.pos(node), f"~ needs bit<W>/int<W>, got {v.t}")
            if v.const is not None:
                return const(~int(v.const), v.t)
        else:
            if not (v.t.is_bits or (v.t.k == "infint" and v.const is not None)):
                raise type_error(self.pos(node), f"- is not defined on {v.t}")
            if v.const is not None:
                return const(-int(v.const), v.t)
        return Value(ir.Unary(op, v.expr, v.t.to_ir()), v.t)

    def x_mux(self, node: PTree, ctx: Ctx | None) -> Value:
        cond = self.coerce(self.expr(node.children[0], ctx), BOOL, node.children[0])
        effects = self.fe.effects
        mark = effects.pre_mark(ctx)
        a = self.expr(node.children[1], ctx)
        a_pre = effects.take_pre(ctx, mark)
        b = self.expr(node.children[2], ctx)
        b_pre = effects.take_pre(ctx, mark)
        if cond.const is not None:
            if ctx is not None and ctx.pre is not None:
                ctx.pre.extend(a_pre if cond.const else b_pre)
            return a if cond.const else b
        if a_pre or b_pre:
            return effects.mux_with_calls(node, ctx, cond, (a, a_pre), (b, b_pre))
        if a.t.k == "infint" and b.t.k == "infint":
            # `c ? 1 : 0`: the width comes from where the value goes (see coerce)
            return Value(None, INFINT, extra={"mux": (cond, a, b)})
        a, b = self.unify(a, b, "?:", node)
        return Value(ir.Mux(cond.expr, a.expr, b.expr, a.t.to_ir()), a.t)

    def x_pos_op(self, node: PTree, ctx: Ctx | None) -> Value:
        return self.expr(node.children[0], ctx)


_BINOPS = {
    "add_op": "+",
    "sub_op": "-",
    "mul_op": "*",
    "div_op": "/",
    "mod_op": "%",
    "sadd_op": "|+|",
    "ssub_op": "|-|",
    "band_op": "&",
    "bor_op": "|",
    "bxor_op": "^",
    "eq_op": "==",
    "ne_op": "!=",
    "lt_op": "<",
    "gt_op": ">",
    "le_op": "<=",
    "ge_op": ">=",
    "land_op": "&&",
    "lor_op": "||",
    "shl_op": "<<",
    "shr_op": ">>",
}


_UNOPS = {"not_op": "!", "inv_op": "~", "neg_op": "-"}


def _all(tests: list[ir.Expr]) -> ir.Expr:
    """The `&&` of the tests (true when there are none)."""
    if not tests:
        return ir.Const(True, ir.TBool())
    return functools.reduce(lambda x, y: ir.Binary("&&", x, y, ir.TBool()), tests)


def _bind(
    op: str, method: Callable[[Expressions, PTree, Ctx | None, str], Value]
) -> Callable[[Expressions, PTree, Ctx | None], Value]:
    def handler(self: Expressions, node: PTree, ctx: Ctx | None) -> Value:
        return method(self, node, ctx, op)

    return handler


for _data, _op in _BINOPS.items():
    setattr(Expressions, "x_" + _data, _bind(_op, Expressions.binary))
for _data, _op in _UNOPS.items():
    setattr(Expressions, "x_" + _data, _bind(_op, Expressions.unary))
