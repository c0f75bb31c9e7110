"""The inlining part: direct action calls, P4 functions and applied sub-controls become statements.

An action or function call copies its arguments into fresh locals (copy-in), runs the callee's body in a
scope that names them, and copies out/inout parameters back (copy-out); a function's final `return e;`
gives its value. A sub-control's declarations and body are lowered into the calling block, its tables,
actions and extern instances named by instance path as p4c does ("Ingress.sub.table").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from p4switch import ir
from p4switch.frontend import returns
from p4switch.frontend.errors import Pos, type_error, unsupported
from p4switch.frontend.scope import Ctx, Part, Sym
from p4switch.frontend.source import Node, PTree, kids
from p4switch.frontend.types import BOOL, VOID, Value

if TYPE_CHECKING:
    from p4switch.frontend.parts import FrontEnd


class Inliner(Part):
    """Inlines calls into the statements of the calling block."""

    def __init__(self, fe: FrontEnd) -> None:
        super().__init__(fe)
        self.applied: set[str] = set()  # sub-control instances applied so far (by instance path)

    def inline_action(
        self, sym: Sym, args: list[Value], arg_nodes: list[Node], pos: Pos, ctx: Ctx
    ) -> list[ir.Stmt]:
        """A direct call `a(x, y);`: copy-in to fresh locals, the body, copy-out of out/inout params."""
        tree = sym.tree
        assert tree is not None
        params = kids(tree.children[2])
        if len(params) != len(args):
            raise type_error(pos, f"action {sym.qname} takes {len(params)} arguments, got {len(args)}")
        copy_in, copy_out, scope = self.bind_params(params, args, arg_nodes, pos, ctx)
        saved_scopes = ctx.scopes
        ctx.scopes = ([self.fe.decls.globals] if sym.control is None else list(ctx.scopes)) + [scope]
        if not ctx.in_action:
            # As p4c (and so BMv2): an `exit` copies out the parameters of the action called from the
            # control's body, not those of the actions that one calls.
            ctx.exit_copy_out = copy_out
            self.fe.tables.called_actions.append(sym.qname)
            self.fe.tables.action_annos.setdefault(sym.qname, self.annos(tree.children[0]))
        ctx.in_action += 1
        body = self.without_returns(self.fe.stmts.block(tree.children[3], ctx, new_scope=False), sym, ctx)
        ctx.in_action -= 1
        if not ctx.in_action:
            ctx.exit_copy_out = []
        ctx.scopes = saved_scopes
        return copy_in + body + copy_out

    def inline_function(
        self, sym: Sym, args: list[Value], nodes: list[Node], pos: Pos, ctx: Ctx
    ) -> tuple[list[ir.Stmt], Value | None]:
        """A call of a P4 function: its body inlined like an action's; `return e;` sets its result."""
        tree = sym.tree
        assert tree is not None
        fn_type = tree.children[1]
        rtype = VOID if fn_type.data == "void_type" else self.fe.decls.resolve_type(fn_type.children[0])
        params = kids(tree.children[4])
        if len(params) != len(args):
            raise type_error(pos, f"function {sym.qname} takes {len(params)} arguments, got {len(args)}")
        if sym.value is not None:
            raise type_error(pos, f"function {sym.qname} calls itself")
        sym.value = Value(None, VOID)  # marks the function as being inlined
        copy_in, copy_out, scope = self.bind_params(params, args, nodes, pos, ctx)
        result = None
        if rtype != VOID:
            ref = ir.Var(ctx.add_local(f"{sym.qname}_result", rtype, self.pos(tree)), rtype.to_ir())
            result = Value(ref, rtype)
        saved = ctx.scopes, ctx.result
        # the callee sees only globals and its parameters; its returns set `result`
        ctx.scopes, ctx.result = [self.fe.decls.globals, scope], result
        body: list[ir.Stmt] = []
        ctx.in_function += 1
        for st in kids(tree.children[5]):
            body.extend(self.fe.stmts.stmt(st, ctx))
        ctx.in_function -= 1
        ctx.scopes, ctx.result = saved
        sym.value = None
        return copy_in + self.without_returns(body, sym, ctx) + copy_out, result

    def without_returns(self, body: list[ir.Stmt], sym: Sym, ctx: Ctx) -> list[ir.Stmt]:
        """An inlined body with its returns lowered: a flag (a fresh local) where statements follow them."""
        if not returns.has_return(body):
            return body
        flag = None
        if returns.needs_flag(body):
            assert sym.tree is not None
            name = ctx.add_local(f"{sym.qname.replace('.', '_')}_returned", BOOL, self.pos(sym.tree))
            flag = ir.Var(name, ir.TBool())
        return returns.remove_returns(body, flag)

    def bind_params(
        self, params: list[PTree], args: list[Value], arg_nodes: list[Node], pos: Pos, ctx: Ctx
    ) -> tuple[list[ir.Stmt], list[ir.Stmt], dict[str, Sym]]:
        """Copy-in/copy-out for an inlined call: fresh locals per parameter, the scope that names them."""
        out: list[ir.Stmt] = []
        copy_out: list[ir.Stmt] = []
        scope: dict[str, Sym] = {}
        for p, a, node in zip(params, args, arg_nodes, strict=True):
            t = self.fe.decls.resolve_type(p.children[2])
            direction = p.children[1].data
            var = ctx.add_local(self.name(p.children[3]), t, self.pos(p))
            ref = ir.Var(var, t.to_ir())
            scope[self.name(p.children[3])] = Sym("var", t, var, readonly=direction in ("dir_in", "dir_none"))
            if direction in ("dir_out", "dir_inout"):
                target: Value = a.extra.get("lvalue", a)  # the place, when its value was read earlier
                if not target.lv:
                    raise type_error(self.pos(node), "an out/inout argument must be an lvalue")
                pinned, target = self.fe.effects.pin_place(target, ctx, node)
                out.extend(pinned)
                if a.t != t:
                    raise type_error(
                        self.pos(node), f"argument of type {a.t} for an out parameter of type {t}"
                    )
                copy_out += self.fe.stmts.store(target.expr, ref, str(pos))
            if direction != "dir_out":
                out += self.fe.stmts.store_value(Value(ref, t, lv=True), a, node, str(pos))
        return out, copy_out, scope

    def inline_control(
        self, sym: Sym, args: list[Value], nodes: list[Node], pos: Pos, ctx: Ctx
    ) -> list[ir.Stmt]:
        """`sub.apply(hdr, meta, sm)`: the sub-control's declarations and body, lowered into this block.

        Its tables, actions and externs are named by the instance path (as p4c does:
        "Ingress.sub.table"); lvalue arguments are passed by alias, other `in` arguments by a fresh local.
        """
        tree = sym.tree
        assert tree is not None
        if tree.data != "control_decl":
            raise type_error(pos, f"parser {sym.qname} can only be applied in a parser state")
        if sym.qname in self.applied and any(
            d.data in ("table_decl", "instantiation") for d in tree.children[2:-1]
        ):  # its tables and extern instances exist once (p4c: a table applied twice is refused for BMv2)
            raise unsupported(pos, f"applying control instance {sym.qname} (with tables or externs) twice")
        self.applied.add(sym.qname)
        out, scope = self.bind_block(sym, args, nodes, pos, ctx)
        saved = ctx.scopes, ctx.prefix
        ctx.scopes, ctx.prefix = [self.fe.decls.globals, sym.ctor or {}, scope], sym.qname
        for local in tree.children[2:-1]:
            out.extend(self.fe.stmts.local_decl(local, ctx))
        out.extend(self.without_returns(self.fe.stmts.block(tree.children[-1], ctx), sym, ctx))
        ctx.scopes, ctx.prefix = saved
        return out

    def bind_block(
        self, sym: Sym, args: list[Value], nodes: list[Node], pos: Pos, ctx: Ctx
    ) -> tuple[list[ir.Stmt], dict[str, Sym]]:
        """The parameters of an applied sub-control or sub-parser: lvalue arguments are passed by alias,
        `in` arguments by a fresh local, extern instances passed on; an `out` header of a sub-parser
        starts invalid. The statements that fix the arguments' places and copy the others in, and the
        scope naming the parameters."""
        assert sym.tree is not None
        params = kids(sym.tree.children[0].children[3])
        self.fe.calls.arity(args, len(params), pos, f"{sym.qname}.apply")
        scope: dict[str, Sym] = {}
        out: list[ir.Stmt] = []
        for p, a, node in zip(params, args, nodes, strict=True):
            t = self.fe.decls.resolve_type(p.children[2])
            pname = self.name(p.children[3])
            readonly = p.children[1].data in ("dir_in", "dir_none")
            if t.k == "extern" and "inst" in a.extra and a.t.name == t.name:  # an extern instance passed on
                scope[pname] = Sym("inst", t, a.extra["inst"].name)
                continue
            if a.lv and a.t == t and p.children[1].data != "dir_in":  # `in`: a copy, as the callee may
                pinned, a = self.fe.effects.pin_place(a, ctx, node)  # write the same place through another
                out.extend(pinned)
                scope[pname] = Sym("alias", t, value=Value(a.node, a.t, a.const, lv=not readonly))
                if p.children[1].data == "dir_out" and t.k == "header" and sym.tree.data == "parser_decl":
                    out.append(ir.SetInvalid(a.expr, str(pos)))
                continue
            if p.children[1].data in ("dir_out", "dir_inout"):
                raise type_error(self.pos(node), f"argument for {pname} must be an lvalue of type {t}")
            var = ctx.add_local(pname, t, self.pos(p))
            scope[pname] = Sym("var", t, var, readonly=True)
            out += self.fe.stmts.store_value(Value(ir.Var(var, t.to_ir()), t, lv=True), a, node, str(pos))
        return out, scope
