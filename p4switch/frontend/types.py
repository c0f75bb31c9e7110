"""P4 types as the type checker sees them, and typed expression values with constant folding helpers."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

from p4switch import ir

# kinds: bit int bool infint header union struct stack error enum string packet_in packet_out void extern
#        any list (a {...} expression) table action method apply_result block

_IR_KINDS = frozenset(
    {
        "bit",
        "int",
        "varbit",
        "bool",
        "header",
        "union",
        "struct",
        "stack",
        "error",
        "enum",
        "packet_in",
        "packet_out",
    }
)


@dataclass(frozen=True)
class Type:
    """One P4 type. `w` is the width of bit/int, `name` the declared name, `size` a stack's size and
    `args` its element type (or the type arguments of a generic type)."""

    k: str
    w: int = 0
    name: str = ""
    size: int = 0
    args: tuple[Type, ...] = ()
    newtype: str = field(default="", compare=False)
    """the `type` declaration (P4Info's type_name) or serializable enum (type_info.serializable_enums) this
    type was named by, not part of its identity"""

    @property
    def in_ir(self) -> bool:
        """Whether values of this type can be in the IR (the others exist only while type checking)."""
        return self.k in _IR_KINDS

    def to_ir(self) -> ir.Type:
        """The IR form of this type (docs/p4switch-ir.md, "Types"); only for types that are `in_ir`."""
        return _to_ir(self)

    @property
    def elem(self) -> Type:
        """The element type of a header stack (a header or a header union)."""
        return self.args[0]

    @property
    def is_bits(self) -> bool:
        return self.k in ("bit", "int")

    def __str__(self) -> str:
        if self.k in ("bit", "int", "varbit"):
            return f"{self.k}<{self.w}>"
        if self.k == "infint":
            return "int"
        if self.k == "stack":
            return f"{self.name}[{self.size}]"
        if self.k in ("header", "struct", "enum", "extern"):
            return f"{self.k} {self.name}"
        if self.k == "union":
            return f"header_union {self.name}"
        return self.k


@cache
def _to_ir(t: Type) -> ir.Type:
    if t.k == "bit":
        return ir.TBit(t.w)
    if t.k == "int":
        return ir.TInt(t.w)
    if t.k == "varbit":
        return ir.TVarbit(t.w)
    if t.k == "header":
        return ir.THeader(t.name)
    if t.k in ("struct", "union"):  # a header union is a struct of headers in the IR
        return ir.TStruct(t.name)
    if t.k == "enum":
        return ir.TEnum(t.name)
    if t.k == "stack":
        return ir.TStack(t.name, t.size)
    simple = {"bool": ir.TBool, "error": ir.TError, "packet_in": ir.TPacketIn, "packet_out": ir.TPacketOut}
    if t.k not in simple:
        raise ValueError(f"{t} has no IR form")
    return simple[t.k]()


def from_ir(t: ir.Type) -> Type:
    """The checker's view of an IR type (register and meter result types, header and struct members)."""
    if isinstance(t, ir.TBit | ir.TInt):
        return Type(t.k, t.w)
    if isinstance(t, ir.THeader | ir.TStruct | ir.TEnum):
        return Type(t.k, name=t.name)
    if isinstance(t, ir.TStack):
        return stack_of(Type("header", name=t.elem), t.size)
    return Type(t.k)


BOOL = Type("bool")
INFINT = Type("infint")
ERROR = Type("error")
STRING = Type("string")
VOID = Type("void")
ANY = Type("any")


def bit(w: int) -> Type:
    return Type("bit", w)


def stack_of(elem: Type, size: int) -> Type:
    """The type of a header stack of `size` elements of type `elem` (a header or a header union)."""
    return Type("stack", name=elem.name, size=size, args=(elem,))


def wrap(value: int, t: Type) -> int:
    """Reduce an integer to the range of bit<W> (modulo 2^W) or int<W> (two's complement)."""
    if t.k == "bit":
        return value & ((1 << t.w) - 1)
    if t.k == "int":
        value &= (1 << t.w) - 1
        return value - (1 << t.w) if value >> (t.w - 1) else value
    return value


@dataclass
class Value:
    """A typed expression: its IR node (None for what is not an IR expression: tables, methods, lists,
    integer literals before they get a width), type, folded constant (if any), and whether it is an
    lvalue."""

    node: ir.Expr | None
    t: Type
    const: int | bool | str | None = None
    lv: bool = False
    extra: dict[str, Any] = field(default_factory=dict)  # list items, table/method refs, source text

    @property
    def expr(self) -> ir.Expr:
        """The IR expression; the type checker has made sure there is one before a statement uses it."""
        if self.node is None:
            raise ValueError(f"a value of type {self.t} is not an expression")
        return self.node


def const(value: int | bool | str, t: Type) -> Value:
    if isinstance(value, int) and not isinstance(value, bool):
        value = wrap(value, t)
    return Value(ir.Const(value, t.to_ir()) if t.in_ir else None, t, value)


def member(base: ir.Expr, fname: str, t: ir.Type) -> ir.Expr:
    """`base.fname`. A struct inside a header is flattened into the header's fields (`s.f`), so a member
    of such a struct is that header's field `s.f`, and `h.s` itself only a view (see `header_struct`)."""
    if header_struct(base):
        assert isinstance(base, ir.Member)
        return ir.Member(base.expr, f"{base.field}.{fname}", t)
    return ir.Member(base, fname, t)


def header_struct(e: ir.Expr) -> bool:
    """Whether `e` is a struct inside a header (`h.s`): no value of its own, only its flattened fields."""
    return isinstance(e, ir.Member) and isinstance(e.type, ir.TStruct) and isinstance(e.expr.type, ir.THeader)
