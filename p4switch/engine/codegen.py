"""IR (docs/p4switch-ir.md) -> Python source: one class per header/struct type, one function per parser,
control, table apply and action. The source is compiled once at load time; per packet the engine only
runs straight-line code on ints and small objects.

Conventions of the generated code:
- header objects have ``valid__`` plus one attribute per field, structs one per member; scalar members
  default to class attributes (invalid, zero), so a packet's headers and metadata cost one bare object each
  and only written fields take instance storage (measured faster than ``__slots__`` with an
  ``__init__``); both have ``copy()`` and ``set_(other)`` (assignment with P4 value semantics);
- an extracted header keeps its bytes in ``raw__``; every generated write to one of its fields clears it,
  so ``pack()`` returns the original bytes of untouched headers without rebuilding them;
- fields the program never reads (only writes, or not at all) are not decoded by the parser: they live
  as bits of the header's ``src__`` int (its value as extracted, 0 before), writes update those bits and
  ``pack()`` takes them from there, so a parser pays only for the fields the program looks at;
- the headers struct of the pipeline starts with every header member set to one shared blank header of
  its type (``_Z_<type>``, invalid, all zero, refusing writes), and a write first replaces the blank
  with a fresh header: a packet only builds the headers it parses or sets;
- parser/control functions take their parameters in declaration order (the packet parameter is the
  engine's ``PacketCtx``); control locals live on a per-invocation ``L`` object so the control's actions
  can reach them; action functions take ``(<control params>, L, <action data tuple>)``;
- a table's apply function returns the slot whose action ran on a hit, None on a miss;
- a stack element at a run-time index is ``_at(stack, index, cls)``: the element, or out of range a fresh
  blank ``cls()`` that reads as invalid and zero and takes writes nobody sees;
- names of the generated module: ``TR`` (trace on), ``X`` (per-packet extern context, see
  switch.ExternCtx), tables ``TBL<n>``, extern instances ``EXT<n>``.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass

from p4switch import ir
from p4switch.engine.api import DROP_PORT, ProgramError
from p4switch.engine.externs import HASH_ALGORITHMS

V1_ERRORS = [
    "NoError",
    "PacketTooShort",
    "NoMatch",
    "StackOutOfBounds",
    "HeaderTooShort",
    "ParserTimeout",
    "ParserInvalidArgument",
]


# attributes the generated classes define
RESERVED = frozenset({"valid__", "raw__", "src__", "copy", "set_", "pack"})


def attr(name: str) -> str:
    """Python attribute for a P4 field/member name: unchanged unless it is a Python keyword, one of the
    generated classes' own attributes, ends with '_' or starts with '__' (Python would mangle it);
    those get a trailing '_' (and a leading 'P' for '__'), which keeps the mapping one-to-one. The '.' of
    a header field flattened from a struct (`s.f`) becomes '·', which Python allows and P4 does not."""
    name = name.replace(".", "\u00b7")
    if name.startswith("__"):
        return "P" + name + "_"
    if keyword.iskeyword(name) or name in RESERVED or name.endswith("_"):
        return name + "_"
    return name


def ident(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text)


def mask(width: int) -> int:
    return (1 << width) - 1


@dataclass
class Scope:
    """How P4 variable names of one block (and its action) map to Python expressions."""

    names: dict[str, str]
    block: str
    in_action: bool = False
    in_parser: bool = False


class Emitter:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def indent(self) -> None:
        self.depth += 1

    def dedent(self) -> None:
        self.depth -= 1


@dataclass
class _Case:
    """A select case as generated: its keysets, or (``values``) a run of one-key exact cases."""

    next: str
    keysets: tuple[ir.Keyset, ...] = ()
    values: list[str] | None = None


class Generator:
    """What both back ends keep of the program they generate (this module's Codegen, Python; cgen's
    CCodegen, C, which mirrors Codegen method for method) and the helpers on it that do not depend on the
    target language: written once here so the two cannot drift apart."""

    def __init__(self, program: ir.Program) -> None:
        self.program = program
        self.headers = program.headers
        self.structs = program.structs
        self.errors: list[str] = list(program.errors) or V1_ERRORS
        self.enums = program.enums
        self.actions = {a.name: a for a in program.actions}
        self.tables = {t.name: t for t in program.tables}
        self.table_ids = {name: i for i, name in enumerate(self.tables)}
        self.externs = {e.name: e for e in program.externs}
        self.out = Emitter()
        self.tmp = 0
        self.src = program.source or "?"  # position of the statement being generated
        # (control name, action name) -> generated function name, for tables to bind
        self.action_fns: dict[tuple[str, str], str] = {}

    def fresh(self, prefix: str = "t") -> str:
        self.tmp += 1
        return f"_{prefix}{self.tmp}"

    def error_code(self, name: str) -> int:
        try:
            return self.errors.index(name)
        except ValueError:
            raise ProgramError(f"unknown error {name!r}") from None

    def width(self, t: ir.Type) -> int:
        try:
            return ir.width(t)
        except ValueError as exc:
            raise ProgramError(str(exc)) from None

    def error(self, node: object, what: str) -> ProgramError:
        """A ProgramError at the node's position (expressions: their statement's)."""
        return ProgramError(f"{getattr(node, 'src', '') or self.src}: {what}")

    def value_set_widths(self, ks: ir.KeysetValueSet, tr: ir.Select) -> int:
        """How many of the select's keys a value set keyset matches (its type's fields)."""
        vs = self.externs.get(ks.name)
        if not isinstance(vs, ir.ValueSet):
            raise self.error(tr, f"unknown value set {ks.name}")
        return len(vs.widths)


class Codegen(Generator):
    """Generates the module source for one IR program.

    One class of about a thousand lines, on purpose for now: its sections (type classes, expressions,
    statements, blocks) recurse into one another (a table apply emits statements, a statement emits
    expressions, a call inlines an action) over one generation state (the emitter, the temporaries, the
    source position being generated, the action functions tables bind to), so a split by section only
    pays once that state is an object of its own. That split is to follow the move of this class onto
    the typed IR (p4switch/ir.py), which rewrites most of its methods."""

    def __init__(self, program: ir.Program) -> None:
        super().__init__(program)
        self.extern_ids = {name: i for i, name in enumerate(self.externs)}
        self.lazy = self.lazy_fields()
        self.headers_struct = program.pipeline.headers_type

    # ----------------------------------------------------------------------- fields never read
    def lazy_fields(self) -> dict[str, set[str]]:
        """Per header type, the fields no expression of the program reads (the left-hand side of an
        assignment is not a read). Conservative: a field name read through a header type the walk
        cannot name is read in every header."""
        read: set[tuple[str, str]] = set()
        unknown: set[str] = set()

        def walk(node: object) -> None:
            lhs = node.lhs if isinstance(node, ir.Assign) else None
            if isinstance(node, ir.Assign) and isinstance(lhs, ir.Member) and self.header_field(lhs):
                walk(lhs.expr)
                walk(node.rhs)
                return
            if isinstance(node, ir.Member) and isinstance(node.expr.type, ir.THeader):
                if node.expr.type.name in self.headers:
                    read.add((node.expr.type.name, node.field))
                else:
                    unknown.add(node.field)
            for child in ir.children(node):
                walk(child)

        p = self.program
        for root in (*p.externs, *p.actions, *p.tables, *p.parsers, *p.controls, *p.digests, p.pipeline):
            walk(root)
        return {  # a header with a varbit field keeps every field (its layout is known at run time only)
            name: {f.name for f in h.fields} - {f for n, f in read if n == name} - unknown
            if not any(f.varbit for f in h.fields)
            else set()
            for name, h in self.headers.items()
        }

    def header_field(self, e: ir.Expr) -> tuple[str, str] | None:
        """(header type, field) when ``e`` is a field of a header of a known type."""
        if not isinstance(e, ir.Member):
            return None
        t = e.expr.type
        return (t.name, e.field) if isinstance(t, ir.THeader) and t.name in self.headers else None

    def field_bits(self, h: ir.HeaderType, field: str) -> tuple[int, int]:
        """(shift, width) of a field inside the header's value."""
        shift = h.bits
        for f in h.fields:
            shift -= f.w
            if f.name == field:
                return shift, f.w
        raise ProgramError(f"header has no field {field}")

    # ---------------------------------------------------------------------------- type classes
    def gen_types(self) -> None:
        o = self.out
        for name, h in self.headers.items():
            cls = f"H_{ident(name)}"
            # no __slots__: fields default to the class attributes (invalid, zero), so creating a header
            # per packet costs one object and only written fields take instance storage
            o.line(f"class {cls}:")
            o.indent()
            o.line("valid__ = False")
            for f in h.fields:
                o.line(f"{attr(f.name)} = {'(0, 0)' if f.varbit else '0'}")
            o.line("def copy(self):")
            o.indent()
            o.line(f"n = _new({cls}); n.__dict__.update(self.__dict__)")
            o.line("return n")
            o.dedent()
            o.line("def set_(self, other):")
            o.indent()
            o.line("if other is not self: d = self.__dict__; d.clear(); d.update(other.__dict__)")
            o.dedent()
            o.line("raw__ = None")
            if self.lazy[name]:
                o.line("src__ = 0")
            o.line("def pack(self):")
            o.indent()
            o.line("raw = self.raw__")
            o.line(f"return raw if raw is not None else {self.pack_header(h, name)}")
            o.dedent()
            o.dedent()
            # the shared blank: any write that skipped header_object() fails loudly instead of leaking
            o.line(f"class Z_{cls}({cls}):")
            o.line("    def __setattr__(self, name, value): raise _SharedWrite(name)")
            o.line("    def set_(self, other): raise _SharedWrite('set_')")
            o.line(f"_Z_{cls} = _new(Z_{cls})")
        for name, st in self.structs.items():
            members = [(attr(f.name), f.type) for f in st.fields]
            self.gen_record(f"S_{ident(name)}", members, True, blank_headers=name == self.headers_struct)

    def gen_record(
        self, cls: str, members: list[tuple[str, ir.Type]], methods: bool, blank_headers: bool = False
    ) -> None:
        """A struct (or a block's locals): scalar members (and, with ``blank_headers``, header members:
        the shared blanks) default to class attributes, so creating one per packet only builds its other
        members; copy() and set_() copy nested members deeply."""
        o = self.out
        nested = [(m, t) for m, t in members if isinstance(t, ir.THeader | ir.TStruct | ir.TStack)]
        o.line(f"class {cls}:")
        o.indent()
        for m, t in members:
            if blank_headers and isinstance(t, ir.THeader):
                o.line(f"{m} = _Z_H_{ident(t.name)}")
            elif (m, t) not in nested:
                o.line(f"{m} = {self.init_value(t)}")
        init = [(m, t) for m, t in nested if not (blank_headers and isinstance(t, ir.THeader))]
        if init:
            o.line("def __init__(self):")
            for m, t in init:
                o.line(f"    self.{m} = {self.init_value(t)}")
        if methods:
            o.line("def copy(self):")
            o.line(f"    n = _new({cls}); n.__dict__.update(self.__dict__)")
            for m, t in nested:
                o.line(f"    n.{m} = {self.copy_value(t, 'self.' + m)}")
            o.line("    return n")
            o.line("def set_(self, other):")
            o.line("    if other is self: return")
            o.line("    d = self.__dict__; d.clear(); d.update(other.__dict__)")
            for m, t in nested:
                o.line(f"    self.{m} = {self.copy_value(t, 'other.' + m)}")
        if not members and not methods:
            o.line("pass")
        o.dedent()

    def pack_header(self, h: ir.HeaderType, name: str) -> str:
        """The bytes of a header object `self` from its fields; a varbit field adds its current length."""
        vb = next((i for i, f in enumerate(h.fields) if f.varbit), None)
        if vb is None:
            return f"({self.pack_expr(h, 'self.', self.lazy[name])}).to_bytes({h.bits // 8}, 'big')"
        before, after = h.fields[:vb], h.fields[vb + 1 :]
        b = sum(f.w for f in after)
        high = self.pack_expr(ir.HeaderType(before, h.bits - b), "self.", set())
        low = self.pack_expr(ir.HeaderType(after, b), "self.", set())
        var = f"self.{attr(h.fields[vb].name)}"
        value = f"(((({high}) << {var}[0]) | {var}[1]) << {b}) | {low}"
        return f"({value}).to_bytes(({h.bits} + {var}[0]) >> 3, 'big')"

    def pack_expr(self, h: ir.HeaderType, prefix: str, lazy: set[str]) -> str:
        parts = []
        lazy_bits = 0
        shift = h.bits
        for f in h.fields:
            shift -= f.w
            if f.name in lazy:
                lazy_bits |= mask(f.w) << shift
                continue
            value = f"{prefix}{attr(f.name)}"
            if f.signed:
                value = f"({value} & {mask(f.w)})"
            parts.append(f"({value} << {shift})" if shift else value)
        if lazy_bits:
            parts.append(f"({prefix}src__ & {lazy_bits})")
        return " | ".join(parts) or "0"

    def init_value(self, t: ir.Type) -> str:
        if isinstance(t, ir.TBool):
            return "False"
        if isinstance(t, ir.TVarbit):
            return "(0, 0)"  # (length in bits, value)
        if isinstance(t, ir.THeader):
            return f"_new(H_{ident(t.name)})"
        if isinstance(t, ir.TStruct):
            return f"S_{ident(t.name)}()"
        if isinstance(t, ir.TStack):
            return f"[{self.init_value(self.elem_type(t))} for _ in range({t.size})]"
        return "0"

    def elem_type(self, t: ir.TStack) -> ir.Type:
        """The type of a stack's elements: a header, or a header union (a struct of headers)."""
        return ir.THeader(t.elem) if t.elem in self.headers else ir.TStruct(t.elem)

    def copy_value(self, t: ir.Type, expr: str) -> str:
        if isinstance(t, ir.THeader | ir.TStruct):
            return f"{expr}.copy()"
        if isinstance(t, ir.TStack):
            return f"[_h.copy() for _h in {expr}]"
        return expr

    def assign_value(self, t: ir.Type, lhs: str, rhs: str) -> str:
        if isinstance(t, ir.THeader | ir.TStruct):
            return f"{lhs}.set_({rhs})"
        if isinstance(t, ir.TStack):
            return f"for _a, _b in zip({lhs}, {rhs}): _a.set_(_b)"
        return f"{lhs} = {rhs}"

    # ---------------------------------------------------------------------------- expressions
    def wrap(self, expr: str, t: ir.Type) -> str:
        """Reduce a Python int expression to the range of type t."""
        if isinstance(t, ir.TBit):
            return f"(({expr}) & {mask(t.w)})"
        if isinstance(t, ir.TInt):
            w = t.w
            half = 1 << (w - 1)
            return f"((({expr}) + {half} & {mask(w)}) - {half})"
        return expr

    def expr(self, e: ir.Expr, sc: Scope) -> str:
        method = getattr(self, "e_" + e.tag, None)
        if method is None:  # pragma: no cover - every kind of ir.Expr has a method
            raise self.error(e, f"expression {e.tag!r} is not supported by p4switch")
        return str(method(e, e.type, sc))

    def e_const(self, e: ir.Const, t: ir.Type, sc: Scope) -> str:
        v = e.value
        if isinstance(t, ir.TError):
            return str(self.error_code(str(v)))
        if isinstance(t, ir.TEnum):
            return str(self.enums[t.name].index(str(v)))
        if isinstance(v, bool):
            return "True" if v else "False"
        return str(int(v)) if int(v) >= 0 else f"({int(v)})"

    def e_var(self, e: ir.Var, t: ir.Type, sc: Scope) -> str:
        try:
            return sc.names[e.name]
        except KeyError:
            raise self.error(e, f"unknown variable {e.name!r} in {sc.block}") from None

    def e_member(self, e: ir.Member, t: ir.Type, sc: Scope) -> str:
        return f"{self.expr(e.expr, sc)}.{attr(e.field)}"

    def e_index(self, e: ir.Index, t: ir.Type, sc: Scope) -> str:
        return f"{self.expr(e.expr, sc)}[{e.index}]"

    def e_dyn_index(self, e: ir.DynIndex, t: ir.Type, sc: Scope) -> str:
        """The element, or (out of range) a fresh blank one: reads see invalid and zero, writes are lost."""
        return f"_at({self.expr(e.expr, sc)}, {self.expr(e.index, sc)}, {self.record_class(t)})"

    def record_class(self, t: ir.Type) -> str:
        """The generated class of a header or struct type."""
        if isinstance(t, ir.THeader):
            return f"H_{ident(t.name)}"
        if isinstance(t, ir.TStruct):
            return f"S_{ident(t.name)}"
        raise ProgramError(f"type {t.k} has no generated class")

    def e_slice(self, e: ir.Slice, t: ir.Type, sc: Scope) -> str:
        base = self.expr(e.expr, sc)
        hi, lo = e.hi, e.lo
        return f"(({base} >> {lo}) & {mask(hi - lo + 1)})" if lo else f"({base} & {mask(hi + 1)})"

    def e_concat(self, e: ir.Concat, t: ir.Type, sc: Scope) -> str:
        left, right = e.left, e.right
        wr = self.width(right.type)
        wl = self.width(left.type)
        lv = self.expr(left, sc)
        rv = self.expr(right, sc)
        if isinstance(left.type, ir.TInt):
            lv = f"({lv} & {mask(wl)})"
        if isinstance(right.type, ir.TInt):
            rv = f"({rv} & {mask(wr)})"
        if isinstance(left.type, ir.TBool):
            lv = f"int({lv})"
        if isinstance(right.type, ir.TBool):
            rv = f"int({rv})"
        result = f"(({lv} << {wr}) | {rv})"
        return self.wrap(result, t) if isinstance(t, ir.TInt) else result

    def e_cast(self, e: ir.Cast, t: ir.Type, sc: Scope) -> str:
        inner = e.expr
        src = inner.type
        v = self.expr(inner, sc)
        sk, tk = src.k, t.k
        if tk == "bool":
            return f"({v} != 0)" if sk != "bool" else v
        if sk == "bool":
            return f"int({v})"
        if sk not in ("bit", "int") or tk not in ("bit", "int"):
            if sk == tk:
                return v
            raise self.error(e, f"cast from {sk} to {tk} is not supported by p4switch")
        sw, tw = self.width(src), self.width(t)
        if sk == tk and tw >= sw:
            return v
        if tk == "bit" and sk == "bit":
            return f"({v} & {mask(tw)})"
        if tk == "bit":
            return f"({v} & {mask(tw)})"
        # to int<tw>: from bit<sw> (reinterpret / extend) or int<sw> narrowing
        return self.wrap(v, t)

    def e_unary(self, e: ir.Unary, t: ir.Type, sc: Scope) -> str:
        v = self.expr(e.expr, sc)
        operator = e.operator
        if operator == "!":
            return f"(not {v})"
        if operator == "~":
            return f"({v} ^ {mask(t.w)})" if isinstance(t, ir.TBit) else f"(~{v})"
        if operator == "-":
            return self.wrap(f"-{v}", t)
        raise self.error(e, f"unary operator {operator} is not supported by p4switch")

    def e_binary(self, e: ir.Binary, t: ir.Type, sc: Scope) -> str:
        operator = e.operator
        a = self.expr(e.left, sc)
        b = self.expr(e.right, sc)
        if operator in ("==", "!=", "<", ">", "<=", ">="):
            if isinstance(e.left.type, ir.THeader | ir.TStruct | ir.TStack):
                raise self.error(e, f"'{operator}' on headers or structs is not supported by p4switch")
            return f"({a} {operator} {b})"
        if operator == "&&":
            return f"({a} and {b})"
        if operator == "||":
            return f"({a} or {b})"
        if operator in ("&", "|", "^"):
            return f"({a} {operator} {b})"
        if operator in ("+", "-", "*"):
            return self.wrap(f"{a} {operator} {b}", t)
        if operator in ("/", "%"):
            return self.divide(e, t, operator)
        if operator in ("|+|", "|-|"):
            w = self.width(t)
            lo, hi = (0, mask(w)) if isinstance(t, ir.TBit) else (-(1 << (w - 1)), (1 << (w - 1)) - 1)
            return f"min(max({a} {operator[1]} {b}, {lo}), {hi})"
        if operator == ">>":
            return f"({a} >> {b})"  # unsigned shifts beyond the width give 0, int ones sign-fill
        if operator == "<<":
            w = self.width(t)
            right = e.right
            if isinstance(right, ir.Const):
                return self.wrap(f"{a} << {right.value}", t) if int(right.value) < w else "0"
            return f"({self.wrap(f'{a} << {b}', t)} if {b} < {w} else 0)"
        raise self.error(e, f"operator {operator} is not supported by p4switch")

    def divide(self, e: ir.Binary, t: ir.Type, operator: str) -> str:
        """Division and modulo only of constants (folded here), as BMv2 has no run-time division."""
        left, right = e.left, e.right
        if not isinstance(left, ir.Const) or not isinstance(right, ir.Const):
            raise self.error(e, f"'{operator}' of a non-constant operand is not supported by p4switch")
        x, y = int(left.value), int(right.value)
        if y <= 0 or x < 0:
            raise self.error(e, f"'{operator}' needs a non-negative dividend and a positive divisor")
        return self.wrap(str(x // y if operator == "/" else x % y), t)

    def e_mux(self, e: ir.Mux, t: ir.Type, sc: Scope) -> str:
        return f"({self.expr(e.then, sc)} if {self.expr(e.cond, sc)} else {self.expr(e.else_, sc)})"

    def e_is_valid(self, e: ir.IsValid, t: ir.Type, sc: Scope) -> str:
        return f"{self.expr(e.expr, sc)}.valid__"

    def e_lookahead(self, e: ir.Lookahead, t: ir.Type, sc: Scope) -> str:
        if not sc.in_parser:
            raise self.error(e, "lookahead outside a parser")
        w = self.width(t)
        value = f"_lookahead(data, pos, {w})"
        if isinstance(t, ir.TBool):
            return f"({value} != 0)"
        return self.wrap(value, t) if isinstance(t, ir.TInt) else value

    def e_table_hit(self, e: ir.TableHit, t: ir.Type, sc: Scope) -> str:
        return f"({self.table_call(e, sc)} is not None)"

    def e_table_miss(self, e: ir.TableMiss, t: ir.Type, sc: Scope) -> str:
        return f"({self.table_call(e, sc)} is None)"

    def table_call(self, node: ir.TableHit | ir.TableMiss | ir.Apply | ir.Switch, sc: Scope) -> str:
        name = node.table
        if name not in self.table_ids:
            raise self.error(node, f"unknown table {name}")
        if sc.in_action:
            raise self.error(node, "table apply inside an action is not supported by p4switch")
        return f"APPLY{self.table_ids[name]}({sc.names['$args']}, L)"

    # ----------------------------------------------------------------------------- statements
    def block(self, stmts: tuple[ir.Stmt, ...], sc: Scope) -> None:
        if not stmts:
            self.out.line("pass")
        for s in stmts:
            self.stmt(s, sc)

    def stmt(self, s: ir.Stmt, sc: Scope) -> None:
        self.src = s.src or self.src
        method = getattr(self, "s_" + s.tag, None)
        if method is None:  # pragma: no cover - every kind of ir.Stmt has a method
            raise self.error(s, f"statement {s.tag!r} is not supported by p4switch")
        method(s, sc)

    def s_assign(self, s: ir.Assign, sc: Scope) -> None:
        value = self.expr(s.rhs, sc)
        self.store(s.lhs, value, sc)

    def store(self, lhs: ir.Expr, value: str, sc: Scope) -> None:
        """Assign a Python value expression to a P4 lvalue (slices read-modify-write their base)."""
        t = lhs.type
        if isinstance(lhs, ir.Slice):
            base = lhs.expr
            target = self.expr(base, sc)
            hi, lo = lhs.hi, lhs.lo
            m = mask(hi - lo + 1) << lo
            merged = f"({target} & {~m & mask(self.width(base.type))}) | ((({value}) << {lo}) & {m})"
            if isinstance(base.type, ir.TInt):
                merged = self.wrap(merged, base.type)
            self.store(base, merged, sc)
            return
        hf = self.header_field(lhs)
        if isinstance(lhs, ir.Member) and hf is not None and hf[1] in self.lazy[hf[0]]:
            # a field kept as bits of src__
            shift, width = self.field_bits(self.headers[hf[0]], hf[1])
            keep = mask(self.headers[hf[0]].bits) ^ (mask(width) << shift)
            self.header_object(lhs.expr, sc, "_w")
            self.out.line(f"_w.src__ = (_w.src__ & {keep}) | ((({value}) & {mask(width)}) << {shift})")
            self.out.line("_w.raw__ = None")
            return
        if isinstance(t, ir.THeader):
            self.out.line(f"{self.header_object(lhs, sc, '_w')}.set_({value})")
            return
        if isinstance(t, ir.TStruct | ir.TStack):
            self.out.line(self.assign_value(t, self.expr(lhs, sc), value))
            return
        if isinstance(lhs, ir.Member) and isinstance(lhs.expr.type, ir.THeader):
            # the header's bytes as extracted no longer describe it: pack() must rebuild them
            self.header_object(lhs.expr, sc, "_w")
            self.out.line(f"_w.{attr(lhs.field)} = {value}")
            self.out.line("_w.raw__ = None")
            return
        self.out.line(f"{self.expr(lhs, sc)} = {value}")

    def s_if(self, s: ir.If, sc: Scope) -> None:
        self.out.line(f"if {self.applied_condition(s.cond, sc) or self.expr(s.cond, sc)}:")
        self.out.indent()
        self.block(s.then, sc)
        self.out.dedent()
        if s.else_:
            self.out.line("else:")
            self.out.indent()
            self.block(s.else_, sc)
            self.out.dedent()

    def applied_condition(self, cond: ir.Expr, sc: Scope) -> str | None:
        """For ``if (t.apply().hit)``, ``.miss`` or their negation: the table inlined before the ``if``
        and the condition on its result; None for any other condition."""
        negate = isinstance(cond, ir.Unary) and cond.operator == "!"
        inner = cond.expr if isinstance(cond, ir.Unary) and negate else cond
        if not isinstance(inner, ir.TableHit | ir.TableMiss):
            return None
        self.table_call(inner, sc)  # checks the table and the scope
        self.table_body(self.tables[inner.table], sc)
        hit = isinstance(inner, ir.TableHit) != negate
        return "_s is not None" if hit else "_s is None"

    def s_apply(self, s: ir.Apply, sc: Scope) -> None:
        self.table_call(s, sc)  # checks the table and the scope
        self.table_body(self.tables[s.table], sc)

    def s_switch(self, s: ir.Switch, sc: Scope) -> None:
        name = s.table
        tid = self.table_ids.get(name)
        if tid is None:
            raise self.error(s, f"unknown table {name}")
        var = self.fresh("act")
        self.out.line(f"{var} = ({self.table_call(s, sc)} or TBL{tid}.default).action.name")
        first = True
        default_case = None
        for case in s.cases:
            if case.actions is None:
                default_case = case
                continue
            names = ", ".join(repr(a) for a in case.actions)
            self.out.line(f"{'if' if first else 'elif'} {var} in ({names},):")
            first = False
            self.out.indent()
            self.block(case.body, sc)
            self.out.dedent()
        if default_case is not None:
            if first:
                self.block(default_case.body, sc)
            else:
                self.out.line("else:")
                self.out.indent()
                self.block(default_case.body, sc)
                self.out.dedent()

    def s_exit(self, s: ir.Exit, sc: Scope) -> None:
        # in an apply body the control function itself ends; an action unwinds to its control's
        # `except _Exit` (v1model: exit ends the block, the pipeline goes on with the next one)
        self.out.line("raise _Exit" if sc.in_action else "return")

    def s_return(self, s: ir.Return, sc: Scope) -> None:
        self.out.line("return")

    def header_object(self, e: ir.Expr, sc: Scope, var: str) -> str:
        """Emit ``var = <header e>`` for a header about to be written: a member of the headers struct
        that still holds the shared blank gets a fresh header first. Returns ``var``."""
        ref = self.expr(e, sc)
        self.out.line(f"{var} = {ref}")
        if (
            isinstance(e, ir.Member)
            and isinstance(e.expr.type, ir.TStruct)
            and e.expr.type.name == self.headers_struct
            and isinstance(e.type, ir.THeader)
        ):
            cls = f"H_{ident(e.type.name)}"
            self.out.line(f"if {var} is _Z_{cls}: {var} = {ref} = _new({cls})")
        return var

    def s_set_valid(self, s: ir.SetValid, sc: Scope) -> None:
        self.out.line(f"{self.header_object(s.header, sc, '_w')}.valid__ = True")

    def s_set_invalid(self, s: ir.SetInvalid, sc: Scope) -> None:
        self.out.line(f"{self.header_object(s.header, sc, '_w')}.valid__ = False")

    def s_extract(self, s: ir.Extract, sc: Scope) -> None:
        if not sc.in_parser:
            raise self.error(s, "extract outside a parser")
        h = s.header
        if not isinstance(h.type, ir.THeader):
            raise self.error(s, f"extract of a {h.type.k}, not a header")
        hdef = self.headers[h.type.name]
        nbytes = hdef.bits // 8
        if hdef.bits % 8:
            raise self.error(
                s, "headers whose width is not a multiple of 8 bits are not supported by p4switch"
            )
        if s.length is not None:
            self.extract_varbit(s, s.length, hdef, sc)
            return
        o = self.out
        o.line(f"if pos + {nbytes} > n: raise _Reject({self.error_code('PacketTooShort')})")
        o.line(f"_r = data[pos:pos + {nbytes}]; _v = _from_bytes(_r, 'big')")
        o.line(f"pos += {nbytes}")
        self.header_object(h, sc, "_h")
        o.line("_h.raw__ = _r")
        lazy = self.lazy[h.type.name]
        if lazy:
            o.line("_h.src__ = _v")
        shift = hdef.bits
        for f in hdef.fields:
            shift -= f.w
            if f.name in lazy:
                continue
            value = f"_v >> {shift}" if shift else "_v"
            if shift + f.w < hdef.bits:
                value = f"({value}) & {mask(f.w)}"
            if f.signed:
                value = self.wrap(value, ir.TInt(f.w))
            o.line(f"_h.{attr(f.name)} = {value}")
        o.line("_h.valid__ = True")
        o.line(f"if TR: _trace('parser: extracted %s', {self.expr_text(h)!r})")

    def extract_varbit(self, s: ir.Extract, length: ir.Expr, hdef: ir.HeaderType, sc: Scope) -> None:
        """extract(h, bits) of a header with a varbit field, checked as BMv2 does: the length a multiple
        of 8 (else ParserInvalidArgument), at most the varbit's maximum (HeaderTooShort), in the packet."""
        vb = next(i for i, f in enumerate(hdef.fields) if f.varbit)
        var = hdef.fields[vb]
        o = self.out
        o.line(f"_l = {self.expr(length, sc)}")
        o.line(f"if _l & 7: raise _Reject({self.error_code('ParserInvalidArgument')})")
        o.line(f"if _l > {var.w}: raise _Reject({self.error_code('HeaderTooShort')})")
        o.line(f"_nb = ({hdef.bits} + _l) >> 3")
        o.line(f"if pos + _nb > n: raise _Reject({self.error_code('PacketTooShort')})")
        o.line("_r = data[pos:pos + _nb]; _v = _from_bytes(_r, 'big')")
        o.line("pos += _nb")
        self.header_object(s.header, sc, "_h")
        o.line("_h.raw__ = _r")
        shift = sum(f.w for f in hdef.fields[vb + 1 :])
        o.line(f"_h.{attr(var.name)} = (_l, (_v >> {shift}) & ((1 << _l) - 1))")
        for i, f in enumerate(hdef.fields):
            if i == vb:
                continue
            shift -= f.w if i > vb else 0
            at = str(shift) if i > vb else f"(_l + {sum(g.w for g in hdef.fields[i + 1 :] if not g.varbit)})"
            value = f"(_v >> {at}) & {mask(f.w)}"
            o.line(f"_h.{attr(f.name)} = {self.wrap(value, ir.TInt(f.w)) if f.signed else value}")
        o.line("_h.valid__ = True")
        o.line(f"if TR: _trace('parser: extracted %s', {self.expr_text(s.header)!r})")

    def expr_text(self, e: ir.Expr) -> str:
        """P4-ish text of an lvalue for logs."""
        if isinstance(e, ir.Var):
            return e.name
        if isinstance(e, ir.Member):
            return f"{self.expr_text(e.expr)}.{e.field}"
        if isinstance(e, ir.Index):
            return f"{self.expr_text(e.expr)}[{e.index}]"
        if isinstance(e, ir.DynIndex):
            return f"{self.expr_text(e.expr)}[{self.expr_text(e.index)}]"
        return e.tag

    def s_advance(self, s: ir.Advance, sc: Scope) -> None:
        bits = self.expr(s.bits, sc)
        o = self.out
        o.line(f"_b = {bits}")
        o.line(f"if _b & 7: raise _Reject({self.error_code('ParserInvalidArgument')})")
        o.line("pos += _b >> 3")
        o.line(f"if pos > n: raise _Reject({self.error_code('PacketTooShort')})")

    def s_verify(self, s: ir.Verify, sc: Scope) -> None:
        self.out.line(f"if not {self.expr(s.cond, sc)}: raise _Reject({self.error_code(s.error)})")

    def s_emit(self, s: ir.Emit, sc: Scope) -> None:
        h = self.expr(s.header, sc)
        # an unchanged extracted header is emitted as its raw bytes without calling pack()
        emit = "if _h.valid__: _r = _h.raw__; _out.append(_r if _r is not None else _h.pack())"
        if isinstance(s.header.type, ir.TStack):
            self.out.line(f"for _h in {h}:")
            self.out.line(f"    {emit}")
        else:
            self.out.line(f"_h = {h}")
            self.out.line(emit)

    def s_digest(self, s: ir.Digest, sc: Scope) -> None:
        values = ", ".join(self.expr(f, sc) for f in s.fields)
        self.out.line(f"X.digest({s.digest!r}, ({values}{',' if s.fields else ''}))")

    def s_call(self, s: ir.Call, sc: Scope) -> None:
        method = getattr(self, "call_" + s.fn, None)
        if method is None:
            raise self.error(s, f"extern function {s.fn} is not supported by p4switch")
        method(s, sc)

    def call_mark_to_drop(self, s: ir.Call, sc: Scope) -> None:
        sm = self.expr(s.args[0], sc)
        self.out.line(f"{sm}.egress_spec = {DROP_PORT}; {sm}.mcast_grp = 0")

    def call_clone(self, s: ir.Call, sc: Scope) -> None:
        session = self.expr(s.args[0], sc)
        self.out.line(f"X.clone({s.clone_type!r}, {session}, ())")

    def call_clone_preserving_field_list(self, s: ir.Call, sc: Scope) -> None:
        session = self.expr(s.args[0], sc)
        paths = tuple(tuple(attr(p) for p in path) for path in s.field_list or ())
        self.out.line(f"X.clone({s.clone_type!r}, {session}, {paths!r})")

    def call_resubmit(self, s: ir.Call, sc: Scope) -> None:  # deprecated resubmit(data): not in the IR
        raise self.error(s, "resubmit is not supported by p4switch")

    def call_recirculate(self, s: ir.Call, sc: Scope) -> None:  # deprecated recirculate(data): neither
        raise self.error(s, "recirculate is not supported by p4switch")

    def call_resubmit_preserving_field_list(self, s: ir.Call, sc: Scope) -> None:
        paths = tuple(tuple(attr(p) for p in path) for path in s.field_list or ())
        self.out.line(f"X.resubmit({paths!r})")

    def call_recirculate_preserving_field_list(self, s: ir.Call, sc: Scope) -> None:
        paths = tuple(tuple(attr(p) for p in path) for path in s.field_list or ())
        self.out.line(f"X.recirculate({paths!r})")

    def packed(self, data: tuple[ir.Expr, ...], sc: Scope) -> str:
        """Python expression for the bytes of a field list, packed bit by bit as BMv2 does."""
        widths = [self.width(d.type) for d in data]
        total = sum(widths)
        pad = -total % 8
        parts = []
        shift = total + pad
        for d, w in zip(data, widths, strict=True):
            shift -= w
            v = self.expr(d, sc)
            if not isinstance(d.type, ir.TBit):
                v = f"(int({v}) & {mask(w)})"
            parts.append(f"({v} << {shift})" if shift else v)
        return f"({' | '.join(parts) or '0'}).to_bytes({(total + pad) // 8}, 'big')"

    def algorithm(self, s: ir.Call) -> str:
        name = s.algorithm
        if name not in HASH_ALGORITHMS:
            raise self.error(s, f"hash algorithm {name} is not supported by p4switch")
        return f"_HASH[{name!r}]"

    def call_hash(self, s: ir.Call, sc: Scope) -> None:
        result, base, max_ = s.args
        h = f"{self.algorithm(s)}({self.packed(s.data or (), sc)})"
        value = f"_hash_offset({h}, {self.expr(base, sc)}, {self.expr(max_, sc)})"
        self.store(result, self.wrap(value, result.type), sc)

    def call_random(self, s: ir.Call, sc: Scope) -> None:
        result, lo, hi = s.args
        self.store(result, f"X.random({self.expr(lo, sc)}, {self.expr(hi, sc)})", sc)

    def checksum(self, s: ir.Call, sc: Scope, with_payload: bool) -> tuple[str, str]:
        cond, target = s.args
        data = self.packed(s.data, sc) if s.data else "b''"
        if with_payload:
            data = f"{data} + X.payload"
        return self.expr(cond, sc), f"{self.algorithm(s)}({data})"

    def call_verify_checksum(self, s: ir.Call, sc: Scope, with_payload: bool = False) -> None:
        cond, value = self.checksum(s, sc, with_payload)
        target = self.expr(s.args[1], sc)
        self.out.line(f"if {cond} and {value} != {target}: X.sm.checksum_error = 1")

    def call_update_checksum(self, s: ir.Call, sc: Scope, with_payload: bool = False) -> None:
        cond, value = self.checksum(s, sc, with_payload)
        self.out.line(f"if {cond}:")
        self.out.indent()
        self.store(s.args[1], self.wrap(value, s.args[1].type), sc)
        self.out.dedent()

    def call_verify_checksum_with_payload(self, s: ir.Call, sc: Scope) -> None:
        self.call_verify_checksum(s, sc, with_payload=True)

    def call_update_checksum_with_payload(self, s: ir.Call, sc: Scope) -> None:
        self.call_update_checksum(s, sc, with_payload=True)

    def call_log_msg(self, s: ir.Call, sc: Scope) -> None:
        args = ", ".join(self.expr(a, sc) for a in s.args)
        self.out.line(f"X.log_msg({s.format or ''!r}, ({args}{',' if s.args else ''}))")

    def call_assert(self, s: ir.Call, sc: Scope) -> None:
        self.out.line(f"if not {self.expr(s.args[0], sc)}: X.assertion_failed({s.src or '?'!r})")

    call_assume = call_assert

    def s_method(self, s: ir.MethodCall, sc: Scope) -> None:
        name = s.instance
        inst = self.externs.get(name)
        if inst is None:
            raise self.error(s, f"unknown extern instance {name}")
        obj = f"EXT{self.extern_ids[name]}"
        kind, method, args = inst.tag, s.method, s.args
        o = self.out
        if kind == "counter" and method == "count":  # Counter.count inlined: out-of-range is ignored
            o.line(f"_i = {self.expr(args[0], sc)}; _cells = {obj}.cells")
            o.line("if 0 <= _i < len(_cells): _cell = _cells[_i]; _cell[0] += X.length; _cell[1] += 1")
        elif kind == "direct_counter" and method == "count":
            o.line("pass  # direct counters count on every hit of their table")
        elif kind == "meter" and method == "execute_meter":
            self.store(args[1], f"{obj}.execute({self.expr(args[0], sc)}, X.length)", sc)
        elif kind == "direct_meter" and method == "read":
            self.store(args[0], "X.meter_color", sc)
        elif kind == "register" and method == "read":
            self.store(args[0], f"{obj}.read({self.expr(args[1], sc)})", sc)
        elif kind == "register" and method == "write":
            o.line(f"{obj}.write({self.expr(args[0], sc)}, {self.expr(args[1], sc)})")
        else:
            raise self.error(s, f"{kind}.{method} is not supported by p4switch")

    # -------------------------------------------------------------------------------- blocks
    def block_scope(self, blk: ir.Parser | ir.Control, locals_obj: bool, parser: bool = False) -> Scope:
        names: dict[str, str] = {}
        args = []
        for p in blk.params:
            py = f"p_{p.name}"
            names[p.name] = py
            if not isinstance(p.type, ir.TPacketIn | ir.TPacketOut):
                args.append(py)
            else:
                args.append("_pk")
        for v in blk.locals:
            names[v.name] = f"L.{attr(v.name)}" if locals_obj else f"l_{v.name}"
        names["$args"] = ", ".join(args)
        return Scope(names, blk.name, in_parser=parser)

    def gen_locals_class(self, blk: ir.Control) -> str:
        cls = f"Loc_{ident(blk.name)}"
        self.gen_record(cls, [(attr(v.name), v.type) for v in blk.locals], False)
        return cls

    def gen_parser(self, p: ir.Parser) -> None:
        """One function per parser: a dispatch loop over the states reached from several places (or in
        a loop); a state with a single predecessor is generated inline at its transition, so a typical
        header chain runs as straight-line code."""
        sc = self.block_scope(p, locals_obj=False, parser=True)
        o = self.out
        by_name = {s.name: s for s in p.states}
        if "start" not in by_name:
            raise self.error(p, "parser has no start state")
        refs: dict[str, int] = {}
        for state in p.states:
            for target in self.successors(state):
                refs[target] = refs.get(target, 0) + 1
        inline = {
            n
            for n, count in refs.items()
            if count == 1 and n != "start" and n in by_name and not self.on_cycle(n, by_name)
        }
        dispatched = [by_name["start"]] + [s for s in p.states if s.name not in inline | {"start"}]
        self.parser_states = (by_name, {s.name: i for i, s in enumerate(dispatched)}, inline)
        o.line(f"def PARSER_{ident(p.name)}({sc.names['$args']}):")
        o.indent()
        for v in p.locals:
            o.line(f"l_{v.name} = {self.init_value(v.type)}")
        o.line("data = _pk.data; n = len(data); pos = 0; st = 0")
        o.line("try:")
        o.indent()
        o.line("while True:")
        o.indent()
        for i, state in enumerate(dispatched):
            o.line(f"{'if' if i == 0 else 'elif'} st == {i}:")
            o.indent()
            self.parser_state(state, sc)
            o.dedent()
        o.dedent()
        o.dedent()
        o.line("except _Reject as _e:")
        o.line("    _pk.pos = pos; return _e.code")
        o.line("_pk.pos = pos; return st")
        o.dedent()

    @staticmethod
    def successors(state: ir.ParserState) -> list[str]:
        tr = state.transition
        if isinstance(tr, ir.Goto):
            targets = [tr.next]
        else:
            assert isinstance(tr, ir.Select)
            targets = [c.next for c in tr.cases]
        return [t for t in targets if t not in ("accept", "reject")]

    def on_cycle(self, name: str, by_name: dict[str, ir.ParserState]) -> bool:
        seen: set[str] = set()
        todo = [t for t in self.successors(by_name[name]) if t in by_name]
        while todo:
            current = todo.pop()
            if current == name:
                return True
            if current not in seen:
                seen.add(current)
                todo += [t for t in self.successors(by_name[current]) if t in by_name]
        return False

    def parser_state(self, state: ir.ParserState, sc: Scope) -> None:
        self.out.line(f"if TR: _trace('parser: state %s', {state.name!r})")
        for s in state.body:
            self.stmt(s, sc)
        self.transition(state.transition, sc)

    def goto(self, target: str, sc: Scope) -> None:
        by_name, index, inline = self.parser_states
        if target == "accept":
            self.out.line("st = 0; break")
        elif target == "reject":
            self.out.line("st = -1; break")
        elif target in inline:
            self.parser_state(by_name[target], sc)
        elif target in index:
            self.out.line(f"st = {index[target]}; continue")
        else:
            raise ProgramError(f"unknown parser state {target}")

    def transition(self, tr: ir.Transition, sc: Scope) -> None:
        o = self.out
        if isinstance(tr, ir.Goto):
            self.goto(tr.next, sc)
            return
        assert isinstance(tr, ir.Select)
        keys = []
        for k in tr.keys:
            var = self.fresh("k")
            o.line(f"{var} = {self.expr(k, sc)}")
            keys.append(var)
        first = True
        for case in self.merged_cases(tr.cases):
            conds = [f"{keys[0]} in {{{', '.join(case.values)}}}"] if case.values is not None else []
            at = 0  # the key the next keyset matches
            for ks in case.keysets:
                var = keys[at]
                at += 1
                if isinstance(ks, ir.KeysetExact):
                    conds.append(f"{var} == {self.keyset_value(ks.value)}")
                elif isinstance(ks, ir.KeysetMask):
                    conds.append(f"{var} & {ks.mask} == {ks.value}")
                elif isinstance(ks, ir.KeysetRange):
                    conds.append(f"{ks.low} <= {var} <= {ks.high}")
                elif isinstance(ks, ir.KeysetValueSet):
                    at += self.value_set_widths(ks, tr) - 1
                    conds.append(
                        f"{self.value_set_member(ks, keys, at)} in EXT{self.extern_ids[ks.name]}.members"
                    )
            if not conds:  # default case: the rest of the cases can never match
                o.line("else:" if not first else "if True:")
                o.indent()
                self.goto(case.next, sc)
                o.dedent()
                return
            o.line(f"{'if' if first else 'elif'} {' and '.join(conds)}:")
            first = False
            o.indent()
            self.goto(case.next, sc)
            o.dedent()
        if not first:
            o.line("else:")
            o.indent()
        o.line(f"raise _Reject({self.error_code('NoMatch')})")
        if not first:
            o.dedent()

    def value_set_member(self, ks: ir.KeysetValueSet, keys: list[str], end: int) -> str:
        """The tuple of the keys a value set keyset matches, ending before keys[end]."""
        vs = self.externs[ks.name]
        assert isinstance(vs, ir.ValueSet)
        return f"({', '.join(keys[end - len(vs.widths) : end])},)"

    def merged_cases(self, cases: tuple[ir.SelectCase, ...]) -> list[_Case]:
        """Consecutive one-key exact cases going to the same state become one case testing set
        membership (``values``, no keysets): a select over many values (opcodes) costs one hash
        probe instead of a chain of compares; the first match still wins."""
        runs: list[list[ir.SelectCase]] = []  # runs of mergeable cases with the same target; others alone
        for case in cases:
            last = runs[-1] if runs else None
            if _one_exact(case) and last and _one_exact(last[0]) and last[0].next == case.next:
                last.append(case)
            else:
                runs.append([case])
        merged = []
        for run in runs:
            if len(run) == 1:
                merged.append(_Case(run[0].next, run[0].keysets))
            else:
                values = [self.keyset_value(_exact_value(c)) for c in run]
                merged.append(_Case(run[0].next, values=values))
        return merged

    def keyset_value(self, v: int | bool | str) -> str:
        if isinstance(v, bool):
            return "True" if v else "False"
        if isinstance(v, str):
            return str(self.error_code(v))
        return str(v)

    def gen_control(self, c: ir.Control) -> None:
        has_locals = bool(c.locals)
        loc_cls = self.gen_locals_class(c) if has_locals else None
        sc = self.block_scope(c, locals_obj=True)
        tables = [t for t in self.tables.values() if t.control == c.name]
        for t in tables:
            self.gen_table(t, c, sc)
        o = self.out
        o.line(f"def CONTROL_{ident(c.name)}({sc.names['$args']}):")
        o.indent()
        o.line(f"L = {loc_cls}()" if loc_cls else "L = None")
        if c.params and isinstance(c.params[0].type, ir.TPacketOut):
            o.line("_out = _pk.out")
        if not tables:  # only actions raise _Exit, and they run from tables
            self.block(c.body, sc)
            o.dedent()
            return
        o.line("try:")
        o.indent()
        self.block(c.body, sc)
        o.dedent()
        o.line("except _Exit:")
        o.line("    pass")
        o.dedent()

    def gen_action(self, a: ir.Action, c: ir.Control, sc: Scope) -> str:
        key = (c.name, a.name)
        if key in self.action_fns:
            return self.action_fns[key]
        fn = f"ACT{len(self.action_fns)}_{ident(a.name)}"
        self.action_fns[key] = fn
        names = dict(sc.names)
        data = [f"a_{p.var}" for p in a.params]  # the body's names; P4Info's may differ
        for p, py in zip(a.params, data, strict=True):
            names[p.var] = py
        for v in a.locals:
            names[v.name] = f"v_{v.name}"
        asc = Scope(names, a.name, in_action=True)
        o = self.out
        # action data come as one tuple (the slot's args): a plain call, cheaper than f(..., *args)
        o.line(f"def {fn}({sc.names['$args']}, L, A):")
        o.indent()
        if a.params:
            o.line("".join(f"{py}, " for py in data) + "= A")
            shown = ", ".join(f"{p.name}:%#x" for p in a.params)
            values = ", ".join(data)
            o.line(f"if TR: _trace('action %s({shown})', {a.name!r}, {values})")
        else:
            o.line(f"if TR: _trace('action %s', {a.name!r})")
        for v in a.locals:
            o.line(f"v_{v.name} = {self.init_value(v.type)}")
        self.block(a.body, asc)
        o.dedent()
        return fn

    def gen_table(self, t: ir.Table, c: ir.Control, sc: Scope) -> None:
        for ref in t.actions:
            if ref.name not in self.actions:
                raise self.error(t, f"table {t.name}: unknown action {ref.name}")
            self.gen_action(self.actions[ref.name], c, sc)
        tid = self.table_ids[t.name]
        o = self.out
        o.line(f"def APPLY{tid}({sc.names['$args']}, L):")
        o.indent()
        self.table_body(t, sc)
        o.line("return _s")
        o.dedent()

    def table_body(self, t: ir.Table, sc: Scope) -> None:
        """Look the table up and run the entry's (or the default) action, leaving the slot that ran in
        ``_s`` (None on a miss): the body of APPLY<n>, and inlined where a statement applies the table
        (no call per table)."""
        tbl = f"TBL{self.table_ids[t.name]}"
        args = f"{sc.names['$args']}, L"
        keys = [k for k in t.keys if k.match != "selector"]
        selector = [k for k in t.keys if k.match == "selector"]
        o = self.out
        key = ", ".join(self.key_value(k, sc) for k in keys)
        o.line(f"_s = {tbl}_lookup(({key}{',' if keys else ''}))")
        o.line("if _s is None:")
        o.line(f"    if TR: _trace_table({tbl}, None)")
        if t.direct_meter:
            o.line("    X.meter_color = 0")
        o.line(f"    _d = {tbl}.default; _d.fn({args}, _d.args)")
        o.line("else:")
        o.indent()
        if t.direct_counter:
            o.line("_c = _s.counter; _c[0] += X.length; _c[1] += 1")
        if t.direct_meter:
            meter = self.externs[t.direct_meter]
            amount = "X.length" if isinstance(meter, ir.DirectMeter) and meter.unit == "bytes" else "1"
            o.line(f"X.meter_color = _s.meter.execute({amount})")
        o.line(f"if TR: _trace_table({tbl}, _s)")
        if t.implementation:
            data = self.packed(tuple(k.expr for k in selector), sc) if selector else "b''"
            o.line(f"_s = {tbl}.profile.resolve(_s)")
            o.line("if _s.__class__ is list:")
            o.line(f"    _s = {tbl}.profile.pick(_s, {data})")
            o.line("if _s is None:")
            o.line(f"    _d = {tbl}.default; _d.fn({args}, _d.args)")
            o.line("else:")
            o.line(f"    _s.fn({args}, _s.args)")
        else:
            o.line(f"_s.fn({args}, _s.args)")
        o.dedent()

    def key_value(self, k: ir.TableKey, sc: Scope) -> str:
        v = self.expr(k.expr, sc)
        kt = k.expr.type
        if isinstance(kt, ir.TBool):
            return f"int({v})"
        if isinstance(kt, ir.TInt):
            return f"({v} & {mask(kt.w)})"
        return v

    # ---------------------------------------------------------------------------------- module
    def generate(self) -> str:
        o = self.out
        o.line("# generated by p4switch.engine.codegen from " + (self.program.source or "?"))
        self.gen_types()
        for p in self.program.parsers:
            self.gen_parser(p)
        for c in self.program.controls:
            self.gen_control(c)
        return "\n".join(o.lines) + "\n"


def _one_exact(case: ir.SelectCase) -> bool:
    """A case of one exact keyset: it can join a run tested by set membership."""
    return len(case.keysets) == 1 and isinstance(case.keysets[0], ir.KeysetExact)


def _exact_value(case: ir.SelectCase) -> int:
    ks = case.keysets[0]
    assert isinstance(ks, ir.KeysetExact)
    return ks.value
