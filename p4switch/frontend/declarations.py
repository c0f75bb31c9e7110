"""The declarations pass: every top-level declaration by name, the symbol table the other parts read.

Types (headers, structs, enums, typedefs, serializable enums erased to their base type, extern and block
types), constants (folded), errors and match kinds, extern functions, top-level actions and functions,
instantiations. Header and struct types become their IR declarations here; nothing else is lowered yet.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lark import Token, Tree

from p4switch import ir
from p4switch.frontend.errors import type_error, unsupported
from p4switch.frontend.scope import Ctx, Part, Sym
from p4switch.frontend.source import Node, PTree, kids
from p4switch.frontend.types import ANY, BOOL, ERROR, INFINT, STRING, VOID, Type, bit, stack_of

if TYPE_CHECKING:
    from p4switch.frontend.parts import FrontEnd

MEMBER_KINDS = frozenset(
    {"bit", "int", "varbit", "bool", "header", "union", "struct", "stack", "error", "enum"}
)
"""The kinds of type a struct member or tuple element can have."""


class Declarations(Part):
    """The symbol table: `types` and `globals` by name, and the header/struct types in IR form."""

    def __init__(self, fe: FrontEnd) -> None:
        super().__init__(fe)
        self.types: dict[str, tuple[str, Any]] = {}
        self.globals: dict[str, Sym] = {}
        self.overloads: dict[str, list[PTree]] = {}  # extern functions by name: every declaration
        self.errors: list[str] = []
        self.match_kinds: set[str] = set()
        self.enums: dict[str, tuple[str, ...]] = {}
        self.headers: dict[str, ir.HeaderType] = {}
        self.structs: dict[str, ir.StructType] = {}
        self.member_types: dict[tuple[str, str], list[tuple[str, Type]]] = {}  # (header|struct, name)
        self.header_annos: dict[str, dict[str, list[Any]]] = {}
        self.tuples: dict[tuple[Type, ...], str] = {}  # tuple types by their element types
        self.new_types: dict[str, tuple[int, dict[str, list[Any]]]] = {}  # `type` declarations: width, annos
        self.ser_enums: dict[str, tuple[int, dict[str, int]]] = {}  # serializable enums: width, members
        self.field_type_names: dict[str, list[str]] = {}  # per header type, its fields' `type` names
        self.field_names: dict[tuple[str, str], str] = {}  # (type, field) -> its @name, for P4Info key names

    def declare_all(self, tree: PTree) -> None:
        """The declarations pass: every top-level declaration, in order."""
        for decl in kids(tree):
            self.declare(decl)

    def declare(self, decl: PTree) -> None:
        handler: Callable[[PTree], None] | None = getattr(self, "decl_" + decl.data, None)
        if handler is None:
            raise unsupported(
                self.pos(decl), decl.data.replace("_decl", "").replace("_", " ") + " declaration"
            )
        handler(decl)

    def decl_empty_decl(self, decl: PTree) -> None:
        return None

    def decl_const_decl(self, decl: PTree) -> None:
        self.globals[self.name(decl.children[2])] = self.make_const(decl, None)

    def make_const(self, decl: PTree, ctx: Ctx | None) -> Sym:
        t = self.resolve_type(decl.children[1])
        v = self.fe.exprs.coerce(self.fe.exprs.expr(decl.children[3], ctx), t, decl.children[3])
        if v.const is None:
            raise type_error(self.pos(decl.children[3]), "a const needs a compile-time constant value")
        return Sym("const", t, value=v)

    def decl_typedef_decl(self, decl: PTree) -> None:
        self.types[self.name(decl.children[2])] = ("typedef", self.resolve_type(decl.children[1]))

    def decl_newtype_decl(self, decl: PTree) -> None:
        """`type bit<W> T;`: bit<W> for the program, T by name in P4Info (type_name, type_info.new_types)."""
        name = self.name(decl.children[2])
        t = self.resolve_type(decl.children[1])
        self.types[name] = ("typedef", dataclasses.replace(t, newtype=name) if t.is_bits else t)
        if t.is_bits:
            self.new_types[name] = (t.w, self.annos(decl.children[0]))

    def fields(self, decl: PTree) -> list[tuple[str, Type, dict[str, list[Any]], PTree]]:
        out = []
        for f in decl.children[2:]:
            if isinstance(f, Tree) and f.data == "field":
                name, annos = self.name(f.children[2]), self.annos(f.children[0])
                given = annos.get("name")
                if given and isinstance(given[0], str):
                    self.field_names[(self.name(decl.children[1]), name)] = given[0]
                out.append((name, self.resolve_type(f.children[1]), annos, f))
        return out

    def decl_header_decl(self, decl: PTree) -> None:
        name = self.name(decl.children[1])
        annos = self.annos(decl.children[0])
        fields: list[ir.HeaderField] = []
        members: list[tuple[str, Type]] = []
        for fname, t, _, f in self.fields(decl):
            fields += self.header_fields(fname, t, f)
            members.append((fname, t))
        if sum(f.varbit for f in fields) > 1:
            raise type_error(self.pos(decl.children[1]), f"header {name} has more than one varbit field")
        ch = annos.get("controller_header", [None])
        bits = sum(f.w for f in fields if not f.varbit)
        if bits % 8:
            raise type_error(
                self.pos(decl.children[1]), f"header {name} is {bits} bits wide, not whole bytes"
            )
        self.headers[name] = ir.HeaderType(tuple(fields), bits, ch[0] if ch else None)
        self.member_types[("header", name)] = members
        self.header_annos[name] = annos
        self.field_type_names[name] = [t.newtype for _, t in members] if len(members) == len(fields) else []
        self.types[name] = ("header", None)

    def header_fields(self, fname: str, t: Type, node: PTree) -> list[ir.HeaderField]:
        """The IR fields of one header field: bit<W>/int<W> as is, bool as one bit, and a struct of those
        flattened into its leaves named `fname.member` (a name no P4 identifier has)."""
        if t.is_bits:
            return [ir.HeaderField(fname, t.w, t.k == "int")]
        if t.k == "bool":
            return [ir.HeaderField(fname, 1)]
        if t.k == "varbit":
            return [ir.HeaderField(fname, t.w, varbit=True)]
        if t.k == "struct":
            return [hf for m, mt in self.members(t) for hf in self.header_fields(f"{fname}.{m}", mt, node)]
        raise unsupported(self.pos(node), f"header field of type {t}")

    def decl_struct_decl(self, decl: PTree) -> None:
        name = self.name(decl.children[1])
        fields = []
        members: list[tuple[str, Type]] = []
        for fname, t, annos, f in self.fields(decl):
            if t.k not in MEMBER_KINDS:
                raise unsupported(self.pos(f), f"struct field of type {t}")
            lists = annos.get("field_list")
            field_lists = None if lists is None else tuple(lists)
            fields.append(ir.StructField(fname, t.to_ir(), field_lists))
            members.append((fname, t))
        self.structs[name] = ir.StructType(tuple(fields))
        self.member_types[("struct", name)] = members
        self.types[name] = ("struct", None)

    def decl_union_decl(self, decl: PTree) -> None:
        """A header union: a struct of headers in the IR, the front end keeping at most one valid."""
        name = self.name(decl.children[1])
        members: list[tuple[str, Type]] = []
        for fname, t, _, f in self.fields(decl):
            if t.k != "header":
                raise type_error(self.pos(f), f"header_union {name}: {fname} is not a header")
            members.append((fname, t))
        self.structs[name] = ir.StructType(tuple(ir.StructField(f, t.to_ir()) for f, t in members))
        self.member_types[("union", name)] = members
        self.types[name] = ("union", None)

    def decl_enum_decl(self, decl: PTree) -> None:
        name = self.name(decl.children[1])
        self.enums[name] = tuple(self.name(n) for n in kids(decl.children[2]))
        self.types[name] = ("enum", None)

    def decl_ser_enum_decl(self, decl: PTree) -> None:
        base = self.resolve_type(decl.children[1])
        members = {}
        for m in decl.children[3:]:
            if isinstance(m, Tree) and m.data == "ser_member":
                v = self.fe.exprs.coerce(self.fe.exprs.expr(m.children[1], None), base, m.children[1])
                members[self.name(m.children[0])] = v.const
        name = self.name(decl.children[2])
        self.types[name] = ("serenum", (base, members))
        self.ser_enums[name] = (base.w, {m: int(v) for m, v in members.items() if v is not None})

    def decl_error_decl(self, decl: PTree) -> None:
        self.errors.extend(self.name(n) for n in kids(decl.children[1]) if self.name(n) not in self.errors)

    def decl_match_kind_decl(self, decl: PTree) -> None:
        self.match_kinds.update(self.name(n) for n in kids(decl.children[0]))

    def decl_extern_obj_decl(self, decl: PTree) -> None:
        self.types[self.name(decl.children[1])] = ("extern", decl)

    def decl_extern_fn_decl(self, decl: PTree) -> None:
        self.globals[self.name(decl.children[2])] = Sym("extern_fn", tree=decl)
        self.overloads.setdefault(self.name(decl.children[2]), []).append(decl)

    def decl_package_decl(self, decl: PTree) -> None:
        self.types[self.name(decl.children[1])] = ("package", decl)

    def decl_parser_type_decl(self, decl: PTree) -> None:
        self.types.setdefault(self.name(decl.children[0].children[1]), ("blocktype", decl))

    decl_control_type_decl = decl_parser_type_decl

    def decl_parser_decl(self, decl: PTree) -> None:
        self.types[self.name(decl.children[0].children[1])] = ("block", decl)

    decl_control_decl = decl_parser_decl

    def decl_action_decl(self, decl: PTree) -> None:
        name = self.name(decl.children[1])
        self.globals[name] = Sym("action", tree=decl, qname=self.fq(None, name, self.annos(decl.children[0])))

    def decl_instantiation(self, decl: PTree) -> None:
        name = self.name(decl.children[3])
        t = self.resolve_type(decl.children[1])
        if t.k == "extern":  # a register, counter, meter... of the whole program: named as declared
            annos = self.annos(decl.children[0])
            fq = self.fq(None, name, annos)
            self.globals[name] = Sym("inst", t, fq)
            self.fe.v1.instantiate(t, kids(decl.children[2]), fq, decl, None, annos)
            if self.names_typedef(decl.children[1]):
                self.fe.v1.unlisted.add(fq)
            return
        self.globals[name] = Sym("instance", tree=decl)

    def decl_function_decl(self, decl: PTree) -> None:
        if decl.children[3] is not None:
            raise unsupported(self.pos(decl), "generic function")
        name = self.name(decl.children[2])
        self.globals[name] = Sym("function", tree=decl, qname=name)

    def decl_value_set_decl(self, decl: PTree) -> None:
        raise unsupported(self.pos(decl), "value_set")

    def fq(self, control: str | None, local: str, annos: dict[str, list[Any]]) -> str:
        """The fully qualified control-plane name, as p4c writes it (with @name honoured)."""
        given = annos.get("name")
        if given and isinstance(given[0], str):
            if given[0].startswith("."):
                return given[0][1:]
            local = given[0]
        return f"{control}.{local}" if control else local

    def resolve_type(self, node: Node) -> Type:
        if isinstance(node, Token):
            return self.named_type(node)
        d = node.data
        if d == "bool_type":
            return BOOL
        if d == "error_type":
            return ERROR
        if d == "string_type":
            return STRING
        if d == "infint_type":
            return INFINT
        if d == "void_type":
            return VOID
        if d == "bit1_type":
            return bit(1)
        if d in ("bit_type", "int_type"):
            w = self.fe.exprs.const_int(node.children[0], None)
            if w <= 0 or w > 2048:
                raise type_error(self.pos(node), f"invalid width {w}")
            return Type("bit" if d == "bit_type" else "int", w)
        if d == "varbit_type":
            w = self.fe.exprs.const_int(node.children[0], None)
            if w <= 0 or w > 2048:
                raise type_error(self.pos(node), f"invalid width {w}")
            return Type("varbit", w)
        if d == "named_type":
            return self.named_type(node.children[0])
        if d == "specialized_type":
            base = self.named_type(node.children[0])
            args = tuple(self.resolve_type(a) for a in kids(node.children[1]))
            return Type(base.k, base.w, base.name, base.size, args)
        if d == "stack_type":
            elem = self.resolve_type(node.children[0])
            if elem.k not in ("header", "union"):
                raise type_error(self.pos(node), f"a stack of {elem}: stacks hold headers or header unions")
            return stack_of(elem, self.fe.exprs.const_int(node.children[1], None))
        if d == "dontcare_type":
            return ANY
        if d == "tuple_type":
            return self.tuple_type([self.resolve_type(a) for a in kids(node.children[0])], node)
        raise unsupported(self.pos(node), f"type {d}")

    def names_typedef(self, node: Node) -> bool:
        """Whether a declaration's type is the name of a typedef (`typedef register<T> R; R(8) r;`):
        p4c 1.2.4.8 resolves an extern instance's type for P4Info without following typedefs, so such an
        instance is left out of P4Info (and so out of P4Runtime) while the program still uses it."""
        if isinstance(node, Tree) and node.data == "named_type":
            node = node.children[0]
        return isinstance(node, Token) and self.types.get(str(node), ("",))[0] == "typedef"

    def named_type(self, tok: Node) -> Type:
        name = str(tok)
        if name not in self.types:
            raise type_error(self.pos(tok), f"unknown type {name}")
        kind, info = self.types[name]
        if kind == "typedef":
            return info  # type: ignore[no-any-return]
        if kind == "serenum":  # its underlying bit<W>, named for P4Info's type_info
            return dataclasses.replace(info[0], newtype=name)
        if kind == "typevar":
            return ANY
        if kind == "extern" and name in ("packet_in", "packet_out"):
            return Type(name)
        return Type(kind, name=name)

    def tuple_type(self, elems: list[Type], node: PTree) -> Type:
        """`tuple<T0, T1, ...>`: a struct with members f0, f1, ... in the IR, one per distinct tuple type
        (named `tuple$N`, a name no P4 type has); `{a, b}` initializes it and `t[i]` is its member fi."""
        for e in elems:
            if e.k not in MEMBER_KINDS:
                raise unsupported(self.pos(node), f"tuple element of type {e}")
        key = tuple(elems)
        if key not in self.tuples:
            name = self.tuples[key] = f"tuple${len(self.tuples)}"
            members = [(f"f{i}", e) for i, e in enumerate(elems)]
            self.structs[name] = ir.StructType(tuple(ir.StructField(f, e.to_ir()) for f, e in members))
            self.member_types[("struct", name)] = members
        return Type("struct", name=self.tuples[key])

    def elem_type(self, t: ir.TStack) -> ir.Type:
        """The IR type of a stack's elements: a header, or a header union (a struct of headers)."""
        return ir.THeader(t.elem) if t.elem in self.headers else ir.TStruct(t.elem)

    def is_union(self, name: str) -> bool:
        return self.types.get(name, ("", None))[0] == "union"

    def members(self, t: Type) -> list[tuple[str, Type]]:
        """The fields of a header or struct type, in order (none for other types)."""
        return self.member_types.get((t.k, t.name), [])
