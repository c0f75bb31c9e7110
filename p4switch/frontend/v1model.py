"""The v1model part: what the front end knows of v1model.p4.

The V1Switch package (its six blocks and the headers and metadata types), the extern instances (counter,
direct_counter, meter, direct_meter, register, action_profile, action_selector) and their methods, and the
extern functions (mark_to_drop, clone and clone_preserving_field_list, clone3, hash, random, digest, the
checksums, log_msg, assert/assume, verify), each checked against its signature.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lark import Token, Tree

from p4switch import ir
from p4switch.frontend.errors import Pos, type_error, unsupported
from p4switch.frontend.scope import Ctx, Part
from p4switch.frontend.source import Node, PTree, kids
from p4switch.frontend.types import BOOL, ERROR, STRING, Type, Value, bit, from_ir

if TYPE_CHECKING:
    from p4switch.frontend.parts import FrontEnd


_EXTERN_FN_HANDLERS = {
    "verify": "fn_verify",
    "mark_to_drop": "fn_mark_to_drop",
    "clone": "fn_clone",
    "clone_preserving_field_list": "fn_clone",
    "clone3": "fn_clone3",
    "resubmit_preserving_field_list": "fn_again",
    "recirculate_preserving_field_list": "fn_again",
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
    "resubmit_preserving_field_list": 1,
    "recirculate_preserving_field_list": 1,
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


@dataclass(frozen=True)
class V1Switch:
    """The `main` package: its pipeline, and each parser/control declaration to lower (a block bound to
    two roles is listed once, under its first)."""

    pipeline: ir.Pipeline
    blocks: list[tuple[str, PTree]]

    def parsers(self) -> list[PTree]:
        return [decl for role, decl in self.blocks if role == "parser"]

    def controls(self) -> list[PTree]:
        return [decl for role, decl in self.blocks if role != "parser"]


@dataclass
class _ExternCall:
    """The arguments of one extern function call, for its `fn_<name>` lowering."""

    name: str
    args: list[Value]
    nodes: list[Node]
    targs: list[Type]
    pos: Pos
    ctx: Ctx


class V1Model(Part):
    """The v1model specifics; `extern_by_name` and `digests` are what the program lists."""

    def __init__(self, fe: FrontEnd) -> None:
        super().__init__(fe)
        self.extern_by_name: dict[str, ir.ExternInstance] = {}
        self.digests: dict[str, ir.DigestType] = {}
        self.meta_type = ""
        self.extern_annos: dict[str, dict[str, list[Any]]] = {}
        self.unlisted: set[str] = set()  # instances p4c leaves out of P4Info (Declarations.names_typedef)
        self.ctor_args: dict[str, list[Node]] = {}  # the pipeline blocks' constructor arguments, by block
        self.value_set_fields: dict[str, list[str]] = {}  # a struct value set's field names, for P4Info

    def bind_pipeline(self) -> V1Switch:
        """`V1Switch(P(), VC(), I(), E(), CC(), D()) main;`: the six blocks and the types they share."""
        main = self.fe.decls.globals.get("main")
        if main is None or main.kind != "instance" or main.tree is None:
            raise type_error(
                Pos(self.fe.source.file, 1, 1), "the program has no `V1Switch(...) main;` instantiation"
            )
        tree = main.tree
        ptype = self.fe.decls.resolve_type(tree.children[1])
        if ptype.name != "V1Switch":
            raise unsupported(self.pos(tree), f"package {ptype.name} (only V1Switch)")
        args = self.package_args(ptype.name, kids(tree.children[2]), tree)
        if len(args) != 6:
            raise type_error(self.pos(tree), f"V1Switch takes 6 arguments, got {len(args)}")
        roles: dict[str, str] = {}
        blocks: list[tuple[str, PTree]] = []
        for role, arg in zip(ir.Pipeline.ROLES, args, strict=True):
            if not (isinstance(arg, Tree) and arg.data == "ctor_call" and isinstance(arg.children[0], Token)):
                raise unsupported(self.pos(arg), "V1Switch argument other than `Block()`")
            bname = str(arg.children[0])
            if bname in self.ctor_args and (self.ctor_args[bname] or kids(arg.children[1])):
                raise unsupported(self.pos(arg), f"{bname} bound twice with constructor arguments")
            self.ctor_args[bname] = kids(arg.children[1])
            kind, decl = self.fe.decls.types.get(bname, ("", None))
            if kind != "block":
                raise type_error(self.pos(arg), f"{bname} is not a parser or control with a body")
            if bname in roles.values():
                # Sharing one stateless block (e.g. empty checksum controls) is fine; tables or externs
                # would need one copy per instance.
                if any(
                    isinstance(c, Tree) and c.data in ("table_decl", "instantiation") for c in decl.children
                ):
                    raise unsupported(self.pos(arg), f"instantiating {bname} twice")
            else:
                blocks.append((role, decl))
            roles[role] = bname
        parser_params = kids(blocks[0][1].children[0].children[3])
        if len(parser_params) != 4:
            raise type_error(self.pos(blocks[0][1]), "the v1model parser takes 4 parameters")
        headers_type = self.fe.decls.resolve_type(parser_params[1].children[2]).name
        self.meta_type = self.fe.decls.resolve_type(parser_params[2].children[2]).name
        pipeline = ir.Pipeline(**roles, headers_type=headers_type, metadata_type=self.meta_type)
        return V1Switch(pipeline, blocks)

    def package_args(self, package: str, args: list[PTree], tree: PTree) -> list[PTree]:
        """The arguments of a package instantiation in parameter order (`V1Switch(p = P(), ig = I(), ...)`
        names them)."""
        named = [a for a in args if isinstance(a, Tree) and a.data == "named_arg"]
        if not named:
            return args
        if len(named) != len(args):
            raise type_error(self.pos(tree), "arguments must be all named or all positional")
        params = [self.name(p.children[3]) for p in kids(self.fe.decls.types[package][1].children[3])]
        given = {self.name(a.children[0]): a.children[1] for a in named}
        unknown = set(given) - set(params)
        if unknown or len(given) != len(named):
            raise type_error(self.pos(tree), f"{package} has no parameter {', '.join(sorted(unknown))}")
        missing = [p for p in params if p not in given]
        if missing:
            raise type_error(self.pos(tree), f"no argument for {package} parameter {', '.join(missing)}")
        return [given[p] for p in params]

    def instantiate(
        self, t: Type, args: list[Any], fq: str, node: PTree, ctx: Ctx | None, annos: dict[str, list[Any]]
    ) -> ir.ExternInstance:
        if t.k != "extern":
            raise unsupported(self.pos(node), f"instantiation of {t}")
        vals = [self.fe.exprs.expr(a, ctx) for a in args]

        def need(n: int) -> None:
            if len(vals) != n:
                raise type_error(self.pos(node), f"{t.name} takes {n} constructor arguments, got {len(vals)}")

        def num(i: int) -> int:
            v = self.fe.exprs.coerce(vals[i], bit(32), args[i])
            if v.const is None:
                raise type_error(self.pos(args[i]), "expected a compile-time constant")
            return int(v.const)

        def member(i: int, enum: str) -> str:
            return self.enum_member(vals[i], enum, args[i])

        src = self.src(node)
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
                raise unsupported(self.pos(node), f"direct_meter with a result of type {rt}")
            inst = ir.DirectMeter(fq, member(0, "MeterType"), None, rt.to_ir(), src)
        elif t.name == "register":
            need(1)
            if not t.args or not t.args[0].is_bits:
                raise unsupported(self.pos(node), "register without a bit<W> element type")
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
            raise unsupported(self.pos(node), f"extern {t.name}")
        self.register_instance(inst, annos, node)
        return inst

    def register_instance(self, inst: ir.ExternInstance, annos: dict[str, list[Any]], node: PTree) -> None:
        fq = inst.name
        if fq in self.extern_by_name:
            raise type_error(self.pos(node), f"duplicate instance name {fq}")
        self.extern_by_name[fq] = inst
        self.extern_annos[fq] = annos

    def value_set(self, node: PTree, fq: str, ctx: Ctx) -> ir.ValueSet:
        """`value_set<T>(size) name;` in a parser: T is bit<W>/int<W> or a struct of those (one select key
        per field)."""
        targs = [self.fe.decls.resolve_type(a) for a in kids(node.children[1])]
        size = self.fe.exprs.coerce(self.fe.exprs.expr(node.children[2], ctx), bit(32), node.children[2])
        if len(targs) != 1 or size.const is None:
            raise type_error(self.pos(node), "value_set<T>(size) takes one type and a constant size")
        t = targs[0]
        fields = self.fe.decls.members(t) if t.k == "struct" else [("", t)]
        if not fields or not all(ft.is_bits for _, ft in fields):
            raise unsupported(self.pos(node), f"value_set of {t}")
        inst = ir.ValueSet(fq, int(size.const), tuple(ft.w for _, ft in fields), self.src(node))
        self.register_instance(inst, self.annos(node.children[0]), node)
        self.value_set_fields[fq] = [f for f, _ in fields] if t.k == "struct" else []
        return inst

    def enum_member(self, v: Value, enum: str, node: Node) -> str:
        if v.t != Type("enum", name=enum) or v.const is None:
            raise type_error(self.pos(node), f"expected a {enum} constant, got {v.t}")
        if enum == "HashAlgorithm" and v.const in _UNSUPPORTED_HASHES:
            raise unsupported(self.pos(node), f"hash algorithm {v.const}")
        return str(v.const)

    def extern_fn(
        self, name: str, nodes: list[Node], targs: list[Type], node: PTree, ctx: Ctx
    ) -> list[ir.Stmt]:
        """A call of a v1model/core extern function: checked, then lowered by its `fn_<name>` method."""
        pos = self.pos(node)
        handler_name = _EXTERN_FN_HANDLERS.get(name)
        if handler_name is None:
            raise unsupported(pos, f"extern function {name}")
        call = _ExternCall(name, [self.fe.exprs.expr(a, ctx) for a in nodes], nodes, targs, pos, ctx)
        arity = _EXTERN_FN_ARITY.get(name)
        if arity is not None:
            self.fe.calls.arity(call.args, arity, pos, name)
        stmt: ir.Stmt = getattr(self, handler_name)(call)
        return [stmt]

    def fn_verify(self, c: _ExternCall) -> ir.Stmt:
        if c.ctx.kind != "parser":
            raise type_error(c.pos, "verify is only available in a parser")
        cond = self.fe.exprs.coerce(c.args[0], BOOL, c.nodes[0])
        if c.args[1].t != ERROR or c.args[1].const is None:
            raise type_error(self.pos(c.nodes[1]), "verify needs an error constant")
        return ir.Verify(cond.expr, str(c.args[1].const), str(c.pos))

    def fn_mark_to_drop(self, c: _ExternCall) -> ir.Stmt:
        sm = self.fe.calls.lvalue(c.args[0], c.nodes[0])
        if sm.t != Type("struct", name="standard_metadata_t"):
            raise type_error(self.pos(c.nodes[0]), f"mark_to_drop needs standard_metadata, got {sm.t}")
        return ir.Call(c.name, args=(sm.expr,), src=str(c.pos))

    def fn_clone(self, c: _ExternCall) -> ir.Stmt:
        clone_type = self.enum_member(c.args[0], "CloneType", c.nodes[0])
        session = self.fe.exprs.coerce(c.args[1], bit(32), c.nodes[1]).expr
        field_list = None
        if c.name == "clone_preserving_field_list":
            index = self.fe.exprs.coerce(c.args[2], bit(8), c.nodes[2]).const
            if index is None:
                raise type_error(self.pos(c.nodes[2]), "the field list index must be a constant")
            field_list = self.field_list_paths(self.meta_type, int(index))
        return ir.Call(c.name, clone_type, args=(session,), field_list=field_list, src=str(c.pos))

    def fn_again(self, c: _ExternCall) -> ir.Stmt:
        """resubmit/recirculate_preserving_field_list(index): the user-metadata fields of that field list."""
        index = self.fe.exprs.coerce(c.args[0], bit(8), c.nodes[0]).const
        if index is None:
            raise type_error(self.pos(c.nodes[0]), "the field list index must be a constant")
        return ir.Call(c.name, field_list=self.field_list_paths(self.meta_type, int(index)), src=str(c.pos))

    def fn_hash(self, c: _ExternCall) -> ir.Stmt:
        args, nodes = c.args, c.nodes
        result = self.bit_result(args[0], nodes[0], "hash")
        base = self.fe.exprs.coerce(args[2], result.t if args[2].t.k == "infint" else args[2].t, nodes[2])
        hmax = self.fe.exprs.coerce(args[4], bit(32) if args[4].t.k == "infint" else args[4].t, nodes[4])
        return ir.Call(
            c.name,
            algorithm=self.enum_member(args[1], "HashAlgorithm", nodes[1]),
            args=(result.expr, base.expr, hmax.expr),
            data=tuple(x.expr for x in self.fe.calls.flatten(args[3], nodes[3])),
            src=str(c.pos),
        )

    def fn_random(self, c: _ExternCall) -> ir.Stmt:
        result = self.bit_result(c.args[0], c.nodes[0], "random")
        lo, hi = (self.fe.exprs.coerce(a, result.t, n) for a, n in zip(c.args[1:], c.nodes[1:], strict=True))
        return ir.Call(c.name, args=(result.expr, lo.expr, hi.expr), src=str(c.pos))

    def fn_digest(self, c: _ExternCall) -> ir.Stmt:
        return self.digest(c.args, c.nodes, c.targs, c.pos)

    def fn_checksum(self, c: _ExternCall) -> ir.Stmt:
        args, nodes = c.args, c.nodes
        cond = self.fe.exprs.coerce(args[0], BOOL, nodes[0])
        csum = self.fe.calls.lvalue(args[2], nodes[2]) if c.name.startswith("update") else args[2]
        if csum.t.k != "bit":
            raise type_error(self.pos(nodes[2]), f"checksum must be bit<W>, got {csum.t}")
        return ir.Call(
            c.name,
            algorithm=self.enum_member(args[3], "HashAlgorithm", nodes[3]),
            args=(cond.expr, csum.expr),
            data=tuple(x.expr for x in self.fe.calls.flatten(args[1], nodes[1])),
            src=str(c.pos),
        )

    def fn_log_msg(self, c: _ExternCall) -> ir.Stmt:
        if not c.args or c.args[0].t != STRING:
            raise type_error(c.pos, "log_msg needs a format string")
        data = [
            x.expr
            for a, n in zip(c.args[1:], c.nodes[1:], strict=True)
            for x in self.fe.calls.flatten(a, n, log=True)
        ]
        return ir.Call(c.name, format=str(c.args[0].const), args=tuple(data), src=str(c.pos))

    def fn_assert(self, c: _ExternCall) -> ir.Stmt:
        return ir.Call(c.name, args=(self.fe.exprs.coerce(c.args[0], BOOL, c.nodes[0]).expr,), src=str(c.pos))

    def bit_result(self, v: Value, node: Node, what: str) -> Value:
        """The `out` result argument of hash/random: a bit<W> lvalue."""
        result = self.fe.calls.lvalue(v, node)
        if result.t.k != "bit":
            raise type_error(self.pos(node), f"{what} result must be bit<W>, got {result.t}")
        return result

    def fn_clone3(self, c: _ExternCall) -> ir.Stmt:
        """Deprecated clone3(type, session, {fields}): user-metadata fields in the list are preserved."""
        args, nodes = c.args, c.nodes
        paths = []
        for item in self.fe.calls.flatten(args[2], nodes[2]):
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
            args=(self.fe.exprs.coerce(args[1], bit(32), nodes[1]).expr,),
            field_list=tuple(paths) if paths else None,
            src=str(c.pos),
        )

    def field_list_paths(
        self, struct: str, index: int, prefix: tuple[str, ...] = ()
    ) -> tuple[tuple[str, ...], ...]:
        paths: list[tuple[str, ...]] = []
        st = self.fe.decls.structs.get(struct)
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
        if t.k == "list":
            return self.list_digest(args, nodes, pos)
        if t.k != "struct":
            raise unsupported(self.pos(nodes[1]), "digest of data that is not a named struct or a list")
        fields = self.fe.decls.members(t)
        if args[1].t.k == "list":
            items = args[1].extra["items"]
            if len(items) != len(fields):
                raise type_error(self.pos(nodes[1]), f"digest struct {t.name} has {len(fields)} fields")
            values = [self.fe.exprs.coerce(i, ft, nodes[1]) for i, (_, ft) in zip(items, fields, strict=True)]
        elif args[1].t == t:
            values = [self.fe.exprs.member_value(args[1], fname, ft) for fname, ft in fields]
        else:
            raise type_error(self.pos(nodes[1]), f"digest data of type {args[1].t}, expected {t}")
        for (fname, ft), _ in zip(fields, values, strict=True):
            if not ft.is_bits:
                raise unsupported(self.pos(nodes[1]), f"digest field {fname} of type {ft}")
        receiver = self.fe.exprs.coerce(args[0], bit(32), nodes[0]).const
        self.digests.setdefault(
            t.name, ir.DigestType(t.name, tuple(ir.DigestField(f, ft.to_ir()) for f, ft in fields))
        )
        receiver_id = int(receiver) if receiver is not None else None
        return ir.Digest(t.name, receiver_id, tuple(v.expr for v in values), str(pos))

    def list_digest(self, args: list[Value], nodes: list[Node], pos: Pos) -> ir.Stmt:
        """digest(receiver, {a, b}): a digest of its own, named as p4c names it (`digest_<n>`, its P4Info
        type a tuple), its members f0, f1, ... as P4Runtime reads a tuple."""
        items = [self.fe.calls.flatten(i, nodes[1]) for i in args[1].extra["items"]]
        values = [v for item in items for v in item]
        for v in values:
            if not v.t.is_bits:
                raise unsupported(self.pos(nodes[1]), f"digest list member of type {v.t}")
        name = f"digest_{sum(1 for d in self.digests if d not in self.fe.decls.structs)}"
        fields = tuple(ir.DigestField(f"f{i}", v.t.to_ir()) for i, v in enumerate(values))
        self.digests[name] = ir.DigestType(name, fields)
        receiver = self.fe.exprs.coerce(args[0], bit(32), nodes[0]).const
        receiver_id = int(receiver) if receiver is not None else None
        return ir.Digest(name, receiver_id, tuple(v.expr for v in values), str(pos))

    def extern_method(
        self, inst: ir.ExternInstance, method: str, args: list[Value], nodes: list[Node], pos: Pos
    ) -> list[ir.Stmt]:
        kind = inst.tag
        src = str(pos)

        def index(i: int) -> ir.Expr:
            v = args[i]
            if v.t.k == "infint":
                v = self.fe.exprs.coerce(v, bit(32), nodes[i])
            if v.t.k != "bit":
                raise type_error(self.pos(nodes[i]), f"index must be bit<W>, got {v.t}")
            return v.expr

        def result(i: int, want: Type | None = None) -> ir.Expr:
            v = self.fe.calls.lvalue(args[i], nodes[i])
            if v.t.k != "bit" or (want is not None and v.t != want):
                raise type_error(self.pos(nodes[i]), f"result must be {want or 'bit<W>'}, got {v.t}")
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
        self.fe.calls.arity(args, signature[(kind, method)], pos, f"{kind}.{method}")
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
            ir_args = [index(0), self.fe.exprs.coerce(args[1], from_ir(inst.type), nodes[1]).expr]
        return [ir.MethodCall(inst.name, method, tuple(ir_args), src)]
