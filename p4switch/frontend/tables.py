"""The tables part: tables, and the actions they run.

A table gets its P4Info-named keys, its actions with their scopes (@tableonly, @defaultonly), its default
action (NoAction when the source has none), its properties (size, direct counter and meter, action
profile or selector, idle timeout) and its const entries with P4Runtime priorities (larger wins). An
action a table runs is lowered once, with its parameters as action data.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from lark import Tree

from p4switch import ir
from p4switch.frontend.errors import type_error, unsupported
from p4switch.frontend.scope import Ctx, Part, Sym
from p4switch.frontend.source import Node, PTree, kids, parse_int
from p4switch.frontend.types import BOOL, bit, const, from_ir

if TYPE_CHECKING:
    from p4switch.frontend.parts import FrontEnd


_NO_DEFAULT = ir.DefaultAction("")  # a table's default action before its properties are read


class Tables(Part):
    """Lowers tables and the actions they run; `tables` and `actions` are what the program lists."""

    def __init__(self, fe: FrontEnd) -> None:
        super().__init__(fe)
        self.actions: dict[str, ir.Action | None] = {}  # None while its body is being lowered
        self.action_annos: dict[str, dict[str, list[Any]]] = {}
        self.tables: list[ir.Table] = []
        self.table_annos: dict[str, dict[str, list[Any]]] = {}
        # for P4Info, as p4c writes it: annotations of keys, action parameters and actions-list items, the
        # actions a control body calls directly (p4c lists those too)
        self.key_annos: dict[str, list[dict[str, list[Any]]]] = {}
        self.param_annos: dict[str, list[dict[str, list[Any]]]] = {}
        self.type_names: dict[str, list[str]] = {}  # per table its keys', per action its params' `type`s
        self.called_actions: list[str] = []
        self.action_ref_annos: dict[tuple[str, str], dict[str, list[Any]]] = {}  # (table, action)
        # the arguments an actions list binds to an action's directional parameters: (block, their text)
        self.bindings: dict[str, tuple[str, tuple[str, ...]] | None] = {}

    def lower_table(self, node: PTree, fq: str, ctx: Ctx) -> None:
        self.table_annos[fq] = self.annos(node.children[0])
        props = node.children[2:]
        keys: tuple[ir.TableKey, ...] = ()
        for prop in props:
            if prop.data == "key_prop":
                keys = tuple(self.table_key(k, ctx) for k in prop.children)
                self.key_annos[fq] = [self.annos(k.children[2]) for k in prop.children]
                self.type_names[fq] = [
                    self.fe.exprs.expr(k.children[0], ctx).t.newtype for k in prop.children
                ]
        actions: tuple[ir.ActionRef, ...] = ()
        for prop in props:
            if prop.data == "actions_prop":
                actions = tuple(self.table_action_ref(item, ctx) for item in prop.children)
                for item, ref in zip(prop.children, actions, strict=True):
                    self.action_ref_annos[(fq, ref.name)] = self.annos(item.children[0])
        # the default action stays NoAction(name "") until a property sets one
        table = ir.Table(fq, ctx.block, self.src(node), keys, actions, _NO_DEFAULT, size=1024)
        for prop in props:
            if prop.data == "simple_prop":
                table = self.table_property(prop, table, ctx)
        for prop in props:
            if prop.data == "entries_prop":
                table = replace(table, entries_const=prop.children[1].data == "is_const")
                entries = self.table_entries(prop, table, ctx)
                table = replace(table, entries=self.order_entries(table, entries, prop, ctx))
        if table.default_action is _NO_DEFAULT:
            table = replace(table, default_action=ir.DefaultAction("NoAction", (), False))
            if "NoAction" not in [a.name for a in table.actions]:
                self.ensure_action(self.fe.exprs.lookup_sym("NoAction", node, ctx), ctx)
                table = replace(table, actions=table.actions + (ir.ActionRef("NoAction", "default_only"),))
        self.tables.append(table)

    def table_key(self, k: PTree, ctx: Ctx) -> ir.TableKey:
        v = self.fe.exprs.expr(k.children[0], ctx)
        kind = self.name(k.children[1])
        if kind not in self.fe.decls.match_kinds:
            raise type_error(self.pos(k.children[1]), f"unknown match kind {kind}")
        if not (v.t.is_bits or v.t.k in ("bool", "error")):
            raise type_error(self.pos(k.children[0]), f"table key of type {v.t}")
        if v.t.k == "error" and kind != "exact":
            raise unsupported(self.pos(k.children[1]), f"{kind} match on an error")
        annos = self.annos(k.children[2])
        name = annos["name"][0] if annos.get("name") else self.key_name(k.children[0], ctx)
        t = bit(1) if v.t.k == "bool" else v.t
        expr = v.expr if v.t.k != "bool" else ir.Cast(v.expr, t.to_ir())
        return ir.TableKey(name, kind, t.to_ir(), expr)

    def key_name(self, node: PTree, ctx: Ctx) -> str:
        """The name p4c gives a key that has no @name (frontends/p4/tableKeyNames.cpp): paths, fields
        (their @name; `$valid$` for isValid()), indices, slices, `&` and constants as p4c prints them;
        the source text for the expressions where p4c asks for a @name."""
        return self.p4c_key_name(node, ctx) or self.source_text(node)

    def p4c_key_name(self, node: Node, ctx: Ctx) -> str | None:
        if not isinstance(node, Tree):
            return None
        d, parts = node.data, kids(node)
        if d in ("name_ref", "prefixed_name"):
            return str(parts[0])
        if d == "int_lit":
            text = str(parts[0]).replace("_", "")
            value, _ = parse_int(text)
            prefix = re.sub(r"^\d+[ws]", "", text)[:2].lower()
            return {"0x": f"0x{value:x}", "0b": f"0b{value:b}", "0o": f"0o{value:o}"}.get(prefix, str(value))
        if d == "member":
            field = self.name(parts[1])
            base_type = self.fe.exprs.expr(parts[0], ctx).t
            if base_type.k in ("header", "union") and field == "isValid":
                field = "$valid$"
            field = self.fe.decls.field_names.get((base_type.name, field), field)
            base = self.p4c_key_name(parts[0], ctx)
            return field[1:] if field.startswith(".") else base and f"{base}.{field}"
        if d == "call":
            method = self.p4c_key_name(parts[0], ctx)
            no_args = len(parts) == 1 or not kids(parts[1])
            return method if method and method.endswith("$valid$") and no_args else None
        inner = [self.p4c_key_name(n, ctx) for n in parts]
        shapes = {"index": "{0}[{1}]", "slice": "{0}[{1}:{2}]", "band_op": "{0} & {1}"}
        return shapes[d].format(*inner) if d in shapes and None not in inner else None

    def table_action_ref(self, item: PTree, ctx: Ctx) -> ir.ActionRef:
        annos = self.annos(item.children[0])
        ref = item.children[1]
        bound = kids(kids(ref)[1]) if len(kids(ref)) > 1 else []
        sym = self.fe.exprs.lookup_sym(self.prefixed(ref.children[0]), ref, ctx)
        if sym.kind != "action":
            raise type_error(self.pos(ref), f"{self.prefixed(ref.children[0])} is not an action")
        self.ensure_action(sym, ctx, bound, ref)
        scope = "table_only" if "tableonly" in annos else "default_only" if "defaultonly" in annos else "all"
        return ir.ActionRef(sym.qname, scope)

    def prefixed(self, node: Node) -> str:
        return str(node.children[0]) if isinstance(node, Tree) else str(node)

    def table_property(self, prop: PTree, table: ir.Table, ctx: Ctx) -> ir.Table:
        """The table with one `name = value` property applied."""
        pname = self.name(prop.children[2])
        is_const = prop.children[1].data == "is_const"
        value = prop.children[3]
        if pname == "default_action":
            name, args = self.action_call(value, table, ctx, "default_only")
            return replace(table, default_action=ir.DefaultAction(name, tuple(args), is_const))
        if pname == "size":
            return replace(table, size=self.fe.exprs.const_int(value, ctx))
        if pname in ("counters", "meters", "implementation"):
            inst = self.table_extern(value, table, ctx, self.annos(prop.children[0]))
            wanted = {
                "counters": ("direct_counter",),
                "meters": ("direct_meter",),
                "implementation": ("action_profile", "action_selector"),
            }[pname]
            if inst.tag not in wanted:
                raise type_error(self.pos(value), f"{pname} must be a {' or '.join(wanted)}, got {inst.tag}")
            if isinstance(inst, ir.ActionProfile | ir.ActionSelector):
                self.fe.v1.extern_by_name[inst.name] = replace(inst, tables=inst.tables + (table.name,))
                return replace(table, implementation=inst.name)
            assert isinstance(inst, ir.DirectCounter | ir.DirectMeter)
            if inst.table is not None:
                raise type_error(self.pos(value), f"{inst.name} is already used by {inst.table}")
            self.fe.v1.extern_by_name[inst.name] = replace(inst, table=table.name)
            if pname == "counters":
                return replace(table, direct_counter=inst.name)
            return replace(table, direct_meter=inst.name)
        if pname == "support_timeout":
            if self.fe.exprs.expr(value, ctx).const is True:
                return replace(table, support_timeout=True)
            return table
        if pname in ("largest_priority_wins", "priority_delta"):
            return table  # read with the entries (order_entries)
        raise unsupported(self.pos(prop), f"table property {pname}")

    def table_extern(
        self, value: PTree, table: ir.Table, ctx: Ctx, annos: dict[str, list[Any]]
    ) -> ir.ExternInstance:
        """The instance a table property names, or instantiates inline (named by @name or after the table)."""
        if value.data == "ctor_call":
            t = (
                self.fe.decls.resolve_type(value.children[0])
                if isinstance(value.children[0], Tree)
                else self.fe.decls.named_type(value.children[0])
            )
            # p4c names it by the property's @name alone (no control prefix); P4Runtime needs one
            fq = self.fe.decls.fq(None, "", annos) if annos.get("name") else table.name + "_" + t.name
            return self.fe.v1.instantiate(t, kids(value.children[1]), fq, value, ctx, annos)
        if value.data != "name_ref":
            raise type_error(self.pos(value), "expected the name of an extern instance")
        sym = self.fe.exprs.lookup_sym(str(value.children[0]), value, ctx)
        if sym.kind != "inst":
            raise type_error(self.pos(value), f"{value.children[0]} is not an extern instance")
        return self.fe.v1.extern_by_name[sym.qname]

    def action_call(self, node: PTree, table: ir.Table, ctx: Ctx, scope_ok: str) -> tuple[str, list[int]]:
        """`a(1, 2)` or `a` in a table (default_action, entries): the action name and constant args."""
        if node.data in ("call", "action_ref"):
            callee, args = node.children[0], kids(node.children[1]) if node.children[1] is not None else []
        else:
            callee, args = node, []
        if not (
            isinstance(callee, Tree) and callee.data in ("name_ref", "top_ref", "prefixed_name", "top_name")
        ):
            raise type_error(self.pos(node), "expected an action call")
        sym = self.fe.exprs.lookup_sym(str(callee.children[0]), callee, ctx)
        if sym.kind != "action" or sym.tree is None:
            raise type_error(self.pos(callee), f"{callee.children[0]} is not an action")
        allowed = {a.name: a.scope for a in table.actions}
        if sym.qname not in allowed:
            raise type_error(
                self.pos(callee), f"action {sym.qname} is not in the actions of table {table.name}"
            )
        bad = "table_only" if scope_ok == "default_only" else "default_only"
        if allowed[sym.qname] == bad:
            raise type_error(
                self.pos(callee), f"action {sym.qname} is @{bad.replace('_', '')} in {table.name}"
            )
        params = kids(sym.tree.children[2])
        binding = self.bindings.get(sym.qname)
        bound = len(binding[1]) if binding else 0
        if len(args) == len(params) and bound:  # the arguments the actions list binds, given again
            args = args[bound:]
        params = params[bound:]
        if len(params) != len(args):
            raise type_error(
                self.pos(node), f"action {sym.qname} takes {len(params)} arguments, got {len(args)}"
            )
        values = []
        for p, a in zip(params, args, strict=True):
            v = self.fe.exprs.coerce(self.fe.exprs.expr(a, ctx), self.fe.decls.resolve_type(p.children[2]), a)
            if v.const is None:
                raise type_error(self.pos(a), "action data in a table must be a compile-time constant")
            values.append(int(v.const))
        return sym.qname, values

    def table_entries(self, prop: PTree, table: ir.Table, ctx: Ctx) -> tuple[ir.Entry, ...]:
        keys = [k for k in table.keys if k.match != "selector"]
        needs_priority = any(k.match in ("ternary", "range", "optional") for k in keys)
        entries = []
        raw = prop.children[2:]
        for e in raw:
            ks = e.children[2]
            elems = kids(ks) if ks.data == "tuple_keyset" else [ks]
            if len(elems) == 1 and elems[0].data == "ks_default" and len(keys) > 1:
                elems = elems * len(keys)
            if len(elems) != len(keys):
                raise type_error(
                    self.pos(ks), f"entry has {len(elems)} keys, table {table.name} has {len(keys)}"
                )
            match = tuple(self.entry_match(el, k, ctx) for el, k in zip(elems, keys, strict=True))
            name, args = self.action_call(e.children[3], table, ctx, "table_only")
            priority = 1 if needs_priority else 0  # order_entries sets them
            entries.append(ir.Entry(match, ir.EntryAction(name, tuple(args)), priority, self.src(e)))
        return tuple(entries)

    def order_entries(
        self, table: ir.Table, entries: tuple[ir.Entry, ...], prop: PTree, ctx: Ctx
    ) -> tuple[ir.Entry, ...]:
        """Entry priorities (larger wins, as P4Runtime) that give the order BMv2 runs p4c's entries in.

        p4c's BMv2 back end numbers each entry by its position, or by its `@priority(N)` annotation, and
        BMv2 runs the smallest number first (the earlier entry on a tie). `priority = N:` (allowed only
        in non-const `entries`, the first entry first) does not change that order: it is for P4Runtime.
        """
        raw = prop.children[2:]
        needs_priority = bool(raw) and entries[0].priority > 0
        given = [e.children[1] for e in raw if e.children[1] is not None]
        if given:
            if not needs_priority or table.entries_const:
                what = "const entries" if table.entries_const else "no ternary, range or optional key"
                raise type_error(self.pos(given[0]), f"entry priority in table {table.name} with {what}")
            if raw[0].children[1] is None:
                raise type_error(self.pos(raw[0]), "the first entry must have a priority")
            for g in given:
                if str(g.children[0]) != "priority":
                    raise type_error(self.pos(g), "expected `priority = N :` before the keyset")
                self.fe.exprs.const_int(g.children[1], ctx)
        if not needs_priority:
            return entries
        bmv2 = []
        for position, e in enumerate(raw, 1):
            annotated = self.annos(e.children[4]).get("priority") or self.annos(e.children[0]).get("priority")
            bmv2.append(int(annotated[0]) if annotated and isinstance(annotated[0], int) else position)
        ordered = list(entries)
        for rank, i in enumerate(sorted(range(len(raw)), key=lambda i: (bmv2[i], i))):
            ordered[i] = replace(entries[i], priority=len(raw) - rank)
        return tuple(ordered)

    def entry_match(self, el: PTree, key: ir.TableKey, ctx: Ctx) -> ir.EntryMatch:
        if isinstance(key.type, ir.TError):  # as p4c for BMv2
            raise unsupported(self.pos(el), "a const entry on an error key")
        kt = from_ir(key.type)
        kind = key.match
        full = (1 << kt.w) - 1

        def value(n: Node) -> int:
            v = self.fe.exprs.expr(n, ctx)  # constants of the control too
            if v.t == BOOL and v.const is not None and kt == bit(1):  # isValid() keys: true / false
                v = const(int(v.const), kt)
            v = self.fe.exprs.coerce(v, kt, n)
            if v.const is None:
                raise type_error(self.pos(n), "entry keys must be compile-time constants")
            return int(v.const) & full

        if el.data == "ks_default":
            return ir.MatchDontCare()
        if kind == "exact" and el.data == "ks_exact":
            return ir.MatchExact(value(el.children[0]))
        if kind == "optional" and el.data == "ks_exact":
            return ir.MatchOptional(value(el.children[0]))
        if kind == "ternary" and el.data in ("ks_exact", "ks_mask"):
            mask = value(el.children[1]) if el.data == "ks_mask" else full
            return ir.MatchTernary(value(el.children[0]) & mask, mask)
        if kind == "lpm" and el.data in ("ks_exact", "ks_mask"):
            mask = value(el.children[1]) if el.data == "ks_mask" else full
            plen = bin(mask).count("1")
            if mask != full ^ (full >> plen):
                raise type_error(self.pos(el), f"lpm mask {mask:#x} is not a prefix")
            return ir.MatchLpm(value(el.children[0]) & mask, plen)
        if kind == "range" and el.data in ("ks_exact", "ks_range"):
            lo = value(el.children[0])
            hi = value(el.children[1]) if el.data == "ks_range" else lo
            return ir.MatchRange(lo, hi)
        raise type_error(self.pos(el), f"this keyset does not fit a {kind} key")

    def ensure_action(
        self, sym: Sym, ctx: Ctx, bound: list[Node] | None = None, ref: Node | None = None
    ) -> None:
        """Lower an action invoked by a table (once), with its params as action data.

        Arguments bound in the actions list (`a(hdr.x)`) go to its first, directional, parameters: each
        run of the action evaluates them, copies in and (out/inout) copies out around the body, as p4c
        lowers them; the rest are action data. An action bound again elsewhere (another table, another
        control) must come out the same there.
        """
        if sym.tree is None:
            return
        texts = tuple(self.source_text(n) if isinstance(n, Tree) else str(n) for n in bound or ())
        binding = (ctx.block, texts) if bound else None
        known = self.actions.get(sym.qname, False)
        if known is not False:
            if self.bindings[sym.qname] != binding and (
                known is None or self.rebound(sym, ctx, bound, ref) != known
            ):
                where = self.pos(ref if ref is not None else sym.tree)
                raise unsupported(where, f"action {sym.qname} bound to other arguments elsewhere")
            return
        self.bindings[sym.qname] = binding
        self.actions[sym.qname] = None  # its place in the list: actions are listed as tables first use them
        self.action_annos[sym.qname] = self.annos(sym.tree.children[0])
        self.actions[sym.qname] = self.lower_action(sym, ctx, bound, ref)

    def rebound(self, sym: Sym, ctx: Ctx, bound: list[Node] | None, ref: Node | None) -> ir.Action:
        """The action lowered again for another binding (as if of the first one's control)."""
        first = self.actions[sym.qname]
        assert first is not None
        return replace(self.lower_action(sym, ctx, bound, ref), control=first.control)

    def lower_action(self, sym: Sym, ctx: Ctx, bound: list[Node] | None, ref: Node | None) -> ir.Action:
        tree = sym.tree
        assert tree is not None
        all_params = kids(tree.children[2])
        n = len(bound or ())
        if n > len(all_params):
            where = self.pos(ref if ref is not None else tree)
            raise type_error(where, f"action {sym.qname} takes {len(all_params)} arguments, got {n}")
        actx = ctx if sym.control or bound else Ctx("", "control", [self.fe.decls.globals, {}])
        saved = actx.sink, list(actx.scopes), actx.exit_copy_out
        locals_: list[ir.Local] = []
        actx.sink = locals_
        head, copy_out = self.bind_arguments(sym, all_params[:n], bound or [], actx)
        params = self.data_params(sym.qname, all_params[n:], actx)
        actx.in_action += 1
        actx.exit_copy_out = copy_out
        body = self.fe.stmts.block(tree.children[3], actx, new_scope=False)
        if copy_out:  # a return must still copy out: the statements after it are skipped instead
            body = self.fe.inliner.without_returns(body, sym, actx)
        actx.in_action -= 1
        actx.sink, actx.scopes, actx.exit_copy_out = saved
        return ir.Action(
            sym.qname,
            sym.control or (ctx.block if bound else None),
            self.src(tree),
            tuple(params),
            tuple(locals_),
            tuple(head + body + copy_out),
        )

    def bind_arguments(
        self, sym: Sym, params: list[PTree], args: list[Node], ctx: Ctx
    ) -> tuple[list[ir.Stmt], list[ir.Stmt]]:
        """The arguments an actions list binds: evaluated (calls first) and copied in at the start of the
        action, copied out at its end; the action body then sees its own scope (with the control's
        names only for an action of the control)."""
        assert sym.tree is not None
        outer, ctx.pre = ctx.pre, []
        values = self.fe.effects.operands(args, ctx)
        # at the action's position: the same action bound alike in two tables comes out the same
        copy_in, copy_out, scope = self.fe.inliner.bind_params(params, values, args, self.pos(sym.tree), ctx)
        head, ctx.pre = ctx.pre + copy_in, outer
        ctx.scopes = ([self.fe.decls.globals] if sym.control is None else list(ctx.scopes)) + [scope]
        return head, copy_out

    def data_params(self, action: str, params: list[PTree], actx: Ctx) -> list[ir.ActionParam]:
        """The action's directionless parameters, as action data in the scope of its body."""
        self.param_annos[action] = [self.annos(p.children[0]) for p in params]
        self.type_names[action] = [self.fe.decls.resolve_type(p.children[2]).newtype for p in params]
        out: list[ir.ActionParam] = []
        actx.scopes.append({})
        for p in params:
            if p.children[1].data != "dir_none":
                raise unsupported(self.pos(p), "directional parameter in an action called by a table")
            pname = self.name(p.children[3])
            t = self.fe.decls.resolve_type(p.children[2])
            if not t.is_bits and t.k != "bool":
                raise unsupported(self.pos(p), f"action parameter of type {t}")
            var = pname  # action data params keep their name; they shadow control variables
            actx.used.add(var)
            given = self.annos(p.children[0]).get("name")  # P4Info's name, as p4c: the @name if any
            out.append(ir.ActionParam(name=str(given[0]) if given else pname, var=var, type=t.to_ir()))
            actx.scopes[-1][pname] = Sym("var", t, var, readonly=True)
        return out
