"""BMv2 expressions (type-value objects) as typed IR expressions.

BMv2 computes with integers of unlimited precision and truncates only when a value is stored into a
field (docs/JSON_format.md, "General information"); p4c writes the masks and ``two_comp_mod`` that P4's
fixed widths need. The IR has fixed widths everywhere, so arithmetic here is done in one signed type
``int<W>`` wide enough that nothing p4c writes can overflow it (twice the widest field, plus room):
modulo 2^W the low bits of ``+ - * <<`` are exact, and p4c masks before any comparison or right shift.
Fields keep their own ``bit<w>``/``int<w>`` type where they are read as such (table keys, hash and
checksum data, stores); a value is converted to the type of the field it is stored into."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from p4switch import ir
from p4switch.bmv2json.errors import BMv2JsonError, Unsupported
from p4switch.bmv2json.layout import Layout

BOOL = ir.TBool()
_ARITH = {"+", "-", "*", "<<", ">>", "&", "|", "^"}
_COMPARE = {"==", "!=", "<", ">", "<=", ">="}


def hexstr(value: Any, path: str) -> int:
    """A BMv2 hexstring (``"0x0a"``, ``"-0x1"``) or JSON integer as an int."""
    if isinstance(value, bool):
        raise BMv2JsonError(path, f"expected a hexstring, got {value!r}")
    if isinstance(value, int):
        return value
    try:
        return int(str(value), 16) if not str(value).startswith("-") else -int(str(value)[1:], 16)
    except ValueError:
        raise BMv2JsonError(path, f"expected a hexstring, got {value!r}") from None


@dataclass
class Context:
    """What names mean where an expression is: an action's runtime data, a parser's stack positions."""

    runtime: list[tuple[str, ir.Type]] = field(default_factory=list)  # action data: (IR var, type)
    stack_next: dict[str, int] | None = None  # in a parser: the next index of every stack


class Expressions:
    """Translates BMv2 type-value objects of one program."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.wide = ir.TInt(max(256, 2 * layout.max_width + 64))

    # ------------------------------------------------------------------------------ conversions
    def data(self, e: ir.Expr) -> ir.Expr:
        """``e`` as a value of the wide arithmetic type."""
        if e.type == self.wide:
            return e
        if isinstance(e, ir.Const) and not isinstance(e.value, str):
            return ir.Const(int(e.value), self.wide)
        return ir.Cast(e, self.wide)

    def boolean(self, e: ir.Expr) -> ir.Expr:
        if isinstance(e.type, ir.TBool):
            return e
        if isinstance(e, ir.Cast) and isinstance(e.expr.type, ir.TBool):  # d2b of $valid$ or b2d
            return e.expr
        return ir.Binary("!=", self.data(e), ir.Const(0, self.wide), BOOL)

    def to_type(self, e: ir.Expr, t: ir.Type) -> ir.Expr:
        """``e`` converted to ``t`` as BMv2 stores a value into a field of type ``t``."""
        if e.type == t:
            return e
        if isinstance(t, ir.TBool):
            return self.boolean(e)
        if isinstance(e, ir.Const) and isinstance(e.value, int | bool) and isinstance(t, ir.TBit | ir.TInt):
            v = int(e.value) & ((1 << t.w) - 1)
            if isinstance(t, ir.TInt) and v >= 1 << (t.w - 1):
                v -= 1 << t.w
            return ir.Const(v, t)
        if isinstance(e.type, ir.TBit | ir.TInt | ir.TBool) and isinstance(t, ir.TBit | ir.TInt):
            if isinstance(e.type, ir.TBit) and isinstance(t, ir.TBit):
                return ir.Cast(e, t)
            return ir.Cast(self.data(e), t)
        return e  # headers, structs: the same type by construction

    # ------------------------------------------------------------------------------ translation
    def expr(self, v: Any, ctx: Context, path: str) -> ir.Expr:
        """A type-value object as an IR expression of its natural type."""
        if not isinstance(v, dict) or "type" not in v:
            raise BMv2JsonError(path, f"expected a type-value object, got {str(v)[:60]}")
        kind, value = v["type"], v.get("value")
        handler: Callable[[Any, Context, str], ir.Expr] | None = getattr(self, "v_" + kind, None)
        if handler is None:
            raise Unsupported(path, f"operand of type {kind}")
        return handler(value, ctx, path)

    def v_field(self, value: Any, ctx: Context, path: str) -> ir.Expr:
        if isinstance(value[0], dict):  # [header expression, field]: a field of a stack element
            header = self.v_expression(value[0], ctx, path)
            if value[1] == "$valid$":
                return ir.Cast(ir.IsValid(header, BOOL), ir.TBit(1))
            return self.layout.field_named(header, str(value[1]), path)
        return self.layout.field(value[0], value[1], path)

    def v_hexstr(self, value: Any, ctx: Context, path: str) -> ir.Expr:
        return ir.Const(hexstr(value, path), self.wide)

    def v_bool(self, value: Any, ctx: Context, path: str) -> ir.Expr:
        return ir.Const(bool(value), BOOL)

    def v_header(self, value: Any, ctx: Context, path: str) -> ir.Expr:
        return self.layout.instance(value, path)

    def v_header_stack(self, value: Any, ctx: Context, path: str) -> ir.Expr:
        return self.layout.stack(value, path)

    def v_runtime_data(self, value: Any, ctx: Context, path: str) -> ir.Expr:
        if not isinstance(value, int) or not 0 <= value < len(ctx.runtime):
            raise BMv2JsonError(path, f"no action parameter number {value!r}")
        name, t = ctx.runtime[value]
        return ir.Var(name, t)

    v_local = v_runtime_data

    def v_expression(self, value: Any, ctx: Context, path: str) -> ir.Expr:
        if isinstance(value, dict) and value.get("type") == "expression":  # an lvalue wrapped once more
            return self.v_expression(value["value"], ctx, path)
        if isinstance(value, dict) and "op" not in value:
            return self.expr(value, ctx, path)
        op = value.get("op")
        left, right = value.get("left"), value.get("right")
        if op in _ARITH:
            a, b = self.operand(left, ctx, path), self.operand(right, ctx, path)
            return ir.Binary(op, self.data(a), self.data(b), self.wide)
        if op in _COMPARE:
            a, b = self.operand(left, ctx, path), self.operand(right, ctx, path)
            if isinstance(a.type, ir.TBool) and isinstance(b.type, ir.TBool) and op in ("==", "!="):
                return ir.Binary(op, a, b, BOOL)
            return ir.Binary(op, self.data(a), self.data(b), BOOL)
        if op in ("and", "or"):
            a, b = self.operand(left, ctx, path), self.operand(right, ctx, path)
            return ir.Binary("&&" if op == "and" else "||", self.boolean(a), self.boolean(b), BOOL)
        if op == "not":
            return ir.Unary("!", self.boolean(self.operand(right, ctx, path)), BOOL)
        if op == "~":
            return ir.Unary("~", self.data(self.operand(right, ctx, path)), self.wide)
        if op == "-" and left is None:
            return ir.Unary("-", self.data(self.operand(right, ctx, path)), self.wide)
        if op == "d2b":
            return self.boolean(self.operand(right, ctx, path))
        if op == "b2d":
            return self.data(self.operand(right, ctx, path))
        if op == "valid_union":
            return self.union_valid(right, path)
        if op == "valid":
            return ir.IsValid(self.operand(right, ctx, path), BOOL)
        if op == "?":
            cond = self.boolean(self.operand(value.get("cond"), ctx, path))
            a, b = self.operand(left, ctx, path), self.operand(right, ctx, path)
            if isinstance(a.type, ir.TBool) and isinstance(b.type, ir.TBool):
                return ir.Mux(cond, a, b, BOOL)
            if isinstance(a.type, ir.THeader) and a.type == b.type:
                return ir.Mux(cond, a, b, a.type)  # a header chosen, copied by assign_header
            if not isinstance(a.type, ir.TBit | ir.TInt | ir.TBool):
                raise Unsupported(path, f"?: on a {a.type.k}")
            return ir.Mux(cond, self.data(a), self.data(b), self.wide)
        if op in ("two_comp_mod", "sat_cast", "usat_cast"):
            return self.width_op(op, self.data(self.operand(left, ctx, path)), right, ctx, path)
        if op == "access_field":
            return self.layout.field_at(self.operand(left, ctx, path), right, path)
        if op == "dereference_header_stack":
            return self.stack_element(self.operand(left, ctx, path), self.operand(right, ctx, path), path)
        if op == "last_stack_index":
            return ir.Const(self.last_index(left or right, ctx, path), self.wide)
        raise Unsupported(path, f"expression operator {op}")

    def union_valid(self, v: Any, path: str) -> ir.Expr:
        """Is any member of the union valid?"""
        name = v.get("value") if isinstance(v, dict) and v.get("type") == "header_union" else None
        if name not in self.layout.unions:
            raise Unsupported(path, "validity of a header union that is not a named union")
        result: ir.Expr = ir.Const(False, BOOL)
        for member in self.layout.unions[name]:
            result = ir.Binary("||", result, ir.IsValid(member, BOOL), BOOL)
        return result

    def operand(self, v: Any, ctx: Context, path: str) -> ir.Expr:
        if v is None:
            raise BMv2JsonError(path, "missing operand")
        return self.expr(v, ctx, path)

    def width_op(self, op: str, value: ir.Expr, width: Any, ctx: Context, path: str) -> ir.Expr:
        w_expr = self.operand(width, ctx, path)
        if not isinstance(w_expr, ir.Const) or not isinstance(w_expr.value, int) or w_expr.value < 1:
            raise Unsupported(path, f"{op} to a width that is not a constant")
        w = w_expr.value
        if op == "two_comp_mod":
            return ir.Cast(ir.Cast(value, ir.TInt(w)), self.wide)
        lo, hi = (0, (1 << w) - 1) if op == "usat_cast" else (-(1 << (w - 1)), (1 << (w - 1)) - 1)
        low, high = ir.Const(lo, self.wide), ir.Const(hi, self.wide)
        clamped = ir.Mux(ir.Binary(">", value, high, BOOL), high, value, self.wide)
        return ir.Mux(ir.Binary("<", value, low, BOOL), low, clamped, self.wide)

    def stack_element(self, stack: ir.Expr, index: ir.Expr, path: str) -> ir.Expr:
        if not isinstance(stack.type, ir.TStack):
            raise BMv2JsonError(path, "dereference_header_stack of something that is not a stack")
        if not isinstance(index, ir.Const) or not isinstance(index.value, int):
            # out of range, as the front end's: reads an invalid all-zero header, writes are lost
            return ir.DynIndex(stack, index, ir.THeader(stack.type.elem))
        if not 0 <= index.value < stack.type.size:
            raise Unsupported(path, "header stack index out of bounds")
        return ir.Index(stack, index.value, ir.THeader(stack.type.elem))

    def last_index(self, v: Any, ctx: Context, path: str) -> int:
        """The index of the last extracted element of a stack: known only in a parser state."""
        if ctx.stack_next is None:
            raise Unsupported(path, "last index of a header stack outside a parser")
        name = v.get("value") if isinstance(v, dict) else None
        return ctx.stack_next.get(str(name), 0) - 1

    def v_stack_field(self, value: Any, ctx: Context, path: str) -> ir.Expr:
        """``[stack, field]``: the field of the last extracted element (parser only)."""
        if ctx.stack_next is None:
            raise Unsupported(path, "field of a stack's last element outside a parser")
        last = ctx.stack_next.get(value[0], 0) - 1
        if last < 0:
            raise Unsupported(path, "field of the last element of a stack with none extracted")
        if value[1] == "last":  # p4c's reference to the last element itself
            stack = self.layout.stack(value[0], path)
            assert isinstance(stack.type, ir.TStack)
            return ir.Index(stack, last, ir.THeader(stack.type.elem))
        return self.layout.stack_field(value[0], last, value[1], path)

    def v_lookahead(self, value: Any, ctx: Context, path: str) -> ir.Expr:
        offset, width = int(value[0]), int(value[1])
        peek = ir.Lookahead(ir.TBit(offset + width))
        if offset == 0:
            return peek
        return ir.Slice(peek, width - 1, 0, ir.TBit(width))  # the low bits follow the skipped ones
