"""Header stack elements chosen at run time (``hdr.s[hdr.i.index].f = 1``).

The IR reaches stack elements by constant index only. While an expression is translated, such an
element is a placeholder: an ``ir.Index`` with a negative index naming an entry here. A statement that
holds one becomes a chain of ``if``s, one per element of the stack (``if (i == 0) {... s[0] ...} else if
(i == 1) ...``); an index out of the stack's bounds runs nothing. A placeholder that survives (somewhere
no statement can hold it) refuses the program: it is never run."""

from __future__ import annotations

import dataclasses
from typing import Any

from p4switch import ir
from p4switch.bmv2json.errors import Unsupported

BOOL = ir.TBool()


class DynamicIndexes:
    """Placeholders of one program and the expansion of the statements that hold them."""

    def __init__(self, wide: ir.Type) -> None:
        self.wide = wide
        self.entries: list[tuple[ir.Expr, ir.Expr]] = []  # (stack, index expression)

    def placeholder(self, stack: ir.Expr, index: ir.Expr) -> ir.Expr:
        assert isinstance(stack.type, ir.TStack)
        if (stack, index) not in self.entries:  # the same element twice in a statement: one test
            self.entries.append((stack, index))
        return ir.Index(stack, -1 - self.entries.index((stack, index)), ir.THeader(stack.type.elem))

    def expand(self, stmts: list[ir.Stmt] | tuple[ir.Stmt, ...]) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for s in stmts:
            out += self.expand_one(s)
        return out

    def expand_one(self, s: ir.Stmt) -> list[ir.Stmt]:
        found = _first_placeholder(s, top=True)
        if found is None:
            return [s]
        stack, index = self.entries[-found.index - 1]
        assert isinstance(stack.type, ir.TStack)
        chain: tuple[ir.Stmt, ...] = ()
        for i in reversed(range(stack.type.size)):
            element = ir.Index(stack, i, found.type)
            then = tuple(self.expand([_substitute(s, found, element)]))
            cond = ir.Binary("==", _wide(index, self.wide), ir.Const(i, self.wide), BOOL)
            chain = (ir.If(cond, then, chain, s.src),)
        return self.expand(list(chain))

    def rvalue(self, e: ir.Expr) -> ir.Expr:
        """``e`` read where no statement can branch (a table key): each placeholder becomes the
        element chosen by a ``?:`` chain (an index out of bounds reads the last element)."""
        found = _first_placeholder(e)
        while found is not None:
            stack, index = self.entries[-found.index - 1]
            assert isinstance(stack.type, ir.TStack)
            size = stack.type.size
            chosen: ir.Expr = ir.Index(stack, size - 1, found.type)
            for i in reversed(range(size - 1)):
                cond = ir.Binary("==", _wide(index, self.wide), ir.Const(i, self.wide), BOOL)
                chosen = ir.Mux(cond, ir.Index(stack, i, found.type), chosen, found.type)
            e = _substitute(e, found, chosen)
            found = _first_placeholder(e)
        return e


def _wide(e: ir.Expr, wide: ir.Type) -> ir.Expr:
    return e if e.type == wide else ir.Cast(e, wide)


def _first_placeholder(node: Any, top: bool = False) -> ir.Index | None:
    """The first placeholder in ``node``, not looking into the bodies of nested statements."""
    if isinstance(node, ir.Index) and node.index < 0:
        inner = _first_placeholder(node.expr)
        return inner or node
    if isinstance(node, ir.Stmt) and not top:
        return None
    for child in ir.children(node):
        found = _first_placeholder(child)
        if found is not None:
            return found
    return None


def _substitute(node: Any, old: ir.Index, new: ir.Expr) -> Any:
    if node == old:
        return new
    if isinstance(node, tuple):
        return tuple(_substitute(x, old, new) for x in node)
    if not dataclasses.is_dataclass(node) or isinstance(node, type):
        return node
    changes = {}
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        replaced = _substitute(value, old, new)
        if replaced is not value:
            changes[f.name] = replaced
    return dataclasses.replace(node, **changes) if changes else node


def check_none_left(program: ir.Program) -> None:
    """Refuses a program where a placeholder was left (a table key, a select key, ...)."""

    def walk(node: Any, where: str) -> None:
        if isinstance(node, ir.Index) and node.index < 0:
            raise Unsupported(where, "header stack index that is not a constant")
        src = getattr(node, "src", "") or where
        for child in ir.children(node):
            walk(child, src)

    for part in (*program.tables, *program.parsers, *program.controls, *program.actions):
        walk(part, getattr(part, "src", "") or getattr(part, "name", ""))
