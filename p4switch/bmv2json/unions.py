"""Header unions: BMv2 keeps at most one member of a union valid. Their members are plain header
instances in the IR, and every statement that can make a member valid (extract, add_header, a header
assignment from a valid header) is followed by making its siblings invalid."""

from __future__ import annotations

from typing import Any

from p4switch import ir

BOOL = ir.TBool()


def members(doc: dict[str, Any]) -> dict[str, list[str]]:
    """The member instances of every union (stack elements ``u[0]`` included), by union name."""
    by_id = {h["id"]: h["name"] for h in doc.get("headers", [])}
    return {str(u["name"]): [by_id[i] for i in u.get("header_ids", [])] for u in doc.get("header_unions", [])}


def stacks(doc: dict[str, Any]) -> dict[str, list[dict[str, str]]]:
    """Every union stack: per element, its member instances by member name."""
    types = {t["name"]: [m[0] for m in t.get("headers", [])] for t in doc.get("header_union_types", [])}
    by_id = {h["id"]: h["name"] for h in doc.get("headers", [])}
    unions = {u["id"]: u for u in doc.get("header_unions", [])}
    out = {}
    for s in doc.get("header_union_stacks", []):
        elements = [unions[i] for i in s.get("header_union_ids", [])]
        out[str(s["name"])] = [
            dict(zip(types.get(u["union_type"], []), (by_id[i] for i in u["header_ids"]), strict=False))
            for u in elements
        ]
    return out


def invalidate_siblings(stmts: list[ir.Stmt], siblings: dict[ir.Expr, tuple[ir.Expr, ...]]) -> list[ir.Stmt]:
    """``stmts`` with the siblings of a member made invalid where the member may have become valid."""
    if not siblings:
        return stmts
    out: list[ir.Stmt] = []
    for s in stmts:
        if isinstance(s, ir.If):
            s = ir.If(
                s.cond,
                tuple(invalidate_siblings(list(s.then), siblings)),
                tuple(invalidate_siblings(list(s.else_), siblings)),
                s.src,
            )
        out.append(s)
        if isinstance(s, ir.SetValid | ir.Extract) and s.header in siblings:
            out += [ir.SetInvalid(h, s.src) for h in siblings[s.header]]
        elif isinstance(s, ir.Assign) and s.lhs in siblings:
            off = tuple(ir.SetInvalid(h, s.src) for h in siblings[s.lhs])
            out.append(ir.If(ir.IsValid(s.lhs, BOOL), off, (), s.src))
    return out
