"""What the lowering parts share: the symbols of a scope, the state of the block being lowered, and the
base class of the parts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from p4switch import ir
from p4switch.frontend.errors import Pos, unsupported
from p4switch.frontend.source import PTree, name_of, read_annotations
from p4switch.frontend.types import ANY, Type, Value

if TYPE_CHECKING:
    from p4switch.frontend.parts import FrontEnd


@dataclass
class Sym:
    """What a name means in a scope."""

    kind: str  # var alias const table action inst subcontrol extern_fn instance
    t: Type = ANY
    qname: str = ""  # IR variable name, or fully qualified control-plane name
    value: Value | None = None
    tree: PTree | None = None
    control: str | None = None
    readonly: bool = False  # `in` and action-data parameters
    ctor: dict[str, Sym] | None = None  # a sub-control instance: its constructor parameters by name


@dataclass
class Ctx:
    """State while lowering one parser or control."""

    block: str
    kind: str  # parser | control
    scopes: list[dict[str, Sym]]
    used: set[str] = field(default_factory=set)
    locals: list[ir.Local] = field(default_factory=list)
    sink: list[ir.Local] | None = None  # where hoisted locals go (an action's locals while lowering it)
    params: list[ir.Param] = field(default_factory=list)
    prefix: str = ""  # control-plane name prefix: the block, or the instance path of an inlined sub-control
    stack_next: dict[str, int] | None = None  # parsers: nextIndex of each header stack in the current state
    pre: list[ir.Stmt] | None = None  # what the calls in the current statement's expressions need first
    in_action: int = 0  # nesting depth of action bodies being lowered (no table may be applied there)
    exit_copy_out: list[ir.Stmt] = field(default_factory=list)  # what an `exit` copies out first (inlining)
    in_function: int = 0  # nesting depth of the functions being inlined
    result: Value | None = None  # the result variable of the function being inlined (`return e;` sets it)

    def fresh(self, base: str) -> str:
        """A variable name not used yet in this block (`base`, else `base_1`, `base_2`, ...)."""
        name, i = base, 0
        while name in self.used:
            i += 1
            name = f"{base}_{i}"
        self.used.add(name)
        return name

    def add_local(self, base: str, t: Type, pos: Pos) -> str:
        """A new local of the block (or of the action being lowered) under a fresh name."""
        if not t.in_ir:
            raise unsupported(pos, f"a variable of type {t}")
        name = self.fresh(base)
        (self.sink if self.sink is not None else self.locals).append(ir.Local(name, t.to_ir()))
        return name


class Part:
    """Base of the front end's parts, one concern each: the front end they belong to (`fe`, through which
    they reach the other parts and the symbols) and the source helpers every part uses."""

    name = staticmethod(name_of)
    annos = staticmethod(read_annotations)

    def __init__(self, fe: FrontEnd) -> None:
        self.fe = fe
        self.pos = fe.source.pos
        self.src = fe.source.src
        self.source_text = fe.source.text_of
