"""IR (p4switch.ir) -> C source for the native engine: one C file per program, compiled by
p4switch.native.build and run by p4switch.engine.native. It mirrors p4switch.engine.codegen (the Python
back end) method for method, so a feature is added to both in the same places: ``gen_types`` and
``gen_record`` for header and struct types, ``expr`` with one ``e_<op>`` per expression kind, ``stmt``
with one ``s_<kind>`` per statement and one ``call_<fn>`` per extern function, ``gen_parser`` and
``transition``, ``gen_control``, ``gen_action``, ``gen_table``/``table_body``/``key_value``, and the
pipeline drivers of switch.py.

Conventions of the generated code (see p4switch/native/c/np_runtime.h for the values and the runtime):
- header types are ``H_<name>`` structs (``valid_`` and one ``f_<field>`` per field), structs ``S_<name>``,
  stacks ``STK_<element>_<size>`` (their ``e[]`` of headers or header unions); assignment of a header,
  struct or stack is C's struct assignment, which copies every field and the validity as the Python
  engine's ``set_`` does; a stack element at a run-time index is the element or, out of range, a blank of
  that site zeroed at each use (reads see an invalid zero header, writes are lost); a varbit is a
  ``VB_<max>`` struct of its length in bits and its bytes (those past the length zero, so equal varbits
  are equal structs, ``VB_<max>_eq``), extracted at a length checked before any byte is read and packed
  at its current length;
- every block is a function taking the per-packet context ``X`` and pointers to its parameters (a
  packet_in/packet_out parameter is X itself); control locals live in a ``Loc_<control>`` the control's
  actions reach as ``L``; an action is ``ACT<n>(X, <params>, L, A)`` with its action data as 64-bit
  words ``A``; a table is ``APPLY<n>(X, <params>, L)`` returning the action that ran on a hit, -1 on a
  miss; ``exit`` in an action sets ``X->exit`` and every table apply returns from its control when set;
- the parser is one function with a label per state; every read of packet bytes (extract, lookahead,
  advance) checks the length first and leaves through error.PacketTooShort; a select case on a parser
  value set asks ``np_value_set_has`` whether its keys are a member (the members live in the switch's C
  state, set through the engine API);
- anything the C back end does not do raises NativeUnsupported, and the switch runs the Python engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from p4switch import ir
from p4switch.engine.api import DROP_PORT, MAX_PASSES, ProgramError
from p4switch.engine.codegen import Emitter, Generator, mask

HASH_CODES = {"crc16": 0, "crc32": 1, "csum16": 2, "identity": 3, "xor16": 4}
"""np_runtime.h's codes of the algorithms the Python engine implements (externs.HASH_ALGORITHMS)."""
KEY_KINDS = {"exact": 0, "ternary": 1, "lpm": 2, "range": 3, "optional": 4}
MAX_WIDTH = 128
PIPELINE_FIELDS = ("ingress_port", "egress_spec", "egress_port", "instance_type", "packet_length",
                   "ingress_global_timestamp", "egress_global_timestamp", "mcast_grp", "egress_rid",
                   "parser_error", "checksum_error")
"""standard_metadata_t fields the traffic manager (np_pipeline.h) reads and writes."""


class NativeUnsupported(Exception):  # noqa: N818 - a reason to run the Python engine, not a failure
    """The program uses something the C back end does not implement (yet)."""


def cid(name: str) -> str:
    """A C identifier part for a P4 name: an identifier stays as it is (generated names add a prefix);
    a name with other characters (the front end's qualified locals) becomes ``Z`` and the name with
    '_' doubled and every other character as ``_x<hex>``."""
    if name.replace("_", "a").isalnum() and name.isascii():
        return name
    return "Z" + "".join(c if c.isalnum() and c.isascii() else "__" if c == "_" else f"_x{ord(c):02x}"
                         for c in name)


def words(width: int) -> int:
    """64-bit words of a table key field or an action parameter."""
    return 1 if width <= 64 else 2


@dataclass
class CScope:
    """How P4 variable names of one block (and its action) map to C lvalues."""

    names: dict[str, str]
    block: str
    params: str  # the C parameter list after X
    args: str  # the C arguments after X
    loc: str  # the control's locals type
    in_action: bool = False
    in_parser: bool = False


@dataclass
class LogSite:
    """A log_msg call: its format and argument types, for Python to format what C sends."""

    format: str
    types: tuple[ir.Type, ...]


@dataclass
class Sites:
    """What Python needs to read the events of generated code."""

    logs: list[LogSite] = field(default_factory=list)
    asserts: list[str] = field(default_factory=list)
    digests: list[str] = field(default_factory=list)


