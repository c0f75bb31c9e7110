"""P4 types as the type checker sees them, and typed expression values with constant folding helpers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# kinds: bit int bool infint header struct stack error enum string packet_in packet_out void extern any
#        list (a {...} expression) table action method apply_result block


@dataclass(frozen=True)
class Type:
    """One P4 type. `w` is the width of bit/int, `name` the declared name, `size` a stack's size."""

    k: str
    w: int = 0
    name: str = ""
    size: int = 0
    args: tuple[Type, ...] = ()

    def json(self) -> dict[str, Any]:
        """The IR form of this type (docs/p4switch-ir.md, "Types")."""
        if self.k in ("bit", "int"):
            return {"k": self.k, "w": self.w}
        if self.k in ("header", "struct", "enum"):
            return {"k": self.k, "name": self.name}
        if self.k == "stack":
            return {"k": "stack", "elem": self.name, "size": self.size}
        return {"k": self.k}

    @property
    def is_bits(self) -> bool:
        return self.k in ("bit", "int")

    def __str__(self) -> str:
        if self.k in ("bit", "int"):
            return f"{self.k}<{self.w}>"
        if self.k == "infint":
            return "int"
        if self.k == "stack":
            return f"{self.name}[{self.size}]"
        if self.k in ("header", "struct", "enum", "extern"):
            return f"{self.k} {self.name}"
        return self.k


BOOL = Type("bool")
INFINT = Type("infint")
ERROR = Type("error")
STRING = Type("string")
VOID = Type("void")
ANY = Type("any")


def bit(w: int) -> Type:
    return Type("bit", w)


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
    """A typed expression: IR tree, type, folded constant (if any), and whether it is an lvalue."""

    ir: dict[str, Any]
    t: Type
    const: int | bool | str | None = None
    lv: bool = False
    extra: dict[str, Any] = field(default_factory=dict)  # list items, table/method refs, source text


def const(value: int | bool | str, t: Type) -> Value:
    if isinstance(value, int) and not isinstance(value, bool):
        value = wrap(value, t)
    return Value({"op": "const", "value": value, "type": t.json()}, t, value)
