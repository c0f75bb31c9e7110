"""BMv2 primitive calls (action bodies, parser ``primitive`` ops) as IR statements.

An action's primitive list may hold ``_jump`` / ``_jump_if_zero`` (p4c's if/else inside an action):
they are turned back into ``if`` statements when they nest as p4c writes them, and refused otherwise."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from p4switch import ir
from p4switch.bmv2json.errors import BMv2JsonError, Unsupported, source_position, where
from p4switch.bmv2json.expressions import Context, Expressions, hexstr
from p4switch.bmv2json.unions import invalidate_siblings

Stmts = list[ir.Stmt]
CLONES = {"clone_ingress_pkt_to_egress": "I2E", "clone_egress_pkt_to_egress": "E2E"}
UNSUPPORTED = {
    "truncate": "truncate",
    "assign_union_stack": "header_union stack assignment",
}


class Primitives:
    """Translates primitive calls of one program (calculations, field lists and learn lists by name)."""

    def __init__(self, doc: dict[str, Any], exprs: Expressions) -> None:
        self.exprs = exprs
        self.layout = exprs.layout
        self.calculations = {c["name"]: c for c in doc.get("calculations", [])}
        self.field_lists = {int(f["id"]): f for f in doc.get("field_lists", [])}
        self.learn_lists = {int(f["id"]): f for f in doc.get("learn_lists", [])}
        self.registers = {r["name"]: r for r in doc.get("register_arrays", [])}
        self.digests: dict[str, ir.DigestType] = {}

    # ------------------------------------------------------------------------------ sequences
    def body(self, prims: list[Any], ctx: Context, path: str) -> tuple[ir.Stmt, ...]:
        """A whole primitive list, jumps made back into ifs."""
        return tuple(self.span(prims, 0, len(prims), ctx, path))

    def span(self, prims: list[Any], start: int, end: int, ctx: Context, path: str) -> Stmts:
        out: Stmts = []
        i = start
        while i < end:
            p = prims[i]
            op = p.get("op") if isinstance(p, dict) else None
            at = f"{path}.primitives[{i}]"
            if op == "_jump_if_zero":
                target = self.jump_target(p, 1, at)
                if not i < target <= end:
                    raise Unsupported(where(p, at), "a backward or outward _jump")
                cond = self.exprs.boolean(self.exprs.expr(p["parameters"][0], ctx, at))
                last = prims[target - 1] if target - 1 > i else None
                if isinstance(last, dict) and last.get("op") == "_jump":
                    after = self.jump_target(last, 0, at)
                    if not target <= after <= end:
                        raise Unsupported(where(last, at), "a backward or outward _jump")
                    then = self.span(prims, i + 1, target - 1, ctx, path)
                    else_ = self.span(prims, target, after, ctx, path)
                    out.append(ir.If(cond, tuple(then), tuple(else_), source_position(p)))
                    i = after
                else:
                    out.append(
                        ir.If(cond, tuple(self.span(prims, i + 1, target, ctx, path)), (), source_position(p))
                    )
                    i = target
                continue
            if op == "_jump":
                raise Unsupported(where(p, at), "a _jump that is not the else of an if")
            out += self.finish(self.call(p, ctx, at))
            i += 1
        return out

    def finish(self, stmts: list[ir.Stmt]) -> list[ir.Stmt]:
        """Statements made ready for the IR: union siblings kept invalid."""
        return invalidate_siblings(stmts, self.layout.siblings)

    def jump_target(self, p: dict[str, Any], n: int, path: str) -> int:
        params = p.get("parameters") or []
        if len(params) <= n or params[n].get("type") != "hexstr":
            raise BMv2JsonError(path, f"{p.get('op')} without a constant offset")
        return hexstr(params[n]["value"], path)

    # ----------------------------------------------------------------------------- one call
    def call(self, p: Any, ctx: Context, path: str) -> Stmts:
        if not isinstance(p, dict) or not isinstance(p.get("op"), str):
            raise BMv2JsonError(path, "a primitive call without an op")
        op = p["op"]
        at = where(p, path)
        if op in UNSUPPORTED:
            raise Unsupported(at, UNSUPPORTED[op])
        handler: Callable[[list[Any], Context, str, str], Stmts] | None = getattr(self, "p_" + op, None)
        if handler is None:
            raise Unsupported(at, f"primitive {op}")
        return handler(p.get("parameters") or [], ctx, path, source_position(p))

    def arg(self, params: list[Any], n: int, ctx: Context, path: str) -> ir.Expr:
        if len(params) <= n:
            raise BMv2JsonError(path, f"primitive has no parameter {n}")
        return self.exprs.expr(params[n], ctx, path)

    def lvalue(self, params: list[Any], n: int, ctx: Context, path: str) -> ir.Expr:
        e = self.arg(params, n, ctx, path)
        if not isinstance(e, ir.Member | ir.Var | ir.Index | ir.DynIndex | ir.Slice):
            raise BMv2JsonError(path, "assignment to something that is not a field or header")
        return e

    def p_assign(self, params: list[Any], ctx: Context, path: str, src: str) -> Stmts:
        dst = self.lvalue(params, 0, ctx, path)
        value = self.arg(params, 1, ctx, path)
        return [ir.Assign(dst, self.exprs.to_type(value, dst.type), src)]

    p_modify_field = p_assign
    p_assign_header = p_assign
    p_assign_header_stack = p_assign

    def p_assign_VL(self, params: list[Any], ctx: Context, path: str, src: str) -> Stmts:  # noqa: N802
        """A varbit copied with its length (BMv2's Field::assign_VL)."""
        dst = self.lvalue(params, 0, ctx, path)
        value = self.arg(params, 1, ctx, path)
        if not (isinstance(dst.type, ir.TVarbit) and dst.type == value.type):
            raise BMv2JsonError(path, f"assign_VL of a {value.type} to a {dst.type}, not varbit to varbit")
        return [ir.Assign(dst, value, src)]

    def p_assign_union(self, params: list[Any], ctx: Context, path: str, src: str) -> Stmts:
        dst, value = (self.union(params, n, path) for n in (0, 1))
        return [ir.Assign(d, v, src) for d, v in zip(dst, value, strict=True)]

    def union(self, params: list[Any], n: int, path: str) -> list[ir.Expr]:
        if len(params) <= n or params[n].get("type") != "header_union":
            raise Unsupported(path, "a header union operand that is not a named union")
        try:
            return self.layout.unions[str(params[n]["value"])]
        except KeyError:
            raise BMv2JsonError(path, f"unknown header union {params[n]['value']!r}") from None

    def p_add_header(self, params: list[Any], ctx: Context, path: str, src: str) -> Stmts:
        return [ir.SetValid(self.lvalue(params, 0, ctx, path), src)]

    def p_remove_header(self, params: list[Any], ctx: Context, path: str, src: str) -> Stmts:
        return [ir.SetInvalid(self.lvalue(params, 0, ctx, path), src)]

    def p_mark_to_drop(self, params: list[Any], ctx: Context, path: str, src: str) -> Stmts:
        sm = self.arg(params, 0, ctx, path) if params else self.layout.instance("standard_metadata", path)
        return [ir.Call("mark_to_drop", args=(sm,), src=src)]

    p_drop = p_mark_to_drop

    def p_exit(self, params: list[Any], ctx: Context, path: str, src: str) -> Stmts:
        return [ir.Exit(src)]

    def p_count(self, params: list[Any], ctx: Context, path: str, src: str) -> Stmts:
        index = self.exprs.data(self.arg(params, 1, ctx, path))
        return [ir.MethodCall(self.named(params, 0, "counter_array", path), "count", (index,), src)]

    def p_execute_meter(self, params: list[Any], ctx: Context, path: str, src: str) -> Stmts:
        name = self.named(params, 0, "meter_array", path)
        index = self.exprs.data(self.arg(params, 1, ctx, path))
        return [ir.MethodCall(name, "execute_meter", (index, self.lvalue(params, 2, ctx, path)), src)]

    def p_register_read(self, params: list[Any], ctx: Context, path: str, src: str) -> Stmts:
        name = self.named(params, 1, "register_array", path)
        index = self.exprs.data(self.arg(params, 2, ctx, path))
        return [ir.MethodCall(name, "read", (self.lvalue(params, 0, ctx, path), index), src)]

    def p_register_write(self, params: list[Any], ctx: Context, path: str, src: str) -> Stmts:
        name = self.named(params, 0, "register_array", path)
        index = self.exprs.data(self.arg(params, 1, ctx, path))
        width = int(self.registers[name].get("bitwidth", 0)) if name in self.registers else 0
        value = self.exprs.to_type(self.arg(params, 2, ctx, path), ir.TBit(width))
        return [ir.MethodCall(name, "write", (index, value), src)]

    def named(self, params: list[Any], n: int, kind: str, path: str) -> str:
        if len(params) <= n or params[n].get("type") != kind:
            raise BMv2JsonError(path, f"parameter {n} is not a {kind}")
        return str(params[n]["value"])

    def p_clone_ingress_pkt_to_egress(self, params: list[Any], ctx: Context, path: str, src: str) -> Stmts:
        return self.clone("I2E", params, ctx, path, src)

    def p_clone_egress_pkt_to_egress(self, params: list[Any], ctx: Context, path: str, src: str) -> Stmts:
        return self.clone("E2E", params, ctx, path, src)

    def clone(self, kind: str, params: list[Any], ctx: Context, path: str, src: str) -> Stmts:
        session = self.exprs.to_type(self.arg(params, 0, ctx, path), ir.TBit(32))
        list_id = hexstr(params[1]["value"], path) if len(params) > 1 else 0
        if not list_id:
            return [ir.Call("clone", clone_type=kind, args=(session,), src=src)]
        paths = tuple(self.metadata_path(e, path) for e in self.field_list(list_id, path))
        return [
            ir.Call(
                "clone_preserving_field_list", clone_type=kind, args=(session,), field_list=paths, src=src
            )
        ]

    def p_resubmit(self, params: list[Any], ctx: Context, path: str, src: str) -> Stmts:
        return self.again("resubmit_preserving_field_list", params, path, src)

    def p_recirculate(self, params: list[Any], ctx: Context, path: str, src: str) -> Stmts:
        return self.again("recirculate_preserving_field_list", params, path, src)

    def again(self, name: str, params: list[Any], path: str, src: str) -> Stmts:
        """resubmit/recirculate (BMv2's argument is a field list id; none or 0 keeps no field) as the v1model
        call the front end writes, with the paths in the user metadata the new pass keeps."""
        list_id = hexstr(params[0]["value"], path) if params else 0
        elements = self.field_list(list_id, path) if list_id else []
        paths = tuple(self.metadata_path(e, path) for e in elements)
        return [ir.Call(name, field_list=paths, src=src)]

    def field_list(self, list_id: int, path: str) -> list[Any]:
        if list_id not in self.field_lists:
            raise BMv2JsonError(path, f"no field list with id {list_id}")
        return list(self.field_lists[list_id].get("elements", []))

    def metadata_path(self, element: Any, path: str) -> tuple[str, ...]:
        """A field-list element as the path inside the metadata struct that clone keeps."""
        e = self.exprs.expr(element, Context(), path)
        names: list[str] = []
        while isinstance(e, ir.Member):
            names.insert(0, e.field)
            e = e.expr
        if not (isinstance(e, ir.Var) and e.name == "meta"):
            raise Unsupported(path, "a field list of fields outside the user metadata")
        return tuple(names)

    def p_modify_field_with_hash_based_offset(
        self, params: list[Any], ctx: Context, path: str, src: str
    ) -> Stmts:
        dst = self.lvalue(params, 0, ctx, path)
        base = self.exprs.data(self.arg(params, 1, ctx, path))
        calc = self.calculation(self.named(params, 2, "calculation", path), path)
        size = self.exprs.data(self.arg(params, 3, ctx, path))
        data, payload = self.calculation_data(calc, path)
        if payload:
            raise Unsupported(path, "hash of the payload")
        return [ir.Call("hash", algorithm=str(calc.get("algo")), args=(dst, base, size), data=data, src=src)]

    def calculation(self, name: str, path: str) -> dict[str, Any]:
        try:
            return dict(self.calculations[name])
        except KeyError:
            raise BMv2JsonError(path, f"unknown calculation {name!r}") from None

    def calculation_data(self, calc: dict[str, Any], path: str) -> tuple[tuple[ir.Expr, ...], bool]:
        """The data a calculation hashes, and whether the payload follows it."""
        data: list[ir.Expr] = []
        payload = False
        for i, item in enumerate(calc.get("input", [])):
            at = f"calculations ({calc.get('name')}).input[{i}]"
            kind = item.get("type")
            if kind == "payload":
                payload = True
            elif kind == "hexstr":
                data.append(ir.Const(hexstr(item["value"], at), ir.TBit(int(item.get("bitwidth", 0)))))
            elif kind == "header":
                header = self.layout.instance(item["value"], at)
                data += [self.layout.field_at(header, n, at) for n in range(self.header_size(header))]
            else:
                data.append(self.exprs.expr(item, Context(), at))
        return tuple(data), payload

    def header_size(self, header: ir.Expr) -> int:
        assert isinstance(header.type, ir.THeader)
        return len(self.layout.headers[header.type.name].fields)

    def p_modify_field_rng_uniform(self, params: list[Any], ctx: Context, path: str, src: str) -> Stmts:
        dst = self.lvalue(params, 0, ctx, path)
        lo, hi = (self.exprs.data(self.arg(params, n, ctx, path)) for n in (1, 2))
        return [ir.Call("random", args=(dst, lo, hi), src=src)]

    def p_generate_digest(self, params: list[Any], ctx: Context, path: str, src: str) -> Stmts:
        receiver = hexstr(params[0]["value"], path) if params and params[0].get("type") == "hexstr" else None
        list_id = hexstr(params[1]["value"], path) if len(params) > 1 else -1
        learn = self.learn_lists.get(list_id)
        if learn is None:
            raise BMv2JsonError(path, f"no learn list with id {list_id}")
        fields = tuple(self.exprs.expr(e, ctx, path) for e in learn.get("elements", []))
        name = str(learn["name"])
        if name not in self.digests:
            names = [
                str(e["value"][1]).rsplit(".", 1)[-1] if e.get("type") == "field" else f"f{i}"
                for i, e in enumerate(learn.get("elements", []))
            ]
            self.digests[name] = ir.DigestType(
                name, tuple(ir.DigestField(n, f.type) for n, f in zip(names, fields, strict=True))
            )
        return [ir.Digest(name, receiver, fields, src)]

    def p_log_msg(self, params: list[Any], ctx: Context, path: str, src: str) -> Stmts:
        fmt = str(params[0].get("value", "")) if params else ""
        values = params[1].get("value", []) if len(params) > 1 else []
        args = tuple(self.exprs.data(self.exprs.expr(v, ctx, path)) for v in values)
        return [ir.Call("log_msg", format=fmt, args=args, src=src)]

    def p_assert(self, params: list[Any], ctx: Context, path: str, src: str) -> Stmts:
        return [ir.Call("assert", args=(self.exprs.boolean(self.arg(params, 0, ctx, path)),), src=src)]

    def p_assume(self, params: list[Any], ctx: Context, path: str, src: str) -> Stmts:
        return [ir.Call("assume", args=(self.exprs.boolean(self.arg(params, 0, ctx, path)),), src=src)]

    def p_push(self, params: list[Any], ctx: Context, path: str, src: str) -> Stmts:
        return self.shift_stack(params, ctx, path, src, toward_end=True)

    def p_pop(self, params: list[Any], ctx: Context, path: str, src: str) -> Stmts:
        return self.shift_stack(params, ctx, path, src, toward_end=False)

    def shift_stack(self, params: list[Any], ctx: Context, path: str, src: str, toward_end: bool) -> Stmts:
        """push_front(n) / pop_front(n) as element copies, the freed elements made invalid."""
        stack = self.arg(params, 0, ctx, path)
        count = self.arg(params, 1, ctx, path)
        if not isinstance(stack.type, ir.TStack) or not isinstance(count, ir.Const):
            raise Unsupported(path, "push or pop of a header stack by a count that is not a constant")
        size, n, t = stack.type.size, int(count.value), ir.THeader(stack.type.elem)

        def elem(i: int) -> ir.Expr:
            return ir.Index(stack, i, t)

        out: Stmts = []
        if toward_end:
            out += [ir.Assign(elem(i), elem(i - n), src) for i in range(size - 1, n - 1, -1)]
            out += [ir.SetInvalid(elem(i), src) for i in range(min(n, size))]
        else:
            out += [ir.Assign(elem(i), elem(i + n), src) for i in range(0, size - n)]
            out += [ir.SetInvalid(elem(i), src) for i in range(max(size - n, 0), size)]
        return out