class CCodegen(Generator):
    """Generates the C source of one IR program.

    One class of about 1,100 lines for the reason Codegen is one: it mirrors Codegen method for method
    (the module docstring says why), and its sections (type classes, expressions, statements, blocks)
    recurse into one another over one generation state (the emitter, the scopes, the log sites, the
    field lists, the extern and digest indexes), so a split by section only pays once that state is an
    object of its own, in both back ends at once."""

    def __init__(self, program: ir.Program) -> None:
        super().__init__(program)
        self.action_ids = {name: i for i, name in enumerate(self.actions)}
        self.counters = self.extern_index(ir.Counter)
        self.meters = self.extern_index(ir.Meter)
        self.registers = self.extern_index(ir.Register)
        self.value_sets = self.extern_index(ir.ValueSet)
        self.profiles = self.extern_index(ir.ActionProfile, ir.ActionSelector)
        self.field_lists: dict[tuple[tuple[str, ...], ...], int] = {(): 0}
        self.sites = Sites()
        self.digest_ids = {d.name: i for i, d in enumerate(program.digests)}
        self.deparse_bound = 0
        self.stack_types: dict[tuple[str, int], str] = {}

    def extern_index(self, *kinds: type) -> dict[str, int]:
        found = [e.name for e in self.program.externs if isinstance(e, kinds)]
        return {name: i for i, name in enumerate(found)}

    # --------------------------------------------------------------------------------- helpers
    def unsupported(self, node: object, what: str) -> NativeUnsupported:
        return NativeUnsupported(f"{getattr(node, 'src', '') or self.src}: {what}")

    def width(self, t: ir.Type) -> int:
        """The Python back end's width, refused above what the C runtime's values hold."""
        w = super().width(t)
        if w > MAX_WIDTH:
            raise NativeUnsupported(f"values wider than {MAX_WIDTH} bits ({t.k}<{w}>)")
        return w

    def ctype(self, t: ir.Type) -> str:
        """The C type that holds values of P4 type ``t``."""
        if isinstance(t, ir.TBool):
            return "uint8_t"
        if isinstance(t, ir.TBit | ir.TInt):
            w = self.width(t)
            return ("u" if isinstance(t, ir.TBit) else "s") + ("64" if w <= 64 else "128")
        if isinstance(t, ir.TError | ir.TEnum):
            return "u64"
        if isinstance(t, ir.THeader):
            return f"H_{cid(t.name)}"
        if isinstance(t, ir.TStruct):
            return f"S_{cid(t.name)}"
        if isinstance(t, ir.TStack):
            return self.stack_type(t)
        if isinstance(t, ir.TVarbit):
            return f"VB_{t.max}"
        raise NativeUnsupported(f"values of type {t.k}")

    def utype(self, t: ir.Type) -> str:
        """The unsigned C type of the same size (arithmetic is done there, where it wraps)."""
        return "u128" if isinstance(t, ir.TBit | ir.TInt) and self.width(t) > 64 else "u64"

    def const(self, value: int, t: ir.Type) -> str:
        """A C constant of P4 type ``t``."""
        c = self.ctype(t)
        if isinstance(t, ir.TBool):
            return "1" if value else "0"
        if value < 0:
            return f"(({c})(0 - ({self.uconst(-value)})))"
        return f"(({c}){self.uconst(value)})"

    @staticmethod
    def uconst(value: int) -> str:
        if value < 1 << 64:
            return f"{value}ull"
        return f"(((u128){value >> 64}ull << 64) | {value & mask(64)}ull)"

    def wrap(self, expr: str, t: ir.Type) -> str:
        """Reduce an unsigned C expression (its type's container or wider) to the range of ``t``."""
        if isinstance(t, ir.TBit):
            w = self.width(t)
            limit = 64 if w <= 64 else 128
            body = f"(({self.ctype(t)})({expr}))"
            return body if w == limit else f"({body} & {self.uconst(mask(w))})"
        if isinstance(t, ir.TInt):
            w = self.width(t)
            return f"np_sext64((u64)({expr}), {w})" if w <= 64 else f"np_sext128((u128)({expr}), {w})"
        return expr

    # ---------------------------------------------------------------------------- type classes
    def stack_type(self, t: ir.TStack) -> str:
        name = f"STK_{cid(t.elem)}_{t.size}"
        self.stack_types[(t.elem, t.size)] = name
        return name

    def gen_types(self) -> None:
        o = self.out
        for max_bits in self.varbits_used():
            self.gen_varbit(max_bits)
        for name, h in self.headers.items():
            o.line(f"typedef struct H_{cid(name)} {{")
            o.indent()
            o.line("uint8_t valid_;")
            for f in h.fields:
                if f.varbit:
                    o.line(f"VB_{f.w} f_{cid(f.name)};")
                    continue
                if f.w > MAX_WIDTH:
                    raise NativeUnsupported(f"header {name}: field {f.name} is wider than {MAX_WIDTH} bits")
                o.line(f"{'s' if f.signed else 'u'}{64 if f.w <= 64 else 128} f_{cid(f.name)};")
            o.dedent()
            o.line(f"}} H_{cid(name)};")
            self.gen_pack(name, h)
        stacks = self.stacks_used()
        for elem, size in stacks:
            if elem in self.headers:
                self.gen_stack(elem, size)
        for name in self.struct_order():
            members = [(f"f_{cid(f.name)}", f.type) for f in self.structs[name].fields]
            self.gen_record(f"S_{cid(name)}", members)
            for elem, size in stacks:
                if elem == name:  # a stack of header unions, once its element type exists
                    self.gen_stack(elem, size)

    def gen_stack(self, elem: str, size: int) -> None:
        """A stack's C type: its elements are headers, or header unions (structs of headers)."""
        ctype = f"H_{cid(elem)}" if elem in self.headers else f"S_{cid(elem)}"
        self.out.line(f"typedef struct {{ {ctype} e[{size}]; }} {self.stack_type(ir.TStack(elem, size))};")

    def declared_types(self) -> list[ir.Type]:
        """The types of every struct member and local."""
        types = [f.type for s in self.structs.values() for f in s.fields]
        blocks: list[ir.Parser | ir.Control] = [*self.program.parsers, *self.program.controls]
        types += [v.type for b in blocks for v in b.locals]
        types += [v.type for a in self.program.actions for v in a.locals]
        return types

    def stacks_used(self) -> list[tuple[str, int]]:
        """Every header stack type of the structs and locals, so their C types exist before use."""
        found: dict[tuple[str, int], None] = {}
        for t in self.declared_types():
            if isinstance(t, ir.TStack):
                found[(t.elem, t.size)] = None
        return list(found)

    def varbits_used(self) -> list[int]:
        """The maximum lengths of every varbit of the headers, structs and locals (a C type each)."""
        found = {f.w for h in self.headers.values() for f in h.fields if f.varbit}
        found |= {t.max for t in self.declared_types() if isinstance(t, ir.TVarbit)}
        return sorted(found)

    def gen_varbit(self, max_bits: int) -> None:
        """A varbit's C type ``VB_<max>``: its length in bits and its bytes, those past the length zero, and
        its equality ``VB_<max>_eq`` (equal lengths and bits, as the Python engine's (length, value))."""
        name = f"VB_{max_bits}"
        o = self.out
        o.line(f"typedef struct {name} {{ u64 len; uint8_t b[{max(1, (max_bits + 7) // 8)}]; }} {name};")
        o.line(f"static inline int {name}_eq({name} a, {name} b) {{")
        o.line("    return a.len == b.len && !memcmp(a.b, b.b, sizeof a.b);")
        o.line("}")

    def struct_order(self) -> list[str]:
        """Structs with the structs they contain first (C needs complete member types)."""
        order: list[str] = []

        def visit(name: str, path: tuple[str, ...]) -> None:
            if name in order:
                return
            if name in path:
                raise ProgramError(f"struct {name} contains itself")
            for f in self.structs[name].fields:
                inner = f.type.elem if isinstance(f.type, ir.TStack) else getattr(f.type, "name", None)
                if isinstance(f.type, ir.TStruct | ir.TStack) and inner in self.structs:
                    visit(inner, (*path, name))  # a struct, or the union elements of a stack
            order.append(name)

        for name in self.structs:
            visit(name, ())
        return order

    def gen_record(self, cls: str, members: list[tuple[str, ir.Type]]) -> None:
        """A struct (or a block's locals): one C member per member; C struct assignment copies deeply."""
        o = self.out
        o.line(f"typedef struct {cls} {{")
        o.indent()
        for m, t in members:
            o.line(f"{self.ctype(t)} {m};")
        if not members:
            o.line("uint8_t unused_;")
        o.dedent()
        o.line(f"}} {cls};")

    @staticmethod
    def chunks(h: ir.HeaderType) -> list[tuple[int, int, list[tuple[ir.HeaderField, int]]]]:
        """The header's fields grouped into runs that start and end on byte boundaries: (first byte,
        bytes, [(field, shift inside the run)]). A run is read or written as one big-endian number."""
        out: list[tuple[int, int, list[tuple[ir.HeaderField, int]]]] = []
        run: list[ir.HeaderField] = []
        start = bits = 0
        for f in h.fields:
            run.append(f)
            bits += f.w
            if bits % 8 == 0:
                shifts, left = [], bits
                for g in run:
                    left -= g.w
                    shifts.append((g, left))
                out.append((start // 8, bits // 8, shifts))
                start += bits
                run, bits = [], 0
        return out

    def gen_pack(self, name: str, h: ir.HeaderType) -> None:
        """PACK_<type>: append the header's bytes to the deparser's output (emit of a valid header)."""
        o = self.out
        if h.bits % 8:
            return  # refused where extracted or emitted, as in the Python engine
        if any(f.varbit for f in h.fields):
            self.gen_pack_varbit(name, h)
            return
        o.line(f"static void PACK_{cid(name)}(np_x *X, const H_{cid(name)} *h) {{")
        o.indent()
        o.line(f"uint8_t *p = np_emit_space(X, {h.bits // 8});")
        o.line("if (!p) return;")
        for first, nbytes, fields in self.chunks(h):
            if nbytes > 16:
                o.line(f"memset(p + {first}, 0, {nbytes}); {{ u64 _bit = {first * 8};")
                for f, _ in fields:
                    o.line(f"    np_put_bits(p, &_bit, (u128)h->f_{cid(f.name)}, {f.w});")
                o.line("}")
                continue
            big = nbytes > 8
            t = "u128" if big else "u64"
            parts = [f"((({t})h->f_{cid(f.name)} & {self.uconst(mask(f.w))}) << {shift})" if shift
                     else f"(({t})h->f_{cid(f.name)} & {self.uconst(mask(f.w))})" for f, shift in fields]
            o.line(f"np_put_be{128 if big else 64}(p + {first}, {nbytes}, {' | '.join(parts)});")
        o.dedent()
        o.line("}")

    def gen_pack_varbit(self, name: str, h: ir.HeaderType) -> None:
        """PACK_<type> of a header with a varbit field: its fields at their current length, bit by bit."""
        vb = cid(next(f.name for f in h.fields if f.varbit))
        o = self.out
        o.line(f"static void PACK_{cid(name)}(np_x *X, const H_{cid(name)} *h) {{")
        o.indent()
        o.line(f"u64 _n = ({h.bits} + h->f_{vb}.len) >> 3, _bit = 0;")
        o.line("uint8_t *p = np_emit_space(X, _n);")
        o.line("if (!p) return;")
        o.line("memset(p, 0, _n);")
        for f in h.fields:
            if f.varbit:
                o.line(f"for (u64 _j = 0; _j < h->f_{vb}.len >> 3; _j++) "
                       f"np_put_bits(p, &_bit, h->f_{vb}.b[_j], 8);")
            else:
                o.line(f"np_put_bits(p, &_bit, (u128)h->f_{cid(f.name)}, {f.w});")
        o.dedent()
        o.line("}")

    @staticmethod
    def max_bytes(h: ir.HeaderType) -> int:
        """The most bytes a header emits (a varbit at its maximum length)."""
        return (h.bits + sum(f.w for f in h.fields if f.varbit)) // 8

    # ---------------------------------------------------------------------------- expressions
    def expr(self, e: ir.Expr, sc: CScope) -> str:
        method = getattr(self, "e_" + e.tag, None)
        if method is None:  # pragma: no cover - every kind of ir.Expr has a method
            raise self.unsupported(e, f"expression {e.tag!r}")
        return str(method(e, e.type, sc))

    def e_const(self, e: ir.Const, t: ir.Type, sc: CScope) -> str:
        v = e.value
        if isinstance(t, ir.TError):
            return f"((u64){self.error_code(str(v))})"
        if isinstance(t, ir.TEnum):
            return f"((u64){self.enums[t.name].index(str(v))})"
        if isinstance(v, bool):
            return "1" if v else "0"
        return self.const(int(v), t)

    def e_var(self, e: ir.Var, t: ir.Type, sc: CScope) -> str:
        try:
            return sc.names[e.name]
        except KeyError:
            raise ProgramError(f"{self.src}: unknown variable {e.name!r} in {sc.block}") from None

    def e_member(self, e: ir.Member, t: ir.Type, sc: CScope) -> str:
        return f"({self.expr(e.expr, sc)}).f_{cid(e.field)}"

    def e_index(self, e: ir.Index, t: ir.Type, sc: CScope) -> str:
        stack = e.expr.type
        if not isinstance(stack, ir.TStack) or not 0 <= e.index < stack.size:
            raise self.unsupported(e, f"header stack index {e.index} out of range")
        return f"({self.expr(e.expr, sc)}).e[{e.index}]"

    def e_dyn_index(self, e: ir.DynIndex, t: ir.Type, sc: CScope) -> str:
        """The element at a run-time index, or (out of range) a zeroed blank of this site: reads see an
        invalid header with every field zero and writes are lost, as the Python engine's ``_at``."""
        stack = e.expr.type
        if not isinstance(stack, ir.TStack):
            raise ProgramError(f"{self.src}: index into a {stack.k}, not a header stack")
        index = f"_i >= 0 && _i < {stack.size}" if isinstance(e.index.type, ir.TInt) else f"_i < {stack.size}"
        return (f"(*({{ {self.ctype(e.index.type)} _i = {self.expr(e.index, sc)}; "
                f"static __thread {self.ctype(t)} _blank; "
                f"({index}) ? &({self.expr(e.expr, sc)}).e[_i] "
                f": (memset(&_blank, 0, sizeof _blank), &_blank); }}))")

    def e_slice(self, e: ir.Slice, t: ir.Type, sc: CScope) -> str:
        base = f"(({self.utype(e.expr.type)})({self.expr(e.expr, sc)}))"
        shifted = f"({base} >> {e.lo})" if e.lo else base
        return f"(({self.ctype(t)})({shifted} & {self.uconst(mask(e.hi - e.lo + 1))}))"

    def e_concat(self, e: ir.Concat, t: ir.Type, sc: CScope) -> str:
        left, right = e.left, e.right
        wl, wr = self.width(left.type), self.width(right.type)
        u = self.utype(t)
        lv = f"((({u})({self.expr(left, sc)})) & {self.uconst(mask(wl))})"
        rv = f"((({u})({self.expr(right, sc)})) & {self.uconst(mask(wr))})"
        result = f"(({lv} << {wr}) | {rv})"
        return self.wrap(result, t) if isinstance(t, ir.TInt) else f"(({self.ctype(t)}){result})"

    def e_cast(self, e: ir.Cast, t: ir.Type, sc: CScope) -> str:
        inner = e.expr
        src = inner.type
        v = self.expr(inner, sc)
        sk, tk = src.k, t.k
        if tk == "bool":
            return f"(({v}) != 0)" if sk != "bool" else v
        if sk == "bool":
            return f"(({self.ctype(t)})({v}))"
        if sk not in ("bit", "int") or tk not in ("bit", "int"):
            if sk == tk:
                return v
            raise self.unsupported(e, f"cast from {sk} to {tk}")
        sw, tw = self.width(src), self.width(t)
        if sk == tk and tw >= sw:
            return f"(({self.ctype(t)})({v}))"
        if tk == "bit":
            return self.wrap(v, t)
        return self.wrap(f"({self.utype(src)})({v})", t)

    def e_unary(self, e: ir.Unary, t: ir.Type, sc: CScope) -> str:
        v = self.expr(e.expr, sc)
        operator = e.operator
        if operator == "!":
            return f"(!({v}))"
        if operator == "~":
            if isinstance(t, ir.TBit):
                return f"(({self.ctype(t)})(({v}) ^ {self.uconst(mask(self.width(t)))}))"
            return f"(~({v}))"
        if operator == "-":
            return self.wrap(f"0 - ({self.utype(t)})({v})", t)
        raise self.unsupported(e, f"unary operator {operator}")

    def e_binary(self, e: ir.Binary, t: ir.Type, sc: CScope) -> str:
        operator = e.operator
        self.check_sequenced(e)
        a = self.expr(e.left, sc)
        b = self.expr(e.right, sc)
        if operator in ("==", "!=", "<", ">", "<=", ">="):
            if isinstance(e.left.type, ir.THeader | ir.TStruct | ir.TStack):
                raise self.unsupported(e, f"'{operator}' on headers or structs")
            if isinstance(e.left.type, ir.TVarbit):  # the front end allows only == and != on varbits
                same = f"VB_{e.left.type.max}_eq({a}, {b})"
                return f"({same})" if operator == "==" else f"(!{same})"
            return f"(({a}) {operator} ({b}))"
        if operator in ("&&", "||"):
            return f"(({a}) {operator} ({b}))"
        if operator in ("&", "|", "^"):
            return f"(({self.ctype(t)})(({a}) {operator} ({b})))"
        u = self.utype(t)
        if operator in ("+", "-", "*"):
            return self.wrap(f"(({u})({a})) {operator} (({u})({b}))", t)
        if operator in ("/", "%"):
            return self.divide(e, t, operator)
        if operator in ("|+|", "|-|"):
            w = self.width(t)
            sub = int(operator == "|-|")
            if isinstance(t, ir.TBit):
                return f"(({self.ctype(t)})np_sat_u((u128)({a}), (u128)({b}), {sub}, {w}))"
            return f"(({self.ctype(t)})np_sat_s((s128)({a}), (s128)({b}), {sub}, {w}))"
        if operator == ">>":
            c = self.ctype(t)
            return f"np_shr_{c}(({c})({a}), (u128)({b}))"
        if operator == "<<":
            w = self.width(t)
            right = e.right
            if isinstance(right, ir.Const):
                shift = int(right.value)
                return self.wrap(f"(({u})({a})) << {shift}", t) if shift < w else self.const(0, t)
            return f"((u128)({b}) < {w} ? {self.wrap(f'(({u})({a})) << (int)({b})', t)} : {self.const(0, t)})"
        raise self.unsupported(e, f"operator {operator}")

    def divide(self, e: ir.Binary, t: ir.Type, operator: str) -> str:
        """Division and modulo only of constants (folded here), as the Python engine."""
        left, right = e.left, e.right
        if not isinstance(left, ir.Const) or not isinstance(right, ir.Const):
            raise ProgramError(
                f"{self.src}: '{operator}' of a non-constant operand is not supported by p4switch")
        x, y = int(left.value), int(right.value)
        if y <= 0 or x < 0:
            raise ProgramError(
                f"{self.src}: '{operator}' needs a non-negative dividend and a positive divisor")
        value = x // y if operator == "/" else x % y
        return self.wrap(self.uconst(value), t)

    def check_sequenced(self, e: ir.Binary) -> None:
        """C leaves the order of a binary operator's operands open; P4 (and the Python engine) evaluate
        left to right. Only table applies have side effects inside expressions: two of them under one
        operator that does not sequence its operands are refused."""
        if e.operator in ("&&", "||"):
            return
        if self.applies(e.left) and self.applies(e.right):
            raise self.unsupported(e, f"table applies on both sides of '{e.operator}'")

    def applies(self, e: object) -> bool:
        if isinstance(e, ir.TableHit | ir.TableMiss):
            return True
        return any(self.applies(child) for child in ir.children(e))

    def e_mux(self, e: ir.Mux, t: ir.Type, sc: CScope) -> str:
        return f"(({self.expr(e.cond, sc)}) ? ({self.expr(e.then, sc)}) : ({self.expr(e.else_, sc)}))"

    def e_is_valid(self, e: ir.IsValid, t: ir.Type, sc: CScope) -> str:
        return f"(({self.expr(e.expr, sc)}).valid_)"

    def e_lookahead(self, e: ir.Lookahead, t: ir.Type, sc: CScope) -> str:
        if not sc.in_parser:
            raise ProgramError(f"{self.src}: lookahead outside a parser")
        w = self.width(t)
        nbytes = (w + 7) // 8
        read = f"np_get_be{64 if nbytes <= 8 else 128}(data + pos, {nbytes})"
        if nbytes > 16:
            raise self.unsupported(e, "lookahead of more than 128 bits")
        # error code 1 (PacketTooShort) as the Python engine's _lookahead
        value = f"({{ if (pos + {nbytes} > n) {{ err = 1; goto np_fail; }} ({read} >> {nbytes * 8 - w}); }})"
        if isinstance(t, ir.TBool):
            return f"({value} != 0)"
        return self.wrap(value, t)

    def e_table_hit(self, e: ir.TableHit, t: ir.Type, sc: CScope) -> str:
        return f"({self.table_call(e, sc)} >= 0)"

    def e_table_miss(self, e: ir.TableMiss, t: ir.Type, sc: CScope) -> str:
        return f"({self.table_call(e, sc)} < 0)"

    def table_call(self, node: ir.TableHit | ir.TableMiss | ir.Apply | ir.Switch, sc: CScope) -> str:
        """The table applied, as an expression giving the action that ran (-1: the default); an `exit`
        in that action returns from the control."""
        name = node.table
        if name not in self.table_ids:
            raise ProgramError(f"{self.src}: unknown table {name}")
        if sc.in_action:
            raise ProgramError(f"{self.src}: table apply inside an action is not supported by p4switch")
        return f"({{ int _r = APPLY{self.table_ids[name]}(X, {sc.args}, L); if (X->exit) return; _r; }})"

    # ----------------------------------------------------------------------------- statements
    def block(self, stmts: tuple[ir.Stmt, ...], sc: CScope) -> None:
        for s in stmts:
            self.stmt(s, sc)

    def stmt(self, s: ir.Stmt, sc: CScope) -> None:
        self.src = s.src or self.src
        method = getattr(self, "s_" + s.tag, None)
        if method is None:  # pragma: no cover - every kind of ir.Stmt has a method
            raise self.unsupported(s, f"statement {s.tag!r}")
        method(s, sc)

    def s_assign(self, s: ir.Assign, sc: CScope) -> None:
        self.store(s.lhs, self.expr(s.rhs, sc), sc)

    def store(self, lhs: ir.Expr, value: str, sc: CScope) -> None:
        """Assign a C value expression to a P4 lvalue (slices read-modify-write their base)."""
        if isinstance(lhs, ir.Slice):
            base = lhs.expr
            u = self.utype(base.type)
            target = f"(({u})({self.expr(base, sc)}))"
            m = mask(lhs.hi - lhs.lo + 1) << lhs.lo
            keep = ~m & mask(self.width(base.type))
            merged = f"({target} & {self.uconst(keep)}) | ((({u})({value}) << {lhs.lo}) & {self.uconst(m)})"
            self.store(base, self.wrap(merged, base.type), sc)
            return
        self.out.line(f"{self.expr(lhs, sc)} = {value};")

    def s_if(self, s: ir.If, sc: CScope) -> None:
        self.out.line(f"if ({self.expr(s.cond, sc)}) {{")
        self.out.indent()
        self.block(s.then, sc)
        self.out.dedent()
        if s.else_:
            self.out.line("} else {")
            self.out.indent()
            self.block(s.else_, sc)
            self.out.dedent()
        self.out.line("}")

    def s_apply(self, s: ir.Apply, sc: CScope) -> None:
        self.out.line(f"(void){self.table_call(s, sc)};")

    def s_switch(self, s: ir.Switch, sc: CScope) -> None:
        tid = self.table_ids.get(s.table)
        if tid is None:
            raise ProgramError(f"{self.src}: unknown table {s.table}")
        var = self.fresh("act")
        o = self.out
        o.line("{")
        o.indent()
        o.line(f"int {var} = {self.table_call(s, sc)};")
        o.line(f"if ({var} < 0) {var} = X->sw->tables[{tid}].def.action;")
        first = True
        default_case = None
        for case in s.cases:
            if case.actions is None:
                default_case = case
                continue
            ids = " || ".join(f"{var} == {self.action_ids[a]}" for a in case.actions if a in self.action_ids)
            o.line(f"{'if' if first else '} else if'} ({ids or '0'}) {{")
            first = False
            o.indent()
            self.block(case.body, sc)
            o.dedent()
        if default_case is not None:
            o.line("{" if first else "} else {")
            o.indent()
            self.block(default_case.body, sc)
            o.dedent()
        if not first or default_case is not None:
            o.line("}")
        o.dedent()
        o.line("}")

    def s_exit(self, s: ir.Exit, sc: CScope) -> None:
        # v1model: exit ends the pipeline block; from an action it unwinds through the table's apply
        self.out.line("X->exit = 1; return;")

    def s_return(self, s: ir.Return, sc: CScope) -> None:
        self.out.line("return;")

    def s_set_valid(self, s: ir.SetValid, sc: CScope) -> None:
        self.out.line(f"({self.expr(s.header, sc)}).valid_ = 1;")

    def s_set_invalid(self, s: ir.SetInvalid, sc: CScope) -> None:
        self.out.line(f"({self.expr(s.header, sc)}).valid_ = 0;")

    def s_extract(self, s: ir.Extract, sc: CScope) -> None:
        if not sc.in_parser:
            raise ProgramError(f"{self.src}: extract outside a parser")
        h = s.header
        if not isinstance(h.type, ir.THeader):
            raise ProgramError(f"{self.src}: extract of a {h.type.k}, not a header")
        hdef = self.headers[h.type.name]
        if hdef.bits % 8:
            raise ProgramError(
                f"{self.src}: headers whose width is not a multiple of 8 bits are not supported by p4switch")
        if s.length is not None:
            self.extract_varbit(s, s.length, hdef, sc)
            return
        nbytes = hdef.bits // 8
        o = self.out
        o.line(f"if (pos + {nbytes} > n) {{ err = {self.error_code('PacketTooShort')}; goto np_fail; }}")
        o.line("{")
        o.indent()
        o.line(f"const uint8_t *_r = data + pos; H_{cid(h.type.name)} *_h = &({self.expr(h, sc)});")
        o.line(f"pos += {nbytes};")
        for first, size, fields in self.chunks(hdef):
            if size > 16:
                for f, shift in fields:
                    bits = f"np_get_bits(_r + {first}, {size * 8 - shift - f.w}, {f.w})"
                    o.line(f"_h->f_{cid(f.name)} = {self.field_value(f, bits)};")
                continue
            t = "u128" if size > 8 else "u64"
            o.line(f"{{ {t} _v = np_get_be{t[1:]}(_r + {first}, {size});")
            for f, shift in fields:
                bits = f"(_v >> {shift})" if shift else "_v"
                value = self.field_value(f, f"({bits} & {self.uconst(mask(f.w))})")
                o.line(f"  _h->f_{cid(f.name)} = {value};")
            o.line("}")
        o.line("_h->valid_ = 1;")
        o.dedent()
        o.line("}")

    def extract_varbit(self, s: ir.Extract, length: ir.Expr, hdef: ir.HeaderType, sc: CScope) -> None:
        """extract(h, bits) of a header with a varbit field, checked in the Python engine's order: the length
        a multiple of 8 (else ParserInvalidArgument), at most the varbit's maximum (HeaderTooShort), the
        header's bytes in the packet (PacketTooShort); the fields after the varbit sit ``_l`` bits later."""
        vb = next(i for i, f in enumerate(hdef.fields) if f.varbit)
        h = s.header
        assert isinstance(h.type, ir.THeader)
        o = self.out
        o.line("{")
        o.indent()
        o.line(f"u128 _l = (u128)({self.expr(length, sc)});")
        o.line(f"if (_l & 7) {{ err = {self.error_code('ParserInvalidArgument')}; goto np_fail; }}")
        too_long = self.error_code("HeaderTooShort")
        o.line(f"if (_l > {hdef.fields[vb].w}) {{ err = {too_long}; goto np_fail; }}")
        o.line(f"u64 _nb = ({hdef.bits} + (u64)_l) >> 3;")
        o.line(f"if (_nb > n - pos) {{ err = {self.error_code('PacketTooShort')}; goto np_fail; }}")
        o.line(f"const uint8_t *_r = data + pos; H_{cid(h.type.name)} *_h = &({self.expr(h, sc)});")
        o.line("pos += _nb;")
        at = 0  # bits of the fixed fields before this one
        for i, f in enumerate(hdef.fields):
            var = f"_h->f_{cid(f.name)}"
            if i == vb:
                o.line(f"memset(&{var}, 0, sizeof {var}); {var}.len = (u64)_l;")
                o.line(f"for (u64 _j = 0; _j < {var}.len >> 3; _j++) "
                       f"{var}.b[_j] = (uint8_t)np_get_bits(_r, {at} + 8 * _j, 8);")
                continue
            where = str(at) if i < vb else f"(u64)_l + {at}"
            o.line(f"{var} = {self.field_value(f, f'np_get_bits(_r, {where}, {f.w})')};")
            at += f.w
        o.line("_h->valid_ = 1;")
        o.dedent()
        o.line("}")

    def field_value(self, f: ir.HeaderField, bits: str) -> str:
        if f.signed:
            return self.wrap(bits, ir.TInt(f.w))
        return f"(({'u64' if f.w <= 64 else 'u128'}){bits})"

    def s_advance(self, s: ir.Advance, sc: CScope) -> None:
        bits = self.expr(s.bits, sc)
        o = self.out
        o.line("{")
        o.line(f"    u128 _b = (u128)({bits});")
        o.line(f"    if (_b & 7) {{ err = {self.error_code('ParserInvalidArgument')}; goto np_fail; }}")
        # beyond the end: the payload is empty (pos past the end), as the Python engine leaves it
        o.line(f"    if ((_b >> 3) > n - pos) {{ pos = n + 1; err = {self.error_code('PacketTooShort')}; "
               "goto np_fail; }")
        o.line("    pos += (u64)(_b >> 3);")
        o.line("}")

    def s_verify(self, s: ir.Verify, sc: CScope) -> None:
        code = self.error_code(s.error)
        self.out.line(f"if (!({self.expr(s.cond, sc)})) {{ err = {code}; goto np_fail; }}")

    def s_emit(self, s: ir.Emit, sc: CScope) -> None:
        t = s.header.type
        h = self.expr(s.header, sc)
        if isinstance(t, ir.TStack):
            hdef = self.headers[t.elem]
            self.check_whole_bytes(hdef)
            self.deparse_bound += t.size * self.max_bytes(hdef)
            self.out.line(f"for (int _i = 0; _i < {t.size}; _i++) if (({h}).e[_i].valid_) "
                          f"PACK_{cid(t.elem)}(X, &({h}).e[_i]);")
            return
        if not isinstance(t, ir.THeader):
            raise self.unsupported(s, f"emit of a {t.k}")
        hdef = self.headers[t.name]
        self.check_whole_bytes(hdef)
        self.deparse_bound += self.max_bytes(hdef)
        self.out.line(f"if (({h}).valid_) PACK_{cid(t.name)}(X, &({h}));")

    def check_whole_bytes(self, hdef: ir.HeaderType) -> None:
        if hdef.bits % 8:
            raise ProgramError(
                f"{self.src}: headers whose width is not a multiple of 8 bits are not supported by p4switch")

    def values(self, exprs: tuple[ir.Expr, ...], sc: CScope) -> str:
        """A C block-local array ``_vals`` of the expressions' values (u128; Python knows their types)."""
        items = ", ".join(f"(u128)({self.expr(e, sc)})" for e in exprs) or "0"
        return f"u128 _vals[] = {{{items}}};"

    def s_digest(self, s: ir.Digest, sc: CScope) -> None:
        self.out.line(f"{{ {self.values(s.fields, sc)} np_digest(X, {self.digest_ids[s.digest]}, _vals, "
                      f"{len(s.fields)}); }}")

    def s_call(self, s: ir.Call, sc: CScope) -> None:
        method = getattr(self, "call_" + s.fn, None)
        if method is None:
            raise self.unsupported(s, f"extern function {s.fn}")
        method(s, sc)

    def call_mark_to_drop(self, s: ir.Call, sc: CScope) -> None:
        sm = self.expr(s.args[0], sc)
        self.out.line(f"({sm}).f_egress_spec = {DROP_PORT}; ({sm}).f_mcast_grp = 0;")

    def call_clone(self, s: ir.Call, sc: CScope) -> None:
        self.clone_request(s, sc, ())

    def call_clone_preserving_field_list(self, s: ir.Call, sc: CScope) -> None:
        self.clone_request(s, sc, tuple(tuple(path) for path in s.field_list or ()))

    def clone_request(self, s: ir.Call, sc: CScope, paths: tuple[tuple[str, ...], ...]) -> None:
        kind = {"I2E": 1, "E2E": 2}.get(s.clone_type or "")
        if kind is None:
            raise self.unsupported(s, f"clone type {s.clone_type}")
        fl = self.field_list_case(paths)
        session = self.expr(s.args[0], sc)
        self.out.line(f"X->clone_type = {kind}; X->clone_session = (u64)({session}); X->clone_fl = {fl};")

    def field_list_case(self, paths: tuple[tuple[str, ...], ...]) -> int:
        """The case of np_gen_preserve that copies these metadata fields (0: none)."""
        return self.field_lists.setdefault(paths, len(self.field_lists))

    def call_resubmit(self, s: ir.Call, sc: CScope) -> None:
        raise ProgramError(f"{self.src}: resubmit is not supported by p4switch")

    def call_recirculate(self, s: ir.Call, sc: CScope) -> None:
        raise ProgramError(f"{self.src}: recirculate is not supported by p4switch")

    def call_resubmit_preserving_field_list(self, s: ir.Call, sc: CScope) -> None:
        """resubmit (in ingress) or recirculate (in egress): one request per pass, the last call wins, as
        switch.ExternCtx keeps it; the pipeline (np_pipeline.h) runs the pass."""
        fl = self.field_list_case(tuple(tuple(path) for path in s.field_list or ()))
        self.out.line(f"X->again = 1; X->again_fl = {fl};")

    call_recirculate_preserving_field_list = call_resubmit_preserving_field_list

    def packed(self, data: tuple[ir.Expr, ...], sc: CScope, buf: str) -> int:
        """Emit a byte array ``buf`` holding the fields packed bit by bit as BMv2 does (zero-padded to a
        byte); returns its length."""
        widths = [self.width(d.type) for d in data]
        total = (sum(widths) + 7) // 8
        o = self.out
        o.line(f"uint8_t {buf}[{max(total, 1)}] = {{0}}; u64 {buf}_bit = 0; (void){buf}_bit;")
        for d, w in zip(data, widths, strict=True):
            o.line(f"np_put_bits({buf}, &{buf}_bit, (u128)({self.expr(d, sc)}), {w});")
        return total

    def algorithm(self, s: ir.Call) -> int:
        if s.algorithm not in HASH_CODES:
            raise ProgramError(f"{self.src}: hash algorithm {s.algorithm} is not supported by p4switch")
        return HASH_CODES[s.algorithm]

    def call_hash(self, s: ir.Call, sc: CScope) -> None:
        result, base, max_ = s.args
        o = self.out
        o.line("{")
        o.indent()
        n = self.packed(s.data or (), sc, "_pb")
        o.line(f"u128 _h = np_hash2({self.algorithm(s)}, _pb, {n}, NULL, 0);")
        o.line(f"u128 _max = (u128)({self.expr(max_, sc)});")
        value = f"(u128)({self.expr(base, sc)}) + (_max ? _h % _max : _h)"
        self.store(result, self.wrap(value, result.type), sc)
        o.dedent()
        o.line("}")

    def call_random(self, s: ir.Call, sc: CScope) -> None:
        result, lo, hi = s.args
        if not isinstance(result.type, ir.TBit):
            raise self.unsupported(s, "random() of a signed type")
        if self.width(result.type) >= 128:
            raise self.unsupported(s, "random() over 128 bits")
        value = f"(({self.ctype(result.type)})np_randint(&X->sw->rng, (u128)({self.expr(lo, sc)}), " \
                f"(u128)({self.expr(hi, sc)})))"
        self.store(result, value, sc)

    def checksum(self, s: ir.Call, sc: CScope, with_payload: bool) -> str:
        """Emit the packed data; returns the C expression of the checksum."""
        n = self.packed(s.data or (), sc, "_pb")
        payload = "X->payload, X->payload_len" if with_payload else "NULL, 0"
        return f"(u128)np_hash2({self.algorithm(s)}, _pb, {n}, {payload})"

    def call_verify_checksum(self, s: ir.Call, sc: CScope, with_payload: bool = False) -> None:
        cond, target = s.args
        o = self.out
        o.line(f"if ({self.expr(cond, sc)}) {{")
        o.indent()
        value = self.checksum(s, sc, with_payload)
        sm = self.ctype(ir.TStruct("standard_metadata_t"))
        o.line(f"if ({value} != (u128)({self.expr(target, sc)})) (({sm} *)X->sm)->f_checksum_error = 1;")
        o.dedent()
        o.line("}")

    def call_update_checksum(self, s: ir.Call, sc: CScope, with_payload: bool = False) -> None:
        cond, target = s.args
        o = self.out
        o.line(f"if ({self.expr(cond, sc)}) {{")
        o.indent()
        value = self.checksum(s, sc, with_payload)
        self.store(target, self.wrap(value, target.type), sc)
        o.dedent()
        o.line("}")

    def call_verify_checksum_with_payload(self, s: ir.Call, sc: CScope) -> None:
        self.call_verify_checksum(s, sc, with_payload=True)

    def call_update_checksum_with_payload(self, s: ir.Call, sc: CScope) -> None:
        self.call_update_checksum(s, sc, with_payload=True)

    def call_log_msg(self, s: ir.Call, sc: CScope) -> None:
        site = len(self.sites.logs)
        self.sites.logs.append(LogSite(s.format or "", tuple(a.type for a in s.args)))
        self.out.line(f"{{ {self.values(s.args, sc)} np_log_msg(X, {site}, _vals, {len(s.args)}); }}")

    def call_assert(self, s: ir.Call, sc: CScope) -> None:
        site = len(self.sites.asserts)
        self.sites.asserts.append(s.src or "?")
        self.out.line(f"if (!({self.expr(s.args[0], sc)})) np_assert_failed(X, {site});")

    call_assume = call_assert

    def s_method(self, s: ir.MethodCall, sc: CScope) -> None:
        name = s.instance
        inst = self.externs.get(name)
        if inst is None:
            raise ProgramError(f"{self.src}: unknown extern instance {name}")
        kind, method, args = inst.tag, s.method, s.args
        o = self.out
        if kind == "counter" and method == "count":
            index = self.expr(args[0], sc)
            o.line(f"np_counter_count(&X->sw->counters[{self.counters[name]}], (u128)({index}), X->length);")
        elif kind == "direct_counter" and method == "count":
            pass  # direct counters count on every hit of their table
        elif kind == "meter" and method == "execute_meter":
            color = f"np_meter_array_execute(X->sw, &X->sw->meters[{self.meters[name]}], " \
                    f"(u128)({self.expr(args[0], sc)}), X->length)"
            self.store(args[1], f"(({self.ctype(args[1].type)}){color})", sc)
        elif kind == "direct_meter" and method == "read":
            self.store(args[0], f"(({self.ctype(args[0].type)})X->meter_color)", sc)
        elif kind == "register" and method == "read":
            reg = f"&X->sw->registers[{self.registers[name]}]"
            cell = f"np_register_read({reg}, (u128)({self.expr(args[1], sc)}))"
            t = args[0].type
            signed = "(s128)" if isinstance(t, ir.TInt) else ""
            self.store(args[0], f"(({self.ctype(t)})({signed}{cell}))", sc)
        elif kind == "register" and method == "write":
            reg = f"&X->sw->registers[{self.registers[name]}]"
            index, value = self.expr(args[0], sc), self.expr(args[1], sc)
            o.line(f"np_register_write({reg}, (u128)({index}), (u128)({value}));")
        else:
            raise ProgramError(f"{self.src}: {kind}.{method} is not supported by p4switch")

    # -------------------------------------------------------------------------------- blocks
    def block_scope(self, blk: ir.Parser | ir.Control, parser: bool = False) -> CScope:
        names: dict[str, str] = {}
        params, args = [], []
        for p in blk.params:
            if isinstance(p.type, ir.TPacketIn | ir.TPacketOut):
                continue  # the packet is X
            names[p.name] = f"(*p_{cid(p.name)})"
            params.append(f"{self.ctype(p.type)} *p_{cid(p.name)}")
            args.append(f"p_{cid(p.name)}")
        for v in blk.locals:
            names[v.name] = f"l_{cid(v.name)}" if parser else f"L->f_{cid(v.name)}"
        return CScope(names, blk.name, ", ".join(params) or "void *unused_", ", ".join(args) or "NULL",
                      f"Loc_{cid(blk.name)}", in_parser=parser)

    def gen_parser(self, p: ir.Parser) -> None:
        """One function per parser, a label per state."""
        sc = self.block_scope(p, parser=True)
        o = self.out
        names = {s.name for s in p.states}
        if "start" not in names:
            raise ProgramError(f"{p.src or self.src}: parser has no start state")
        self.parser_states = names
        o.line(f"static int PARSER_{cid(p.name)}(np_x *X, {sc.params}) {{")
        o.indent()
        for v in p.locals:
            o.line(self.zeroed(v.type, f"l_{cid(v.name)}"))
        o.line("const uint8_t *data = X->data; u64 n = X->len, pos = 0; int err = 0; u64 steps = 0;")
        o.line("(void)data; (void)steps;")
        o.line("goto ST_start;")
        timeout = self.errors.index("ParserTimeout") if "ParserTimeout" in self.errors else 1
        for state in sorted(p.states, key=lambda s: s.name != "start"):
            o.dedent()
            o.line(f"ST_{cid(state.name)}:")
            o.indent()
            # a loop that consumes nothing would never end: BMv2's parser timeout
            o.line(f"if (++steps > NP_PARSER_STEPS) {{ err = {timeout}; goto np_fail; }}")
            self.parser_state(state, sc)
        o.dedent()
        o.line("np_accept:")
        o.line("    X->pos = pos; return 0;")
        o.line("np_reject:")
        o.line("    X->pos = pos; return -1;")
        o.line("np_fail:")
        o.line("    X->pos = pos; return err;")
        o.line("}")

    def parser_state(self, state: ir.ParserState, sc: CScope) -> None:
        for s in state.body:
            self.stmt(s, sc)
        self.transition(state.transition, sc)

    def goto(self, target: str) -> str:
        if target == "accept":
            return "goto np_accept;"
        if target == "reject":
            return "goto np_reject;"
        if target not in self.parser_states:
            raise ProgramError(f"unknown parser state {target}")
        return f"goto ST_{cid(target)};"

    def transition(self, tr: ir.Transition, sc: CScope) -> None:
        o = self.out
        if isinstance(tr, ir.Goto):
            o.line(self.goto(tr.next))
            return
        assert isinstance(tr, ir.Select)
        o.line("{")
        o.indent()
        keys = []
        for k in tr.keys:
            var = self.fresh("k")
            o.line(f"{self.ctype(k.type)} {var} = {self.expr(k, sc)};")
            keys.append((var, k.type))
        for case in tr.cases:
            conds = []
            at = 0  # the key the next keyset matches
            for ks in case.keysets:
                if isinstance(ks, ir.KeysetValueSet):
                    width = self.value_set_widths(ks, tr)
                    conds.append(self.value_set_member(ks, keys[at : at + width]))
                    at += width
                    continue
                var, t = keys[at]
                at += 1
                if isinstance(ks, ir.KeysetExact):
                    conds.append(f"{var} == {self.keyset_value(ks.value, t)}")
                elif isinstance(ks, ir.KeysetMask):
                    masked = f"(({var}) & {self.keyset_value(ks.mask, t)})"
                    conds.append(f"{masked} == {self.keyset_value(ks.value, t)}")
                elif isinstance(ks, ir.KeysetRange):
                    conds.append(f"{self.keyset_value(ks.low, t)} <= {var} && {var} <= "
                                 f"{self.keyset_value(ks.high, t)}")
            o.line(f"if ({' && '.join(conds) or '1'}) {self.goto(case.next)}")
        o.line(f"err = {self.error_code('NoMatch')}; goto np_fail;")
        o.dedent()
        o.line("}")

    def value_set_member(self, ks: ir.KeysetValueSet, keys: list[tuple[str, ir.Type]]) -> str:
        """The condition that the keys a value set keyset matches are one of its members: each key as two
        words of its value (np_value_set); a negative int<w> key is none, as members are not negative."""
        parts = []
        for var, _ in keys:
            parts += [f"(u64)(u128)({var})", f"(u64)((u128)({var}) >> 64)"]
        signed = [f"{var} >= 0" for var, t in keys if isinstance(t, ir.TInt)]
        member = (f"np_value_set_has(&X->sw->value_sets[{self.value_sets[ks.name]}], "
                  f"(const u64[]){{{', '.join(parts)}}})")
        return " && ".join([*signed, member])

    def keyset_value(self, v: int | bool | str, t: ir.Type) -> str:
        if isinstance(v, bool):
            return "1" if v else "0"
        if isinstance(v, str):
            return f"((u64){self.error_code(v)})"
        if isinstance(t, ir.TBit | ir.TInt):
            return self.const(v, t)
        return f"((u64){v})"

    def zeroed(self, t: ir.Type, name: str) -> str:
        """A C declaration of a variable of type t, zero (invalid headers, false, 0) as P4 locals start."""
        return f"{self.ctype(t)} {name}; memset(&{name}, 0, sizeof {name});"

    def gen_control(self, c: ir.Control) -> None:
        self.gen_record(f"Loc_{cid(c.name)}", [(f"f_{cid(v.name)}", v.type) for v in c.locals])
        sc = self.block_scope(c)
        for t in self.tables.values():
            if t.control == c.name:
                self.gen_table(t, c, sc)
        o = self.out
        o.line(f"static void CONTROL_{cid(c.name)}(np_x *X, {sc.params}) {{")
        o.indent()
        o.line(f"{sc.loc} L_; memset(&L_, 0, sizeof L_); {sc.loc} *L = &L_; (void)L;")
        o.line("X->exit = 0;")
        self.block(c.body, sc)
        o.dedent()
        o.line("}")

    def gen_action(self, a: ir.Action, c: ir.Control, sc: CScope) -> str:
        key = (c.name, a.name)
        if key in self.action_fns:
            return self.action_fns[key]
        fn = f"ACT{len(self.action_fns)}"
        self.action_fns[key] = fn
        names = dict(sc.names)
        o = self.out
        o.line(f"/* action {a.name} of {c.name} */")
        o.line(f"static void {fn}(np_x *X, {sc.params}, {sc.loc} *L, const u64 *A) {{")
        o.indent()
        word = 0
        for p in a.params:
            w = self.width(p.type)
            var = f"a_{cid(p.var)}"
            names[p.var] = var
            if isinstance(p.type, ir.TInt) and w in (64, 128):
                raise self.unsupported(a, f"action parameter {p.name} of type int<{w}>")
            value = f"A[{word}]" if w <= 64 else f"(((u128)A[{word + 1}] << 64) | A[{word}])"
            # the raw value as the control plane wrote it, as the Python engine's action data
            o.line(f"{self.ctype(p.type)} {var} = ({self.ctype(p.type)}){value};")
            word += words(w)
        for v in a.locals:
            names[v.name] = f"v_{cid(v.name)}"
            o.line(self.zeroed(v.type, f"v_{cid(v.name)}"))
        asc = CScope(names, a.name, sc.params, sc.args, sc.loc, in_action=True)
        self.block(a.body, asc)
        o.line("(void)X; (void)L; (void)A;")
        o.dedent()
        o.line("}")
        return fn

    def gen_table(self, t: ir.Table, c: ir.Control, sc: CScope) -> None:
        for ref in t.actions:
            if ref.name not in self.actions:
                raise ProgramError(f"{t.src}: table {t.name}: unknown action {ref.name}")
            self.gen_action(self.actions[ref.name], c, sc)
        tid = self.table_ids[t.name]
        o = self.out
        o.line(f"/* table {t.name} */")
        o.line(f"static int APPLY{tid}(np_x *X, {sc.params}, {sc.loc} *L) {{")
        o.indent()
        self.table_body(t, c, sc)
        o.dedent()
        o.line("}")

    def dispatch(self, t: ir.Table, c: ir.Control, sc: CScope, action: str, args: str) -> str:
        calls = [(self.action_ids[ref.name], self.action_fns[(c.name, ref.name)]) for ref in t.actions]
        cases = " ".join(f"case {i}: {fn}(X, {sc.args}, L, {args}); break;" for i, fn in calls)
        return f"switch ({action}) {{ {cases} default: break; }}"

    def table_body(self, t: ir.Table, c: ir.Control, sc: CScope) -> None:
        """Look the table up and run the entry's (or the default) action; returns the action that ran on
        a hit, -1 when the default ran (also for an entry whose group is empty, as the Python engine)."""
        tid = self.table_ids[t.name]
        keys = [k for k in t.keys if k.match != "selector"]
        selector = [k for k in t.keys if k.match == "selector"]
        o = self.out
        o.line(f"np_table *T = &X->sw->tables[{tid}];")
        kw = sum(words(self.key_width(k)) for k in keys)
        o.line(f"u64 k[{max(kw, 1)}];")
        word = 0
        for k in keys:
            word = self.key_value(k, sc, word)
        o.line("np_entry *e = np_table_lookup(T, k);")
        default = self.dispatch(t, c, sc, "T->def.action", "T->def.args")
        o.line("if (!e) {")
        if t.direct_meter:
            o.line("    X->meter_color = 0;")
        o.line(f"    {default}")
        o.line("    return -1;")
        o.line("}")
        if t.direct_counter:
            o.line("e->bytes += X->length; e->packets++;")
        if t.direct_meter:
            meter = self.externs[t.direct_meter]
            amount = "X->length" if isinstance(meter, ir.DirectMeter) and meter.unit == "bytes" else "1"
            o.line(f"X->meter_color = np_meter_execute(&e->meter, {amount}, np_now(X->sw));")
        if not t.implementation:
            o.line(self.dispatch(t, c, sc, "e->ref.action", "e->ref.args"))
            o.line("return e->ref.action;")
            return
        o.line(f"np_profile *P = &X->sw->profiles[{self.profiles[t.implementation]}];")
        o.line("const np_action_ref *r = NULL; np_group *g = NULL;")
        o.line("if (np_profile_resolve(P, &e->ref, &r, &g)) {")
        o.indent()
        n = self.packed(tuple(k.expr for k in selector), sc, "_sel")
        o.line(f"r = np_profile_pick(P, g, _sel, {n});")
        o.dedent()
        o.line("}")
        o.line(f"if (!r) {{ {default} return -1; }}")
        o.line(self.dispatch(t, c, sc, "r->action", "r->args"))
        o.line("return r->action;")

    def key_width(self, k: ir.TableKey) -> int:
        """Bits of a key; an error key holds the error's number (32 bits, as control.key_width)."""
        return 32 if isinstance(k.type, ir.TError) else self.width(k.type)

    def key_value(self, k: ir.TableKey, sc: CScope, word: int) -> int:
        """Emit the key field into k[word...] as its unsigned bits; returns the next word."""
        v = self.expr(k.expr, sc)
        w = self.key_width(k)
        bits = f"((u128)({v}) & {self.uconst(mask(w))})"
        if w <= 64:
            self.out.line(f"k[{word}] = (u64){bits};")
            return word + 1
        self.out.line(f"{{ u128 _kv = {bits}; k[{word}] = (u64)_kv; k[{word + 1}] = (u64)(_kv >> 64); }}")
        return word + 2

    # ------------------------------------------------------------------------------ pipeline
    def gen_drivers(self) -> None:
        """The four phases the pipeline calls per packet (as switch.py's _drivers), each calling its
        blocks with X and (headers, meta, standard_metadata) in the block's own parameter order and
        skipping empty controls."""
        pipeline = self.program.pipeline
        if pipeline.arch != "v1model":
            raise ProgramError(f"architecture {pipeline.arch} is not supported by p4switch")
        sm = self.structs.get("standard_metadata_t")
        missing = set(PIPELINE_FIELDS) - {f.name for f in sm.fields} if sm else set(PIPELINE_FIELDS)
        if missing:
            raise NativeUnsupported(f"standard_metadata_t without {', '.join(sorted(missing))}")
        blocks: dict[str, ir.Parser | ir.Control] = {b.name: b for b in self.program.parsers}
        blocks.update((b.name, b) for b in self.program.controls)
        roles = {pipeline.headers_type: "H", pipeline.metadata_type: "M", "standard_metadata_t": "SM"}
        o = self.out
        o.line(f"typedef S_{cid(pipeline.headers_type)} NP_H;")
        o.line(f"typedef S_{cid(pipeline.metadata_type)} NP_M;")
        o.line("typedef S_standard_metadata_t NP_SM;")
        phases = {"parse": ["parser"], "ingress": ["verify_checksum", "ingress"], "egress": ["egress"],
                  "deparse": ["compute_checksum", "deparser"]}
        for phase, members in phases.items():
            calls = [self.block_call(blocks, getattr(pipeline, role), role, roles) for role in members]
            calls = [call for call in calls if call]
            if phase == "egress":
                o.line(f"#define NP_HAS_EGRESS {int(bool(calls))}")
            result = "int" if phase == "parse" else "void"
            o.line(f"static {result} np_gen_{phase}(np_x *X, NP_H *H, NP_M *M, NP_SM *SM) {{")
            o.line("    (void)H; (void)M; (void)SM;")
            for call in calls:
                o.line(f"    {'return ' if phase == 'parse' else ''}{call};")
            o.line("}")

    def block_call(self, blocks: dict[str, ir.Parser | ir.Control], name: str, role: str,
                   roles: dict[str, str]) -> str:
        blk = blocks.get(name)
        if blk is None:
            raise ProgramError(f"pipeline block {name} not found")
        if role != "parser" and not getattr(blk, "body", ()):
            return ""
        args = ["X"]
        for p in blk.params:
            t = p.type
            if isinstance(t, ir.TPacketIn | ir.TPacketOut):
                continue
            if isinstance(t, ir.TStruct) and t.name in roles:
                args.append(roles[t.name])
            else:
                raise ProgramError(
                    f"{blk.src or name}: parameter {p.name} of {name} is not a v1model pipeline parameter")
        if len(args) == 1:
            args.append("NULL")
        prefix = "PARSER" if role == "parser" else "CONTROL"
        return f"{prefix}_{cid(name)}({', '.join(args)})"

    def gen_preserve(self) -> None:
        """np_gen_preserve: copy the metadata fields a clone, resubmit or recirculate preserves (one case per
        field list)."""
        o = self.out
        o.line("static void np_gen_preserve(int fl, const NP_M *src, NP_M *dst) {")
        o.indent()
        o.line("switch (fl) {")
        for paths, index in self.field_lists.items():
            if not index:
                continue
            copies = " ".join(f"dst->{'.'.join(f'f_{cid(p)}' for p in path)} = "
                              f"src->{'.'.join(f'f_{cid(p)}' for p in path)};" for path in paths)
            o.line(f"case {index}: {copies} break;")
        o.line("default: break;")
        o.line("}")
        o.line("(void)src; (void)dst;")
        o.dedent()
        o.line("}")

    def gen_descriptions(self) -> None:
        """The program's objects as np_runtime.h describes them (sizes, key layouts, algorithms)."""
        o = self.out
        o.line(f"#define NP_NERRORS {len(self.errors)}")
        o.line(f"#define NP_DEPARSE_BOUND {self.deparse_bound}")
        o.line(f"#define NP_MAX_PASSES {MAX_PASSES}")
        rows = []
        for tid, t in enumerate(self.tables.values()):
            keys = [k for k in t.keys if k.match != "selector"]
            fields, word = [], 0
            for k in keys:
                if k.match not in KEY_KINDS:
                    raise ProgramError(f"{t.src}: match kind {k.match} is not supported by p4switch")
                w = self.key_width(k)
                fields.append(f"{{{KEY_KINDS[k.match]}, {w}, {word}, {words(w)}}}")
                word += words(w)
            o.line(f"static const np_key_desc np_keys{tid}[] = {{{', '.join(fields) or '{0, 0, 0, 0}'}}};")
            kinds = {k.match for k in keys}
            lpm = [i for i, k in enumerate(keys) if k.match == "lpm"]
            if not keys:
                mode = 3
            elif kinds <= {"exact"}:
                mode = 0
            elif kinds <= {"exact", "lpm"} and len(lpm) == 1:
                mode = 1
            else:
                mode = 2
            meter = -1
            if t.direct_meter:
                dm = self.externs[t.direct_meter]
                meter = int(isinstance(dm, ir.DirectMeter) and dm.unit == "bytes")
            profile = self.profiles.get(t.implementation or "", -1)
            rows.append(f"{{{c_string(t.name)}, {mode}, {len(keys)}, {word}, np_keys{tid}, "
                        f"{lpm[0] if lpm else -1}, {profile}, {meter}}}")
        self.table_array("np_table_desc", "np_gen_tables", "NP_NTABLES", rows)
        self.gen_action_lists()
        rows = []
        for name in self.profiles:
            inst = self.externs[name]
            if isinstance(inst, ir.ActionSelector):
                if inst.algorithm not in HASH_CODES:
                    raise ProgramError(f"{inst.src or name}: action_selector algorithm {inst.algorithm} is "
                                       "not supported by p4switch")
                rows.append(f"{{{c_string(name)}, {HASH_CODES[inst.algorithm]}}}")
            else:
                rows.append(f"{{{c_string(name)}, -1}}")
        self.table_array("np_profile_desc", "np_gen_profiles", "NP_NPROFILES", rows)
        sizes = [f"{self.extern_size(n)}ull" for n in self.counters]
        self.table_array("u64", "np_gen_counter_sizes", "NP_NCOUNTERS", sizes)
        sizes = [f"{self.extern_size(n)}ull" for n in self.meters]
        self.table_array("u64", "np_gen_meter_sizes", "NP_NMETERS", sizes)
        units = [str(int(getattr(self.externs[n], "unit", "") == "bytes")) for n in self.meters]
        self.table_array("int", "np_gen_meter_bytes", "NP_NMETERS_", units)
        rows = []
        for name in self.registers:
            reg = self.externs[name]
            assert isinstance(reg, ir.Register)
            rows.append(f"{{{c_string(name)}, {reg.size}ull, {self.width(reg.type)}, "
                        f"{int(isinstance(reg.type, ir.TInt))}}}")
        self.table_array("np_register_desc", "np_gen_registers", "NP_NREGISTERS", rows)
        rows = []
        for name, index in self.value_sets.items():
            vs = self.externs[name]
            assert isinstance(vs, ir.ValueSet)
            o.line(f"static const int np_vs_widths{index}[] = {{{', '.join(map(str, vs.widths)) or '0'}}};")
            rows.append(f"{{{c_string(name)}, {vs.size}ull, {len(vs.widths)}, np_vs_widths{index}}}")
        self.table_array("np_value_set_desc", "np_gen_value_sets", "NP_NVALUE_SETS", rows)

    def gen_action_lists(self) -> None:
        """The actions each table may run and the data words of each action (for the fuzz driver)."""
        o = self.out
        for tid, t in enumerate(self.tables.values()):
            ids = ", ".join(str(self.action_ids[ref.name]) for ref in t.actions) or "0"
            o.line(f"static const int np_gen_actions{tid}[] = {{{ids}}};")
        lists = ", ".join(f"np_gen_actions{tid}" for tid in range(len(self.tables))) or "NULL"
        counts = ", ".join(str(len(t.actions)) for t in self.tables.values()) or "0"
        o.line(f"static const int *const np_gen_table_actions[] = {{{lists}}};")
        o.line(f"static const int np_gen_table_action_counts[] = {{{counts}}};")
        sizes = [sum(words(self.width(p.type)) for p in a.params) for a in self.actions.values()]
        o.line(f"static const int np_gen_action_words[] = {{{', '.join(map(str, sizes)) or '0'}}};")

    def extern_size(self, name: str) -> int:
        return int(getattr(self.externs[name], "size", 0))

    def table_array(self, ctype: str, name: str, count: str, rows: list[str]) -> None:
        self.out.line(f"#define {count} {len(rows)}")
        body = ", ".join(rows) if rows else "{0}" if ctype.startswith("np_") else "0"
        self.out.line(f"static const {ctype} {name}[] = {{{body}}};")

    # ---------------------------------------------------------------------------------- module
    def generate(self) -> str:
        o = self.out
        source = (self.program.source or "?").replace("*/", "* /")
        o.line(f"/* generated by p4switch.engine.cgen from {source} */")
        o.line('#include "np_switch.h"')
        self.gen_types()
        body = Emitter()
        self.out = body
        for p in self.program.parsers:
            self.gen_parser(p)
        for c in self.program.controls:
            self.gen_control(c)
        self.gen_drivers()
        self.gen_preserve()
        self.out = o
        self.gen_descriptions()
        o.lines += body.lines
        o.line('#include "np_pipeline.h"')
        return "\n".join(o.lines) + "\n"


def c_string(text: str) -> str:
    """A C string literal."""
    escaped = "".join(c if c.isalnum() or c in " ._-:/" else f"\\x{ord(c):02x}\"\"" for c in text)
    return f'"{escaped}"'
