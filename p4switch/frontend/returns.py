"""Early `return` in inlined code: the statements after a return run only while a flag is unset.

An inlined action, function or sub-control has no frame of its own to return from, so (as p4c's
RemoveReturns pass) a `return` sets a fresh bool local and whatever could follow it at run time is
guarded by `if (!flag)`. A return with nothing after it needs no flag; statements after a return in the
same list can never run and are dropped.
"""

from __future__ import annotations

from dataclasses import replace

from p4switch import ir

_TRUE = ir.Const(True, ir.TBool())
_FALSE = ir.Const(False, ir.TBool())


def has_return(stmts: tuple[ir.Stmt, ...] | list[ir.Stmt]) -> bool:
    """Whether a Return is among the statements (inside if/switch bodies too)."""
    return any(isinstance(s, ir.Return) or has_return(_bodies_flat(s)) for s in stmts)


def needs_flag(stmts: tuple[ir.Stmt, ...] | list[ir.Stmt], followed: bool = False) -> bool:
    """Whether a statement that may return is followed by another that must then be skipped."""
    for i, s in enumerate(stmts):
        after = followed or i < len(stmts) - 1
        if isinstance(s, ir.Return):
            return False  # what follows in this list is dead code, dropped
        if any(needs_flag(b, after) for b in _bodies(s)):
            return True
        if after and has_return(_bodies_flat(s)):
            return True
    return False


def remove_returns(stmts: list[ir.Stmt], flag: ir.Var | None) -> list[ir.Stmt]:
    """The statements without Return: each sets `flag` (None when `needs_flag` is false) and ends its list;
    what follows a statement that may have returned runs under `if (!flag)`."""
    out: list[ir.Stmt] = [] if flag is None else [ir.Assign(flag, _FALSE, _src(stmts))]
    return out + _guard(stmts, flag)


def _guard(stmts: tuple[ir.Stmt, ...] | list[ir.Stmt], flag: ir.Var | None) -> list[ir.Stmt]:
    out: list[ir.Stmt] = []
    for i, s in enumerate(stmts):
        if isinstance(s, ir.Return):
            if flag is not None:
                out.append(ir.Assign(flag, _TRUE, s.src))
            return out
        if not has_return(_bodies_flat(s)):
            out.append(s)
            continue
        out.append(_rewrite(s, flag))
        rest = _guard(stmts[i + 1 :], flag)
        if rest:
            assert flag is not None, "needs_flag said no flag was needed"
            out.append(ir.If(ir.Unary("!", flag, ir.TBool()), tuple(rest), (), _src(rest)))
        return out
    return out


def _rewrite(s: ir.Stmt, flag: ir.Var | None) -> ir.Stmt:
    if isinstance(s, ir.If):
        return replace(s, then=tuple(_guard(s.then, flag)), else_=tuple(_guard(s.else_, flag)))
    assert isinstance(s, ir.Switch)
    return replace(s, cases=tuple(replace(c, body=tuple(_guard(c.body, flag))) for c in s.cases))


def _bodies(s: ir.Stmt) -> list[tuple[ir.Stmt, ...]]:
    """The statement lists nested directly in an if or a switch."""
    if isinstance(s, ir.If):
        return [s.then, s.else_]
    if isinstance(s, ir.Switch):
        return [c.body for c in s.cases]
    return []


def _bodies_flat(s: ir.Stmt) -> list[ir.Stmt]:
    return [st for body in _bodies(s) for st in body]


def _src(stmts: tuple[ir.Stmt, ...] | list[ir.Stmt]) -> str:
    return stmts[0].src if stmts else ""
