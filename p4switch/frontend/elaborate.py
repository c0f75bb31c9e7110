"""Type checker and IR lowering in one pass: parse tree -> the IR of docs/p4switch-ir.md.

Every name is resolved, every expression typed (integer literals take the type of their context), constants
are folded, direct action calls are inlined with copy-in/copy-out, and structs are flattened where the IR
wants field lists. Errors are P4Error at the original file:line:col.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from lark import Token, Tree

from p4switch import ir
from p4switch.frontend import p4info
from p4switch.frontend.calls import Calls
from p4switch.frontend.declarations import Declarations
from p4switch.frontend.effects import Effects
from p4switch.frontend.errors import P4Error, Pos, type_error, unsupported
from p4switch.frontend.expressions import Expressions
from p4switch.frontend.inlining import Inliner
from p4switch.frontend.parsers import Parsers
from p4switch.frontend.preprocess import SourceMap
from p4switch.frontend.scope import Ctx, Sym
from p4switch.frontend.source import Node, PTree, Source, kids, name_of, parse_int, read_annotations
from p4switch.frontend.statements import Statements
from p4switch.frontend.types import (
    BOOL,
    ERROR,
    STRING,
    Type,
    Value,
    bit,
    const,
    from_ir,
)

_V1SWITCH_BLOCKS = ("parser", "verify_checksum", "ingress", "egress", "compute_checksum", "deparser")


_EXTERN_FN_HANDLERS = {
    "verify": "fn_verify",
    "mark_to_drop": "fn_mark_to_drop",
    "clone": "fn_clone",
    "clone_preserving_field_list": "fn_clone",
    "clone3": "fn_clone3",
    "hash": "fn_hash",
    "random": "fn_random",
    "digest": "fn_digest",
    "verify_checksum": "fn_checksum",
    "update_checksum": "fn_checksum",
    "verify_checksum_with_payload": "fn_checksum",
    "update_checksum_with_payload": "fn_checksum",
    "log_msg": "fn_log_msg",
    "assert": "fn_assert",
    "assume": "fn_assert",
}


_UNSUPPORTED_HASHES = ("crc16_custom", "crc32_custom", "random")  # the engine implements the others


_EXTERN_FN_ARITY = {
    "verify": 2,
    "mark_to_drop": 1,
    "clone": 2,
    "clone_preserving_field_list": 3,
    "clone3": 3,
    "hash": 5,
    "random": 3,
    "digest": 2,
    "verify_checksum": 4,
    "update_checksum": 4,
    "verify_checksum_with_payload": 4,
    "update_checksum_with_payload": 4,
    "assert": 1,
    "assume": 1,
}  # log_msg takes a format and an optional field list


_UNIT = {"packets": "packets", "bytes": "bytes", "packets_and_bytes": "both"}


_NO_DEFAULT = ir.DefaultAction("")  # a table's default action before its properties are read


@dataclass
class _ExternCall:
    """The arguments of one extern function call, for its `fn_<name>` lowering."""

    name: str
    args: list[Value]
    nodes: list[Node]
    targs: list[Type]
    pos: Pos
    ctx: Ctx


__all__ = ["Elaborator", "P4Error"]


class Elaborator:
    """Lowers one parsed program with its parts (one concern each). Use `run()`: the result is the typed
    IR (p4switch.ir.Program); the annotations P4Info needs stay in side tables of the parts."""

    def __init__(self, tree: PTree, smap: SourceMap, text: str, source: str) -> None:
        self.tree = tree
        self.source = Source(smap, text, source)
        self.extern_by_name: dict[str, ir.ExternInstance] = {}
        self.actions: dict[str, ir.Action | None] = {}  # None while its body is being lowered
        self.action_annos: dict[str, dict[str, list[Any]]] = {}
        self.tables: list[ir.Table] = []
        self.table_annos: dict[str, dict[str, list[Any]]] = {}
        self.digests: dict[str, ir.DigestType] = {}
        self.parser_blocks: list[ir.Parser] = []
        self.control_blocks: list[ir.Control] = []
        self.meta_type = ""
        self.extern_annos: dict[str, dict[str, list[Any]]] = {}
        # for P4Info, as p4c writes it: annotations of keys and action parameters, the actions a control
        # body calls directly (p4c lists those too), field names given by @name
        self.key_annos: dict[str, list[dict[str, list[Any]]]] = {}
        self.param_annos: dict[str, list[dict[str, list[Any]]]] = {}
        self.called_actions: list[str] = []
        self.action_ref_annos: dict[tuple[str, str], dict[str, list[Any]]] = {}  # (table, action)
        self.decls = Declarations(self)
        self.exprs = Expressions(self)
        self.effects = Effects(self)
        self.calls = Calls(self)
        self.inliner = Inliner(self)
        self.stmts = Statements(self)
        self.parsers = Parsers(self)

    name = staticmethod(name_of)
    annos = staticmethod(read_annotations)

    def p4info_extras(self) -> p4info.Extras:
        """What the P4Info passes read that the IR does not carry (annotations, actions called directly)."""
        return p4info.Extras(
            self.action_annos,
            self.table_annos,
            self.extern_annos,
            self.decls.header_annos,
            self.key_annos,
            self.param_annos,
            self.action_ref_annos,
            self.called_actions,
        )

    def run(self) -> ir.Program:
        for decl in kids(self.tree):
            self.decls.declare(decl)
        return self.lower_main()

    def lower_main(self) -> ir.Program:
        main = self.decls.globals.get("main")
        if main is None or main.kind != "instance" or main.tree is None:
            raise type_error(
                Pos(self.source.file, 1, 1), "the program has no `V1Switch(...) main;` instantiation"
            )
        tree = main.tree
        ptype = self.decls.resolve_type(tree.children[1])
        if ptype.name != "V1Switch":
            raise unsupported(self.source.pos(tree), f"package {ptype.name} (only V1Switch)")
        args = kids(tree.children[2])
        if len(args) != 6:
            raise type_error(self.source.pos(tree), f"V1Switch takes 6 arguments, got {len(args)}")
        pipeline: dict[str, str] = {}
        seen: set[str] = set()
        decls = []
        for role, arg in zip(_V1SWITCH_BLOCKS, args, strict=True):
            if not (isinstance(arg, Tree) and arg.data == "ctor_call" and isinstance(arg.children[0], Token)):
                raise unsupported(self.source.pos(arg), "V1Switch argument other than `Block()`")
            bname = str(arg.children[0])
            kind, decl = self.decls.types.get(bname, ("", None))
            if kind != "block":
                raise type_error(self.source.pos(arg), f"{bname} is not a parser or control with a body")
            pipeline[role] = bname
            if bname in seen:
                # Sharing one stateless block (e.g. empty checksum controls) is fine; tables or externs
                # would need one copy per instance.
                if any(
                    isinstance(c, Tree) and c.data in ("table_decl", "instantiation") for c in decl.children
                ):
                    raise unsupported(self.source.pos(arg), f"instantiating {bname} twice")
                continue
            seen.add(bname)
            decls.append((role, decl))
        parser_params = kids(decls[0][1].children[0].children[3])
        if len(parser_params) != 4:
            raise type_error(self.source.pos(decls[0][1]), "the v1model parser takes 4 parameters")
        headers_type = self.decls.resolve_type(parser_params[1].children[2]).name
        self.meta_type = self.decls.resolve_type(parser_params[2].children[2]).name
        for role, decl in decls:
            if role == "parser":
                self.parser_blocks.append(self.parsers.lower_parser(decl))
            else:
                self.control_blocks.append(self.stmts.lower_control(decl))
        return ir.Program(
            source=self.source.file,
            errors=tuple(self.decls.errors),
            enums=self.decls.enums,
            headers=self.decls.headers,
            structs=self.decls.structs,
            externs=tuple(self.extern_by_name.values()),
            actions=tuple(a for a in self.actions.values() if a is not None),
            tables=tuple(self.tables),
            parsers=tuple(self.parser_blocks),
            controls=tuple(self.control_blocks),
            digests=tuple(self.digests.values()),
            pipeline=ir.Pipeline(**pipeline, headers_type=headers_type, metadata_type=self.meta_type),
        )

    def instantiate(
        self, t: Type, args: list[Any], fq: str, node: PTree, ctx: Ctx | None, annos: dict[str, list[Any]]
    ) -> ir.ExternInstance:
        if t.k != "extern":
            raise unsupported(self.source.pos(node), f"instantiation of {t}")
        vals = [self.exprs.expr(a, ctx) for a in args]

        def need(n: int) -> None:
            if len(vals) != n:
                raise type_error(
                    self.source.pos(node), f"{t.name} takes {n} constructor arguments, got {len(vals)}"
                )

        def num(i: int) -> int:
            v = self.exprs.coerce(vals[i], bit(32), args[i])
            if v.const is None:
                raise type_error(self.source.pos(args[i]), "expected a compile-time constant")
            return int(v.const)

        def member(i: int, enum: str) -> str:
            return self.enum_member(vals[i], enum, args[i])

        src = self.source.src(node)
        inst: ir.ExternInstance
        if t.name == "counter":
            need(2)
            inst = ir.Counter(fq, num(0), _UNIT[member(1, "CounterType")], src)
        elif t.name == "direct_counter":
            need(1)
            inst = ir.DirectCounter(fq, _UNIT[member(0, "CounterType")], None, src)
        elif t.name == "meter":
            need(2)
            inst = ir.Meter(fq, num(0), member(1, "MeterType"), src)
        elif t.name == "direct_meter":
            need(1)
            rt = t.args[0] if t.args else bit(2)
            if not rt.in_ir:
                raise unsupported(self.source.pos(node), f"direct_meter with a result of type {rt}")
            inst = ir.DirectMeter(fq, member(0, "MeterType"), None, rt.to_ir(), src)
        elif t.name == "register":
            need(1)
            if not t.args or not t.args[0].is_bits:
                raise unsupported(self.source.pos(node), "register without a bit<W> element type")
            inst = ir.Register(fq, num(0), t.args[0].to_ir(), src)
        elif t.name == "action_profile":
            need(1)
            inst = ir.ActionProfile(fq, num(0), (), src)
        elif t.name == "action_selector":
            need(3)
            algorithm, size, output_width = member(0, "HashAlgorithm"), num(1), num(2)
            max_group_size = int((annos.get("max_group_size") or [size])[0])
            inst = ir.ActionSelector(fq, algorithm, size, output_width, max_group_size, (), src)
        else:
            raise unsupported(self.source.pos(node), f"extern {t.name}")
        if fq in self.extern_by_name:
            raise type_error(self.source.pos(node), f"duplicate instance name {fq}")
        self.extern_by_name[fq] = inst
        self.extern_annos[fq] = annos
        return inst

    def lower_table(self, node: PTree, fq: str, ctx: Ctx) -> None:
        self.table_annos[fq] = self.annos(node.children[0])
        props = node.children[2:]
        keys: tuple[ir.TableKey, ...] = ()
        for prop in props:
            if prop.data == "key_prop":
                keys = tuple(self.table_key(k, ctx) for k in prop.children)
                self.key_annos[fq] = [self.annos(k.children[2]) for k in prop.children]
        actions: tuple[ir.ActionRef, ...] = ()
        for prop in props:
            if prop.data == "actions_prop":
                actions = tuple(self.table_action_ref(item, ctx) for item in prop.children)
                for item, ref in zip(prop.children, actions, strict=True):
                    self.action_ref_annos[(fq, ref.name)] = self.annos(item.children[0])
        # the default action stays NoAction(name "") until a property sets one
        table = ir.Table(fq, ctx.block, self.source.src(node), keys, actions, _NO_DEFAULT, size=1024)
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
                self.ensure_action(self.exprs.lookup_sym("NoAction", node, ctx), ctx)
                table = replace(table, actions=table.actions + (ir.ActionRef("NoAction", "default_only"),))
        self.tables.append(table)

    def table_key(self, k: PTree, ctx: Ctx) -> ir.TableKey:
        v = self.exprs.expr(k.children[0], ctx)
        kind = self.name(k.children[1])
        if kind not in self.decls.match_kinds:
            raise type_error(self.source.pos(k.children[1]), f"unknown match kind {kind}")
        if not (v.t.is_bits or v.t.k == "bool"):
            raise type_error(self.source.pos(k.children[0]), f"table key of type {v.t}")
        annos = self.annos(k.children[2])
        name = annos["name"][0] if annos.get("name") else self.key_name(k.children[0], ctx)
        t = bit(1) if v.t.k == "bool" else v.t
        expr = v.expr if v.t.k != "bool" else ir.Cast(v.expr, t.to_ir())
        return ir.TableKey(name, kind, t.to_ir(), expr)

    def key_name(self, node: PTree, ctx: Ctx) -> str:
        """The name p4c gives a key that has no @name (frontends/p4/tableKeyNames.cpp): paths, fields
        (their @name; `$valid$` for isValid()), indices, slices, `&` and constants as p4c prints them;
        the source text for the expressions where p4c asks for a @name."""
        return self.p4c_key_name(node, ctx) or self.source.text_of(node)

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
            base_type = self.exprs.expr(parts[0], ctx).t
            if base_type.k == "header" and field == "isValid":
                field = "$valid$"
            field = self.decls.field_names.get((base_type.name, field), field)
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
        if len(kids(ref)) > 1 and kids(kids(ref)[1]):
            raise unsupported(self.source.pos(ref), "action arguments bound in a table's actions list")
        sym = self.exprs.lookup_sym(self.prefixed(ref.children[0]), ref, ctx)
        if sym.kind != "action":
            raise type_error(self.source.pos(ref), f"{self.prefixed(ref.children[0])} is not an action")
        self.ensure_action(sym, ctx)
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
            return replace(table, size=self.exprs.const_int(value, ctx))
        if pname in ("counters", "meters", "implementation"):
            inst = self.table_extern(value, table, ctx, self.annos(prop.children[0]))
            wanted = {
                "counters": ("direct_counter",),
                "meters": ("direct_meter",),
                "implementation": ("action_profile", "action_selector"),
            }[pname]
            if inst.tag not in wanted:
                raise type_error(
                    self.source.pos(value), f"{pname} must be a {' or '.join(wanted)}, got {inst.tag}"
                )
            if isinstance(inst, ir.ActionProfile | ir.ActionSelector):
                self.extern_by_name[inst.name] = replace(inst, tables=inst.tables + (table.name,))
                return replace(table, implementation=inst.name)
            assert isinstance(inst, ir.DirectCounter | ir.DirectMeter)
            if inst.table is not None:
                raise type_error(self.source.pos(value), f"{inst.name} is already used by {inst.table}")
            self.extern_by_name[inst.name] = replace(inst, table=table.name)
            if pname == "counters":
                return replace(table, direct_counter=inst.name)
            return replace(table, direct_meter=inst.name)
        if pname == "support_timeout":
            if self.exprs.expr(value, ctx).const is True:
                return replace(table, support_timeout=True)
            return table
        if pname in ("largest_priority_wins", "priority_delta"):
            return table  # read with the entries (order_entries)
        raise unsupported(self.source.pos(prop), f"table property {pname}")

    def table_extern(
        self, value: PTree, table: ir.Table, ctx: Ctx, annos: dict[str, list[Any]]
    ) -> ir.ExternInstance:
        """The instance a table property names, or instantiates inline (named by @name or after the table)."""
        if value.data == "ctor_call":
            t = (
                self.decls.resolve_type(value.children[0])
                if isinstance(value.children[0], Tree)
                else self.decls.named_type(value.children[0])
            )
            # p4c names it by the property's @name alone (no control prefix); P4Runtime needs one
            fq = self.decls.fq(None, "", annos) if annos.get("name") else table.name + "_" + t.name
            return self.instantiate(t, kids(value.children[1]), fq, value, ctx, annos)
        if value.data != "name_ref":
            raise type_error(self.source.pos(value), "expected the name of an extern instance")
        sym = self.exprs.lookup_sym(str(value.children[0]), value, ctx)
        if sym.kind != "inst":
            raise type_error(self.source.pos(value), f"{value.children[0]} is not an extern instance")
        return self.extern_by_name[sym.qname]

    def action_call(self, node: PTree, table: ir.Table, ctx: Ctx, scope_ok: str) -> tuple[str, list[int]]:
        """`a(1, 2)` or `a` in a table (default_action, entries): the action name and constant args."""
        if node.data in ("call", "action_ref"):
            callee, args = node.children[0], kids(node.children[1]) if node.children[1] is not None else []
        else:
            callee, args = node, []
        if not (
            isinstance(callee, Tree) and callee.data in ("name_ref", "top_ref", "prefixed_name", "top_name")
        ):
            raise type_error(self.source.pos(node), "expected an action call")
        sym = self.exprs.lookup_sym(str(callee.children[0]), callee, ctx)
        if sym.kind != "action" or sym.tree is None:
            raise type_error(self.source.pos(callee), f"{callee.children[0]} is not an action")
        allowed = {a.name: a.scope for a in table.actions}
        if sym.qname not in allowed:
            raise type_error(
                self.source.pos(callee), f"action {sym.qname} is not in the actions of table {table.name}"
            )
        bad = "table_only" if scope_ok == "default_only" else "default_only"
        if allowed[sym.qname] == bad:
            raise type_error(
                self.source.pos(callee), f"action {sym.qname} is @{bad.replace('_', '')} in {table.name}"
            )
        params = kids(sym.tree.children[2])
        if len(params) != len(args):
            raise type_error(
                self.source.pos(node), f"action {sym.qname} takes {len(params)} arguments, got {len(args)}"
            )
        values = []
        for p, a in zip(params, args, strict=True):
            v = self.exprs.coerce(self.exprs.expr(a, ctx), self.decls.resolve_type(p.children[2]), a)
            if v.const is None:
                raise type_error(self.source.pos(a), "action data in a table must be a compile-time constant")
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
                    self.source.pos(ks), f"entry has {len(elems)} keys, table {table.name} has {len(keys)}"
                )
            match = tuple(self.entry_match(el, k, ctx) for el, k in zip(elems, keys, strict=True))
            name, args = self.action_call(e.children[3], table, ctx, "table_only")
            priority = 1 if needs_priority else 0  # order_entries sets them
            entries.append(ir.Entry(match, ir.EntryAction(name, tuple(args)), priority, self.source.src(e)))
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
                raise type_error(
                    self.source.pos(given[0]), f"entry priority in table {table.name} with {what}"
                )
            if raw[0].children[1] is None:
                raise type_error(self.source.pos(raw[0]), "the first entry must have a priority")
            for g in given:
                if str(g.children[0]) != "priority":
                    raise type_error(self.source.pos(g), "expected `priority = N :` before the keyset")
                self.exprs.const_int(g.children[1], ctx)
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
        kt = from_ir(key.type)
        kind = key.match
        full = (1 << kt.w) - 1

        def value(n: Node) -> int:
            v = self.exprs.expr(n, ctx)  # constants of the control too
            if v.t == BOOL and v.const is not None and kt == bit(1):  # isValid() keys: true / false
                v = const(int(v.const), kt)
            v = self.exprs.coerce(v, kt, n)
            if v.const is None:
                raise type_error(self.source.pos(n), "entry keys must be compile-time constants")
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
                raise type_error(self.source.pos(el), f"lpm mask {mask:#x} is not a prefix")
            return ir.MatchLpm(value(el.children[0]) & mask, plen)
        if kind == "range" and el.data in ("ks_exact", "ks_range"):
            lo = value(el.children[0])
            hi = value(el.children[1]) if el.data == "ks_range" else lo
            return ir.MatchRange(lo, hi)
        raise type_error(self.source.pos(el), f"this keyset does not fit a {kind} key")

    def ensure_action(self, sym: Sym, ctx: Ctx) -> None:
        """Lower an action invoked by a table (once), with its params as action data."""
        if sym.qname in self.actions or sym.tree is None:
            return
        tree = sym.tree
        self.actions[sym.qname] = None  # its place in the list: actions are listed as tables first use them
        self.action_annos[sym.qname] = self.annos(tree.children[0])
        actx = ctx if sym.control else Ctx("", "control", [self.decls.globals, {}])
        saved = actx.sink
        params: list[ir.ActionParam] = []
        locals_: list[ir.Local] = []
        actx.sink = locals_
        actx.scopes.append({})
        self.param_annos[sym.qname] = [self.annos(p.children[0]) for p in kids(tree.children[2])]
        for p in kids(tree.children[2]):
            if p.children[1].data != "dir_none":
                raise unsupported(self.source.pos(p), "directional parameter in an action called by a table")
            pname = self.name(p.children[3])
            t = self.decls.resolve_type(p.children[2])
            if not t.is_bits and t.k != "bool":
                raise unsupported(self.source.pos(p), f"action parameter of type {t}")
            var = pname  # action data params keep their name; they shadow control variables
            actx.used.add(var)
            given = self.annos(p.children[0]).get("name")  # P4Info's name, as p4c: the @name if any
            params.append(ir.ActionParam(name=str(given[0]) if given else pname, var=var, type=t.to_ir()))
            actx.scopes[-1][pname] = Sym("var", t, var, readonly=True)
        actx.in_action += 1
        body = self.stmts.block(tree.children[3], actx, new_scope=False)
        actx.in_action -= 1
        actx.scopes.pop()
        actx.sink = saved
        self.actions[sym.qname] = ir.Action(
            sym.qname, sym.control, self.source.src(tree), tuple(params), tuple(locals_), tuple(body)
        )

    def enum_member(self, v: Value, enum: str, node: Node) -> str:
        if v.t != Type("enum", name=enum) or v.const is None:
            raise type_error(self.source.pos(node), f"expected a {enum} constant, got {v.t}")
        if enum == "HashAlgorithm" and v.const in _UNSUPPORTED_HASHES:
            raise unsupported(self.source.pos(node), f"hash algorithm {v.const}")
        return str(v.const)

    def extern_fn(
        self, name: str, nodes: list[Node], targs: list[Type], node: PTree, ctx: Ctx
    ) -> list[ir.Stmt]:
        """A call of a v1model/core extern function: checked, then lowered by its `fn_<name>` method."""
        pos = self.source.pos(node)
        handler_name = _EXTERN_FN_HANDLERS.get(name)
        if handler_name is None:
            raise unsupported(pos, f"extern function {name}")
        call = _ExternCall(name, [self.exprs.expr(a, ctx) for a in nodes], nodes, targs, pos, ctx)
        arity = _EXTERN_FN_ARITY.get(name)
        if arity is not None:
            self.calls.arity(call.args, arity, pos, name)
        stmt: ir.Stmt = getattr(self, handler_name)(call)
        return [stmt]

    def fn_verify(self, c: _ExternCall) -> ir.Stmt:
        if c.ctx.kind != "parser":
            raise type_error(c.pos, "verify is only available in a parser")
        cond = self.exprs.coerce(c.args[0], BOOL, c.nodes[0])
        if c.args[1].t != ERROR or c.args[1].const is None:
            raise type_error(self.source.pos(c.nodes[1]), "verify needs an error constant")
        return ir.Verify(cond.expr, str(c.args[1].const), str(c.pos))

    def fn_mark_to_drop(self, c: _ExternCall) -> ir.Stmt:
        sm = self.calls.lvalue(c.args[0], c.nodes[0])
        if sm.t != Type("struct", name="standard_metadata_t"):
            raise type_error(self.source.pos(c.nodes[0]), f"mark_to_drop needs standard_metadata, got {sm.t}")
        return ir.Call(c.name, args=(sm.expr,), src=str(c.pos))

    def fn_clone(self, c: _ExternCall) -> ir.Stmt:
        clone_type = self.enum_member(c.args[0], "CloneType", c.nodes[0])
        session = self.exprs.coerce(c.args[1], bit(32), c.nodes[1]).expr
        field_list = None
        if c.name == "clone_preserving_field_list":
            index = self.exprs.coerce(c.args[2], bit(8), c.nodes[2]).const
            if index is None:
                raise type_error(self.source.pos(c.nodes[2]), "the field list index must be a constant")
            field_list = self.field_list_paths(self.meta_type, int(index))
        return ir.Call(c.name, clone_type, args=(session,), field_list=field_list, src=str(c.pos))

    def fn_hash(self, c: _ExternCall) -> ir.Stmt:
        args, nodes = c.args, c.nodes
        result = self.bit_result(args[0], nodes[0], "hash")
        base = self.exprs.coerce(args[2], result.t if args[2].t.k == "infint" else args[2].t, nodes[2])
        hmax = self.exprs.coerce(args[4], bit(32) if args[4].t.k == "infint" else args[4].t, nodes[4])
        return ir.Call(
            c.name,
            algorithm=self.enum_member(args[1], "HashAlgorithm", nodes[1]),
            args=(result.expr, base.expr, hmax.expr),
            data=tuple(x.expr for x in self.calls.flatten(args[3], nodes[3])),
            src=str(c.pos),
        )

    def fn_random(self, c: _ExternCall) -> ir.Stmt:
        result = self.bit_result(c.args[0], c.nodes[0], "random")
        lo, hi = (self.exprs.coerce(a, result.t, n) for a, n in zip(c.args[1:], c.nodes[1:], strict=True))
        return ir.Call(c.name, args=(result.expr, lo.expr, hi.expr), src=str(c.pos))

    def fn_digest(self, c: _ExternCall) -> ir.Stmt:
        return self.digest(c.args, c.nodes, c.targs, c.pos)

    def fn_checksum(self, c: _ExternCall) -> ir.Stmt:
        args, nodes = c.args, c.nodes
        cond = self.exprs.coerce(args[0], BOOL, nodes[0])
        csum = self.calls.lvalue(args[2], nodes[2]) if c.name.startswith("update") else args[2]
        if csum.t.k != "bit":
            raise type_error(self.source.pos(nodes[2]), f"checksum must be bit<W>, got {csum.t}")
        return ir.Call(
            c.name,
            algorithm=self.enum_member(args[3], "HashAlgorithm", nodes[3]),
            args=(cond.expr, csum.expr),
            data=tuple(x.expr for x in self.calls.flatten(args[1], nodes[1])),
            src=str(c.pos),
        )

    def fn_log_msg(self, c: _ExternCall) -> ir.Stmt:
        if not c.args or c.args[0].t != STRING:
            raise type_error(c.pos, "log_msg needs a format string")
        data = [
            x.expr for a, n in zip(c.args[1:], c.nodes[1:], strict=True) for x in self.calls.flatten(a, n)
        ]
        return ir.Call(c.name, format=str(c.args[0].const), args=tuple(data), src=str(c.pos))

    def fn_assert(self, c: _ExternCall) -> ir.Stmt:
        return ir.Call(c.name, args=(self.exprs.coerce(c.args[0], BOOL, c.nodes[0]).expr,), src=str(c.pos))

    def bit_result(self, v: Value, node: Node, what: str) -> Value:
        """The `out` result argument of hash/random: a bit<W> lvalue."""
        result = self.calls.lvalue(v, node)
        if result.t.k != "bit":
            raise type_error(self.source.pos(node), f"{what} result must be bit<W>, got {result.t}")
        return result

    def fn_clone3(self, c: _ExternCall) -> ir.Stmt:
        """Deprecated clone3(type, session, {fields}): user-metadata fields in the list are preserved."""
        args, nodes = c.args, c.nodes
        paths = []
        for item in self.calls.flatten(args[2], nodes[2]):
            path: tuple[str, ...] = ()
            e = item.expr
            while isinstance(e, ir.Member):
                path = (e.field, *path)
                e = e.expr
            if isinstance(e, ir.Var) and e.type == ir.TStruct(self.meta_type) and path:
                paths.append(path)
        return ir.Call(
            "clone_preserving_field_list" if paths else "clone",
            self.enum_member(args[0], "CloneType", nodes[0]),
            args=(self.exprs.coerce(args[1], bit(32), nodes[1]).expr,),
            field_list=tuple(paths) if paths else None,
            src=str(c.pos),
        )

    def field_list_paths(
        self, struct: str, index: int, prefix: tuple[str, ...] = ()
    ) -> tuple[tuple[str, ...], ...]:
        paths: list[tuple[str, ...]] = []
        st = self.decls.structs.get(struct)
        for f in st.fields if st else ():
            path = prefix + (f.name,)
            if index in (f.field_lists or ()):
                paths.append(path)
            elif isinstance(f.type, ir.TStruct):
                paths.extend(self.field_list_paths(f.type.name, index, path))
        return tuple(paths)

    def digest(self, args: list[Value], nodes: list[Node], targs: list[Type], pos: Pos) -> ir.Stmt:
        """digest<T>(receiver, data): one expression per field of the named struct T."""
        t = targs[0] if targs else args[1].t
        if t.k != "struct":
            raise unsupported(self.source.pos(nodes[1]), "digest of data that is not a named struct")
        fields = self.decls.members(t)
        if args[1].t.k == "list":
            items = args[1].extra["items"]
            if len(items) != len(fields):
                raise type_error(
                    self.source.pos(nodes[1]), f"digest struct {t.name} has {len(fields)} fields"
                )
            values = [self.exprs.coerce(i, ft, nodes[1]) for i, (_, ft) in zip(items, fields, strict=True)]
        elif args[1].t == t:
            values = [self.exprs.member_value(args[1], fname, ft) for fname, ft in fields]
        else:
            raise type_error(self.source.pos(nodes[1]), f"digest data of type {args[1].t}, expected {t}")
        for (fname, ft), _ in zip(fields, values, strict=True):
            if not ft.is_bits:
                raise unsupported(self.source.pos(nodes[1]), f"digest field {fname} of type {ft}")
        receiver = self.exprs.coerce(args[0], bit(32), nodes[0]).const
        self.digests.setdefault(
            t.name, ir.DigestType(t.name, tuple(ir.DigestField(f, ft.to_ir()) for f, ft in fields))
        )
        receiver_id = int(receiver) if receiver is not None else None
        return ir.Digest(t.name, receiver_id, tuple(v.expr for v in values), str(pos))

    def extern_method(
        self, inst: ir.ExternInstance, method: str, args: list[Value], nodes: list[Node], pos: Pos
    ) -> list[ir.Stmt]:
        kind = inst.tag
        src = str(pos)

        def index(i: int) -> ir.Expr:
            v = args[i]
            if v.t.k == "infint":
                v = self.exprs.coerce(v, bit(32), nodes[i])
            if v.t.k != "bit":
                raise type_error(self.source.pos(nodes[i]), f"index must be bit<W>, got {v.t}")
            return v.expr

        def result(i: int, want: Type | None = None) -> ir.Expr:
            v = self.calls.lvalue(args[i], nodes[i])
            if v.t.k != "bit" or (want is not None and v.t != want):
                raise type_error(self.source.pos(nodes[i]), f"result must be {want or 'bit<W>'}, got {v.t}")
            return v.expr

        signature = {
            ("counter", "count"): 1,
            ("direct_counter", "count"): 0,
            ("meter", "execute_meter"): 2,
            ("direct_meter", "read"): 1,
            ("register", "read"): 2,
            ("register", "write"): 2,
        }
        if (kind, method) not in signature:
            raise type_error(pos, f"{kind} has no method {method}")
        self.calls.arity(args, signature[(kind, method)], pos, f"{kind}.{method}")
        if method == "count":
            ir_args = [index(0)] if kind == "counter" else []
        elif method == "execute_meter":
            ir_args = [index(0), result(1)]
        elif isinstance(inst, ir.DirectMeter):
            ir_args = [result(0, from_ir(inst.result_type))]
        elif method == "read":
            assert isinstance(inst, ir.Register)
            ir_args = [result(0, from_ir(inst.type)), index(1)]
        else:
            assert isinstance(inst, ir.Register)
            ir_args = [index(0), self.exprs.coerce(args[1], from_ir(inst.type), nodes[1]).expr]
        return [ir.MethodCall(inst.name, method, tuple(ir_args), src)]


__all__ = ["Elaborator", "P4Error"]
