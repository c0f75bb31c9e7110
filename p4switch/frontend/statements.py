"""The statements part: control blocks, their declarations and statements, and those of actions.

A control's locals are hoisted into the block's `locals` (a declaration with an initializer becomes an
assignment where it stands); constant conditions keep one branch; `switch` on a value becomes an if/else
chain; header stack push_front/pop_front become copies; struct and header initializers one assignment per
field.
"""

from __future__ import annotations

from lark import Tree

from p4switch import ir
from p4switch.frontend.declarations import MEMBER_KINDS
from p4switch.frontend.errors import Pos, type_error, unsupported
from p4switch.frontend.scope import Ctx, Part, Sym
from p4switch.frontend.source import Node, PTree, kids
from p4switch.frontend.types import BOOL, Value, header_struct, member


class Statements(Part):
    """Lowers control blocks and statements; `stmt(node, ctx)` first runs what calls in it need."""

    def new_ctx(self, decl: PTree, kind: str) -> Ctx:
        """The context of a parser or control block: its parameters are its first variables."""
        head = decl.children[0]
        name = self.name(head.children[1])
        if kids(head)[2:] and isinstance(head.children[2], Tree) and head.children[2].data == "type_params":
            raise unsupported(self.pos(head), f"generic {kind} declaration")
        ctor = self.ctor_scope(decl, self.fe.v1.ctor_args.get(name, []), None, decl)
        ctx = Ctx(name, kind, [self.fe.decls.globals, ctor, {}], prefix=name)
        for p in kids(head.children[3]):
            pname = self.name(p.children[3])
            t = self.fe.decls.resolve_type(p.children[2])
            if not t.in_ir:
                raise unsupported(self.pos(p), f"a {kind} parameter of type {t}")
            direction = {"dir_in": "in", "dir_out": "out", "dir_inout": "inout"}.get(
                p.children[1].data, "none"
            )
            ctx.params.append(ir.Param(pname, direction, t.to_ir()))
            ctx.used.add(pname)
            ctx.scopes[-1][pname] = Sym("var", t, pname, readonly=direction == "in")
        return ctx

    def lower_control(self, decl: PTree) -> ir.Control:
        """The controls pass for one control: its declarations, then its apply block."""
        ctx = self.new_ctx(decl, "control")
        body: list[ir.Stmt] = []
        for local in decl.children[2:-1]:
            body.extend(self.local_decl(local, ctx))
        body.extend(self.block(decl.children[-1], ctx))
        return ir.Control(ctx.block, self.src(decl), tuple(ctx.params), tuple(ctx.locals), tuple(body))

    def ctor_scope(self, decl: PTree, args: list[Node], ctx: Ctx | None, node: PTree) -> dict[str, Sym]:
        """The constructor parameters of a parser or control (`control C(...)(bool b)`) bound to the
        arguments of an instance: compile-time values, extern instances, control instances."""
        params = kids(kids(decl.children[1])[0]) if kids(decl.children[1]) else []
        missing = params[len(args) :]
        if len(args) > len(params) or any(p.children[4] is None for p in missing):
            raise type_error(self.pos(node), f"{len(params)} constructor arguments expected, got {len(args)}")
        scope: dict[str, Sym] = {}
        for p, arg in zip(params, [*args, *(p.children[4] for p in missing)], strict=True):
            t = self.fe.decls.resolve_type(p.children[2])
            v = self.fe.exprs.expr(arg, ctx)
            if v.t.k == "subcontrol":
                scope[self.name(p.children[3])] = v.extra["sym"]
            elif "inst" in v.extra:
                scope[self.name(p.children[3])] = Sym("inst", t, v.extra["inst"].name)
            else:
                v = self.fe.exprs.coerce(v, t, arg)
                if v.const is None:
                    raise type_error(self.pos(arg), "a constructor argument must be a compile-time constant")
                scope[self.name(p.children[3])] = Sym("const", t, value=v)
        return scope

    def declared(self, node: Node, ctx: Ctx) -> str:
        """The name a declaration introduces; refused if the same scope already has it."""
        name = self.name(node)
        if name in ctx.scopes[-1]:
            raise type_error(self.pos(node), f"duplicate declaration of {name}")
        return name

    def local_decl(self, node: PTree, ctx: Ctx) -> list[ir.Stmt]:
        """A declaration inside a block: actions and sub-controls are lowered where used, tables and
        extern instances now; variables and constants as statements."""
        scope = ctx.scopes[-1]
        if node.data == "action_decl":
            name = self.declared(node.children[1], ctx)
            scope[name] = Sym(
                "action",
                tree=node,
                qname=self.fe.decls.fq(ctx.prefix, name, self.annos(node.children[0])),
                control=ctx.block,
            )
            return []
        if node.data == "table_decl":
            name = self.declared(node.children[1], ctx)
            fq = self.fe.decls.fq(ctx.prefix, name, self.annos(node.children[0]))
            scope[name] = Sym("table", qname=fq, control=ctx.block)
            self.fe.tables.lower_table(node, fq, ctx)
            return []
        if node.data == "value_set_decl":
            name = self.declared(node.children[3], ctx)
            fq = self.fe.decls.fq(ctx.prefix, name, self.annos(node.children[0]))
            scope[name] = Sym("value_set", qname=fq)
            self.fe.v1.value_set(node, fq, ctx)
            return []
        if node.data == "instantiation":
            name = self.declared(node.children[3], ctx)
            fq = self.fe.decls.fq(ctx.prefix, name, self.annos(node.children[0]))
            t = self.fe.decls.resolve_type(node.children[1])
            if t.k == "block":
                decl = self.fe.decls.types[t.name][1]
                ctor = self.ctor_scope(decl, kids(node.children[2]), ctx, node)
                scope[name] = Sym("subcontrol", t, fq, tree=decl, ctor=ctor)
                return []
            scope[name] = Sym("inst", t, fq)
            self.fe.v1.instantiate(t, kids(node.children[2]), fq, node, ctx, self.annos(node.children[0]))
            if self.fe.decls.names_typedef(node.children[1]):
                self.fe.v1.unlisted.add(fq)
            return []
        return self.stmt(node, ctx)

    def block(self, node: PTree, ctx: Ctx, new_scope: bool = True) -> list[ir.Stmt]:
        if new_scope:
            ctx.scopes.append({})
        out: list[ir.Stmt] = []
        for st in node.children:
            if st is not None:
                out.extend(self.stmt(st, ctx))
        if new_scope:
            ctx.scopes.pop()
        return out

    def stmt(self, node: PTree, ctx: Ctx) -> list[ir.Stmt]:
        """Lower one statement, preceded by what the function calls in its expressions need."""
        outer, ctx.pre = ctx.pre, []
        try:
            out = self.lower_stmt(node, ctx)
            return ctx.pre + out
        finally:
            ctx.pre = outer

    def lower_stmt(self, node: PTree, ctx: Ctx) -> list[ir.Stmt]:
        d = node.data
        src = self.src(node)
        if d == "block":
            return self.block(node, ctx)
        if d == "annotated_block":  # @atomic { ... }: every block runs atomically in p4switch
            return self.block(node.children[1], ctx)
        if d == "empty_stmt":
            return []
        if d in ("exit_stmt", "return_stmt") and ctx.kind == "parser" and not ctx.in_function:
            raise type_error(self.pos(node), f"{d.split('_')[0]} is not allowed in a parser")
        if d == "exit_stmt":
            return [*ctx.exit_copy_out, ir.Exit(src)]
        if d == "return_stmt":
            return self.return_stmt(node, ctx)
        if d == "const_decl":
            ctx.scopes[-1][self.declared(node.children[2], ctx)] = self.fe.decls.make_const(node, ctx)
            return []
        if d == "var_decl":
            return self.var_decl(node, ctx)
        if d == "assignment":
            lhs = self.fe.exprs.expr(node.children[0], ctx)
            return self.assign(lhs, node.children[1], ctx, node)
        if d == "if_stmt":
            cond = self.fe.exprs.expr(node.children[0], ctx)
            if cond.t != BOOL:
                raise type_error(self.pos(node.children[0]), f"if condition must be bool, got {cond.t}")
            called = self.fe.tables.called_actions
            before = len(called)
            then = self.branch(node.children[1], ctx)
            then_called = called[before:]
            other = self.branch(node.children[2], ctx) if node.children[2] is not None else []
            if cond.const is not None:  # the branch folded away calls no action (as in p4c's P4Info)
                if cond.const:
                    called[before:] = then_called
                else:
                    del called[before : before + len(then_called)]
                return then if cond.const else other
            return [ir.If(cond.expr, tuple(then), tuple(other), src)]
        if d == "switch_stmt":
            return self.switch(node, ctx)
        if d == "call_stmt":
            return self.fe.calls.call_stmt(node, ctx)
        if d in ("instantiation", "action_decl", "table_decl"):
            raise unsupported(self.pos(node), d.replace("_decl", "") + " inside a block")
        raise unsupported(self.pos(node), d.replace("_", " "))

    def return_stmt(self, node: PTree, ctx: Ctx) -> list[ir.Stmt]:
        """`return;`, or in a function being inlined `return e;`: e goes to the function's result first."""
        if not kids(node):
            return [ir.Return(self.src(node))]
        if ctx.result is None:
            raise type_error(self.pos(node), "return with a value outside a function")
        result = Value(ctx.result.expr, ctx.result.t, lv=True)
        return [*self.assign(result, kids(node)[0], ctx, node), ir.Return(self.src(node))]

    def branch(self, node: PTree, ctx: Ctx) -> list[ir.Stmt]:
        ctx.scopes.append({})
        out = self.stmt(node, ctx)
        ctx.scopes.pop()
        return out

    def var_decl(self, node: PTree, ctx: Ctx) -> list[ir.Stmt]:
        t = self.fe.decls.resolve_type(node.children[1])
        if t.k not in MEMBER_KINDS:
            raise unsupported(self.pos(node), f"local variable of type {t}")
        name = self.declared(node.children[2], ctx)
        var = ctx.add_local(name, t, self.pos(node))
        ctx.scopes[-1][name] = Sym("var", t, var)
        if node.children[3] is None:
            return []
        lhs = Value(ir.Var(var, t.to_ir()), t, lv=True)
        return self.assign(lhs, node.children[3], ctx, node)

    def assign(self, lhs: Value, rhs_node: PTree, ctx: Ctx, node: PTree) -> list[ir.Stmt]:
        if not lhs.lv:
            raise type_error(self.pos(node), "the left side of an assignment must be an lvalue")
        if rhs_node.data in ("list_expr", "struct_expr") and lhs.t.k in ("header", "struct"):
            return self.assign_fields(lhs, rhs_node, ctx, node)
        rhs = self.fe.exprs.coerce(self.fe.exprs.expr(rhs_node, ctx), lhs.t, rhs_node)
        return self.store(lhs.expr, rhs.expr, self.src(node))

    def store_value(self, lhs: Value, v: Value, node: Node, src: str) -> list[ir.Stmt]:
        """`lhs = v` for an evaluated value, which may be a list (`{a, b}` as an argument): a header or
        struct then gets one assignment per field (a header made valid)."""
        if v.t.k != "list" or lhs.t.k not in ("header", "struct"):
            return self.store(lhs.expr, self.fe.exprs.coerce(v, lhs.t, node).expr, src)
        fields = self.fe.decls.members(lhs.t)
        items: list[Value] = v.extra["items"]
        if len(items) != len(fields):
            raise type_error(self.pos(node), f"{lhs.t} has {len(fields)} fields, initializer {len(items)}")
        out: list[ir.Stmt] = [ir.SetValid(lhs.expr, src)] if lhs.t.k == "header" else []
        for (fname, ft), item in zip(fields, items, strict=True):
            field = Value(ir.Member(lhs.expr, fname, ft.to_ir()), ft, lv=True)
            out += self.store_value(field, item, node, src)
        return out

    def store(self, lhs: ir.Expr, rhs: ir.Expr, src: str) -> list[ir.Stmt]:
        """`lhs = rhs;`: a header copied into a header union leaves its other members invalid if valid; a
        struct inside a header is copied field by field (it is flattened into the header's fields)."""
        if isinstance(lhs.type, ir.TStruct) and (header_struct(lhs) or header_struct(rhs)):
            fields = self.fe.decls.structs[lhs.type.name].fields
            return [
                s
                for f in fields
                for s in self.store(member(lhs, f.name, f.type), member(rhs, f.name, f.type), src)
            ]
        siblings = self.made_valid(lhs, src)
        if not siblings:
            return [ir.Assign(lhs, rhs, src)]
        return [ir.Assign(lhs, rhs, src), ir.If(ir.IsValid(lhs, ir.TBool()), tuple(siblings), (), src)]

    def made_valid(self, h: ir.Expr, src: str) -> list[ir.Stmt]:
        """What a header union does when its member `h` becomes valid (setValid, extract, a copy): its
        other members become invalid. Nothing for a header outside a union."""
        if not isinstance(h, ir.Member):
            return []
        union = h.expr.type
        if not isinstance(union, ir.TStruct) or not self.fe.decls.is_union(union.name):
            return []
        return [
            ir.SetInvalid(ir.Member(h.expr, f.name, f.type), src)
            for f in self.fe.decls.structs[union.name].fields
            if f.name != h.field
        ]

    def assign_fields(self, lhs: Value, rhs_node: PTree, ctx: Ctx, node: PTree) -> list[ir.Stmt]:
        """`h = {a, b}` / `s = {x = 1, y = 2}` (nested too): the initializer's expressions are evaluated
        left to right first (a call's effects are not seen by the values read before it), then one
        assignment per field (and setValid for a header)."""
        targets: list[Value] = []
        items: list[Node] = []
        out: list[ir.Stmt] = []
        self.field_leaves(lhs, rhs_node, targets, items, out, node)
        values = self.fe.effects.operands(items, ctx)
        for target, value, item in zip(targets, values, items, strict=True):
            out += self.store(target.expr, self.fe.exprs.coerce(value, target.t, item).expr, self.src(node))
        return out

    def field_leaves(
        self,
        lhs: Value,
        rhs_node: PTree,
        targets: list[Value],
        items: list[Node],
        out: list[ir.Stmt],
        node: PTree,
    ) -> None:
        """The fields an initializer assigns (into `targets`) and their expressions (`items`); `out` gets
        the setValid of each header it initializes."""
        fields = self.fe.decls.members(lhs.t)
        if rhs_node.data == "struct_expr":
            given = {self.name(kv.children[0]): kv.children[1] for kv in kids(rhs_node)}
            if set(given) != {f for f, _ in fields}:
                raise type_error(
                    self.pos(rhs_node), f"initializer does not name exactly the fields of {lhs.t}"
                )
            elems = [given[f] for f, _ in fields]
        else:
            elems = kids(kids(rhs_node)[0]) if kids(rhs_node) else []
        if len(elems) != len(fields):
            raise type_error(
                self.pos(rhs_node), f"{lhs.t} has {len(fields)} fields, initializer {len(elems)}"
            )
        if lhs.t.k == "header":
            out += [ir.SetValid(lhs.expr, self.src(node)), *self.made_valid(lhs.expr, self.src(node))]
        for (fname, ft), item in zip(fields, elems, strict=True):
            target = Value(member(lhs.expr, fname, ft.to_ir()), ft, lv=True)
            if (
                isinstance(item, Tree)
                and item.data in ("list_expr", "struct_expr")
                and ft.k in ("header", "struct")
            ):
                self.field_leaves(target, item, targets, items, out, node)
            else:
                targets.append(target)
                items.append(item)

    def shift_stack(self, stack: Value, count: int, push: bool, src: str) -> list[ir.Stmt]:
        """push_front/pop_front as header copies (validity included) and setInvalid of the vacated slots."""
        if not stack.lv:
            raise type_error(Pos(src, 0, 0), "push_front/pop_front need an lvalue stack")
        size = stack.t.size
        ht = stack.t.elem

        def elem(i: int) -> ir.Expr:
            return ir.Index(stack.expr, i, ht.to_ir())

        moves = range(size - 1, count - 1, -1) if push else range(0, size - count)
        out: list[ir.Stmt] = [ir.Assign(elem(i), elem(i - count if push else i + count), src) for i in moves]
        vacated = range(min(count, size)) if push else range(max(size - count, 0), size)
        return out + [ir.SetInvalid(elem(i), src) for i in vacated]

    def switch(self, node: PTree, ctx: Ctx) -> list[ir.Stmt]:
        subject = self.fe.exprs.expr(node.children[0], ctx)
        if subject.t.is_bits or subject.t.k in ("enum", "error"):
            return self.switch_value(node, subject, ctx)
        if subject.t.k != "action_run":
            raise type_error(self.pos(node.children[0]), f"cannot switch on {subject.t}")
        table_name = subject.t.name
        table = next(t for t in self.fe.tables.tables if t.name == table_name)
        names = {a.name for a in table.actions}
        cases: list[ir.SwitchCase] = []
        pending: list[str] = []
        for case in node.children[1:]:
            label = case.children[0]
            if isinstance(label, Tree) and label.data == "default_label":
                action = None
            else:
                sym = self.fe.exprs.lookup_sym(self.name(label), label, ctx)
                if sym.kind != "action" or sym.qname not in names:
                    raise type_error(self.pos(label), f"{self.name(label)} is not an action of {table_name}")
                action = sym.qname
            if case.children[1] is None:
                if action is None:
                    raise type_error(self.pos(case), "default label needs a body")
                pending.append(action)
                continue
            body = self.block(case.children[1], ctx)
            labels = None if action is None else tuple(pending + [action])
            cases.append(ir.SwitchCase(labels, tuple(body)))
            pending = []
        if pending:
            cases.append(ir.SwitchCase(tuple(pending), ()))
        return [ir.Switch(table_name, tuple(cases), self.src(node))]

    def switch_value(self, node: PTree, subject: Value, ctx: Ctx) -> list[ir.Stmt]:
        """`switch (expr) { 1: 2: {...} default: {...} }` lowered to an if/else chain on a copy of expr."""
        var = ctx.add_local("switch_value", subject.t, self.pos(node))
        ref = Value(ir.Var(var, subject.t.to_ir()), subject.t)
        src = self.src(node)
        head: list[ir.Stmt] = [ir.Assign(ref.expr, subject.expr, src)]
        chain: list[tuple[ir.Expr | None, list[ir.Stmt]]] = []
        pending: list[ir.Expr] = []
        for case in node.children[1:]:
            label = case.children[0]
            if isinstance(label, Tree) and label.data == "default_label":
                test = None
            else:
                value = self.fe.exprs.coerce(self.fe.exprs.expr(label, ctx), subject.t, label)
                if value.const is None:
                    raise type_error(self.pos(label), "switch labels must be compile-time constants")
                test = self.fe.exprs.binop_ir("==", ref, value, BOOL).expr
            if case.children[1] is None:
                if test is None:
                    raise type_error(self.pos(case), "default label needs a body")
                pending.append(test)
                continue
            tests = pending + ([test] if test is not None else [])
            cond = None if test is None else tests[0]
            for t in tests[1:]:
                assert cond is not None
                cond = ir.Binary("||", cond, t, ir.TBool())
            chain.append((cond, self.block(case.children[1], ctx)))
            pending = []
        tail: list[ir.Stmt] = []
        for cond, body in reversed(chain):
            tail = body if cond is None else [ir.If(cond, tuple(body), tuple(tail), src)]
        return head + tail
