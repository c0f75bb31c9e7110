"""p4switch's typed IR: one frozen dataclass per node kind, and its one JSON form (docs/p4switch-ir.md).

The front end (p4switch.frontend) produces a `Program`, the engine (p4switch.engine) runs one, and a loader
of another format (BMv2 JSON) produces the same objects. The program is fully resolved: every name is
qualified, every expression carries its exact type, constants are folded and calls inlined.

`to_json` and `from_json` are the only serializer. A node is a JSON object holding its fields under their
own names (a trailing `_` dropped: `If.else_` is "else"); a node of a union carries its tag first ("k" for
types, "op" for expressions, "s" for statements, "kind" for transitions, keysets, entry matches and
extern instances); tuples are arrays and dicts objects. The round trip is exact: `from_json(to_json(p))
== p`, and JSON that `to_json` wrote comes back from `from_json` unchanged. `from_json` accepts the
fields the format lets a writer leave out (those with defaults here) and names the path of anything it
cannot read.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

FORMAT = "p4switch-ir"
VERSION = 1
"""The schema version: bumped on any change an older engine would read wrongly."""


class IRFormatError(ValueError):
    """JSON that is not a p4switch IR program; the message starts with the path of the bad value."""

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.message = message
        self.path = path

    def under(self, step: str) -> IRFormatError:
        """The same error seen from the enclosing object (`step` is a key or `[i]`)."""
        sep = "" if not self.path or self.path.startswith("[") else "."
        return IRFormatError(self.message, step + sep + self.path)


class WrongFormat(IRFormatError):
    """A document of another format, or of another version of this one."""


class Node:
    """Base of every node. A union base sets UNION_KEY; each of its kinds sets TAG."""

    __slots__ = ()
    UNION_KEY: ClassVar[str] = ""
    TAG: ClassVar[str] = ""

    @property
    def tag(self) -> str:
        """The kind of the node as the JSON names it (an expression's "op", a statement's "s", ...)."""
        return self.TAG


def _omit(default: Any) -> Any:
    """A field left out of the JSON while it holds its default."""
    return field(default=default, metadata={"omit": True})


# ------------------------------------------------------------------------------------------------ types


class Type(Node):
    """A P4 type as the engine sees it (typedefs and serializable enums are already erased)."""

    __slots__ = ()
    UNION_KEY = "k"

    @property
    def k(self) -> str:
        return self.TAG


@dataclass(frozen=True, slots=True)
class _Sized(Type):
    w: int


@dataclass(frozen=True, slots=True)
class TBit(_Sized):
    """bit<w>: unsigned, arithmetic modulo 2^w."""

    TAG = "bit"


@dataclass(frozen=True, slots=True)
class TInt(_Sized):
    """int<w>: two's complement, arithmetic wraps."""

    TAG = "int"


@dataclass(frozen=True, slots=True)
class TBool(Type):
    TAG = "bool"


@dataclass(frozen=True, slots=True)
class TVarbit(Type):
    """varbit<max>: a bit string whose length (bits, a multiple of 8, at most `max`) is known at run time;
    it can be copied, extracted (`Extract.length`) and emitted, not computed with."""

    TAG = "varbit"
    max: int


@dataclass(frozen=True, slots=True)
class _Declared(Type):
    """A type named by its declaration."""

    name: str


@dataclass(frozen=True, slots=True)
class THeader(_Declared):
    TAG = "header"


@dataclass(frozen=True, slots=True)
class TStruct(_Declared):
    TAG = "struct"


@dataclass(frozen=True, slots=True)
class TStack(Type):
    """A header stack of `size` headers of type `elem`."""

    TAG = "stack"
    elem: str
    size: int


@dataclass(frozen=True, slots=True)
class TError(Type):
    TAG = "error"


@dataclass(frozen=True, slots=True)
class TEnum(_Declared):
    """A plain (not serializable) enum; its constants are member names."""

    TAG = "enum"


@dataclass(frozen=True, slots=True)
class TPacketIn(Type):
    TAG = "packet_in"


@dataclass(frozen=True, slots=True)
class TPacketOut(Type):
    TAG = "packet_out"


def width(t: Type) -> int:
    """Bits of a bit/int/bool value (bool is one bit where values are packed)."""
    if isinstance(t, _Sized):
        return t.w
    if isinstance(t, TBool):
        return 1
    raise ValueError(f"type {t.k} has no bit width")


# ------------------------------------------------------------------------------------------ expressions


class Expr(Node):
    """An expression; `type` is its exact type (operands already cast by the front end)."""

    __slots__ = ()
    UNION_KEY = "op"
    type: Type


@dataclass(frozen=True, slots=True)
class Const(Expr):
    """An int reduced to the width (negative for int<w>), a bool, or a member name of error/enum."""

    TAG = "const"
    value: int | bool | str
    type: Type


@dataclass(frozen=True, slots=True)
class Var(Expr):
    """A parameter or local of the enclosing block (or action)."""

    TAG = "var"
    name: str
    type: Type


@dataclass(frozen=True, slots=True)
class Member(Expr):
    """A struct member or a header field."""

    TAG = "member"
    expr: Expr
    field: str
    type: Type


@dataclass(frozen=True, slots=True)
class Index(Expr):
    """A header stack element at a constant index (in range)."""

    TAG = "index"
    expr: Expr
    index: int
    type: Type


@dataclass(frozen=True, slots=True)
class DynIndex(Expr):
    """A header stack element at an index known only at run time (a bit<W> or int<W> expression). Out of
    range (the spec's undefined value): a read gives an invalid header with every field zero, and a write
    or setValid/setInvalid changes nothing."""

    TAG = "dyn_index"
    expr: Expr
    index: Expr
    type: Type


@dataclass(frozen=True, slots=True)
class Slice(Expr):
    """`expr[hi:lo]`, of type bit<hi-lo+1>; also an lvalue."""

    TAG = "slice"
    expr: Expr
    hi: int
    lo: int
    type: Type


@dataclass(frozen=True, slots=True)
class Concat(Expr):
    """`left ++ right`."""

    TAG = "concat"
    left: Expr
    right: Expr
    type: Type


@dataclass(frozen=True, slots=True)
class Cast(Expr):
    TAG = "cast"
    expr: Expr
    type: Type


@dataclass(frozen=True, slots=True)
class Unary(Expr):
    """`-`, `~` or `!`."""

    TAG = "unary"
    operator: str
    expr: Expr
    type: Type


@dataclass(frozen=True, slots=True)
class Binary(Expr):
    """Arithmetic, bitwise, comparison, `&&`/`||` (short-circuit), `|+|`/`|-|` (saturating)."""

    TAG = "binary"
    operator: str
    left: Expr
    right: Expr
    type: Type


@dataclass(frozen=True, slots=True)
class Mux(Expr):
    """`cond ? then : else`."""

    TAG = "mux"
    cond: Expr
    then: Expr
    else_: Expr
    type: Type


@dataclass(frozen=True, slots=True)
class IsValid(Expr):
    TAG = "is_valid"
    expr: Expr
    type: Type


@dataclass(frozen=True, slots=True)
class Lookahead(Expr):
    """Parser: the next `type`-wide bits of the packet, not consumed."""

    TAG = "lookahead"
    type: Type


@dataclass(frozen=True, slots=True)
class _TableTest(Expr):
    table: str
    type: Type


@dataclass(frozen=True, slots=True)
class TableHit(_TableTest):
    """Applies the table; true on a hit (`t.apply().hit`)."""

    TAG = "table_hit"


@dataclass(frozen=True, slots=True)
class TableMiss(_TableTest):
    """Applies the table; true on a miss (`t.apply().miss`)."""

    TAG = "table_miss"


# ------------------------------------------------------------------------------------------- statements


class Stmt(Node):
    """A statement; `src` is its source position `file:line:col` (for errors and trace logs)."""

    __slots__ = ()
    UNION_KEY = "s"
    src: str


@dataclass(frozen=True, slots=True)
class Assign(Stmt):
    """Types are equal; header and struct values copy every field (and validity)."""

    TAG = "assign"
    lhs: Expr
    rhs: Expr
    src: str = ""


@dataclass(frozen=True, slots=True)
class If(Stmt):
    TAG = "if"
    cond: Expr
    then: tuple[Stmt, ...]
    else_: tuple[Stmt, ...] = ()
    src: str = ""


@dataclass(frozen=True, slots=True)
class Apply(Stmt):
    """Apply a table, ignoring the result."""

    TAG = "apply"
    table: str
    src: str = ""


@dataclass(frozen=True, slots=True)
class SwitchCase:
    """Labels (action names; None for `default`) with one body: fall-through labels are merged."""

    actions: tuple[str, ...] | None
    body: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class Switch(Stmt):
    """`switch (table.apply().action_run)`."""

    TAG = "switch"
    table: str
    cases: tuple[SwitchCase, ...]
    src: str = ""


@dataclass(frozen=True, slots=True)
class _Jump(Stmt):
    src: str = ""


@dataclass(frozen=True, slots=True)
class Exit(_Jump):
    """End the current control and its callers up to the pipeline block."""

    TAG = "exit"


@dataclass(frozen=True, slots=True)
class Return(_Jump):
    """End the current control apply (or the action a table runs)."""

    TAG = "return"


@dataclass(frozen=True, slots=True)
class _OnHeader(Stmt):
    """A statement on one header (an lvalue)."""

    header: Expr
    src: str = ""


@dataclass(frozen=True, slots=True)
class SetValid(_OnHeader):
    TAG = "set_valid"


@dataclass(frozen=True, slots=True)
class SetInvalid(_OnHeader):
    TAG = "set_invalid"


@dataclass(frozen=True, slots=True)
class Extract(_OnHeader):
    """Parser: extract a header (error.PacketTooShort on a short packet). A header with a varbit field is
    extracted with `length`, the varbit's bits (bit<32>): ParserInvalidArgument when it is not a multiple
    of 8, HeaderTooShort when it is more than the varbit's maximum."""

    TAG = "extract"
    length: Expr | None = _omit(None)


@dataclass(frozen=True, slots=True)
class Advance(Stmt):
    """Parser: skip `bits` bits."""

    TAG = "advance"
    bits: Expr
    src: str = ""


@dataclass(frozen=True, slots=True)
class Verify(Stmt):
    """Parser: reject with `error` when `cond` is false."""

    TAG = "verify"
    cond: Expr
    error: str
    src: str = ""


@dataclass(frozen=True, slots=True)
class Emit(_OnHeader):
    """Deparser: emit the header if it is valid."""

    TAG = "emit"


@dataclass(frozen=True, slots=True)
class Call(Stmt):
    """An extern function; the fields after `fn` that it does not use stay None (docs: "Statements")."""

    TAG = "call"
    fn: str
    clone_type: str | None = _omit(None)
    algorithm: str | None = _omit(None)
    format: str | None = _omit(None)
    args: tuple[Expr, ...] = ()
    data: tuple[Expr, ...] | None = _omit(None)
    field_list: tuple[tuple[str, ...], ...] | None = _omit(None)
    src: str = ""


@dataclass(frozen=True, slots=True)
class MethodCall(Stmt):
    """A method of an extern instance (counter.count, register.read, ...)."""

    TAG = "method"
    instance: str
    method: str
    args: tuple[Expr, ...] = ()
    src: str = ""


@dataclass(frozen=True, slots=True)
class Digest(Stmt):
    """digest<T>(receiver, data): one expression per field of the digest type, in order."""

    TAG = "digest"
    digest: str
    receiver: int | None
    fields: tuple[Expr, ...]
    src: str = ""


# -------------------------------------------------------------------------------------------- parsers


class Transition(Node):
    __slots__ = ()
    UNION_KEY = "kind"


@dataclass(frozen=True, slots=True)
class Goto(Transition):
    """`next` is a state, "accept" or "reject"."""

    TAG = "goto"
    next: str


class Keyset(Node):
    """One element of a select case, per select key."""

    __slots__ = ()
    UNION_KEY = "kind"


@dataclass(frozen=True, slots=True)
class KeysetExact(Keyset):
    TAG = "exact"
    value: int


@dataclass(frozen=True, slots=True)
class KeysetMask(Keyset):
    """`value &&& mask`; value is already ANDed with mask."""

    TAG = "mask"
    value: int
    mask: int


@dataclass(frozen=True, slots=True)
class KeysetRange(Keyset):
    """`low .. high`, inclusive."""

    TAG = "range"
    low: int
    high: int


@dataclass(frozen=True, slots=True)
class KeysetDefault(Keyset):
    """`_` or `default`."""

    TAG = "default"


@dataclass(frozen=True, slots=True)
class KeysetValueSet(Keyset):
    """A parser value set (`ValueSet` instance `name`): matches when the select's keys from this position,
    as many as the value set's type has fields (one for bit<W>), are one of its members."""

    TAG = "value_set"
    name: str


@dataclass(frozen=True, slots=True)
class SelectCase:
    keysets: tuple[Keyset, ...]
    next: str


@dataclass(frozen=True, slots=True)
class Select(Transition):
    """Cases are tried in order; when none matches the parser rejects with error.NoMatch."""

    TAG = "select"
    keys: tuple[Expr, ...]
    cases: tuple[SelectCase, ...]


@dataclass(frozen=True, slots=True)
class ParserState:
    name: str
    src: str
    body: tuple[Stmt, ...]
    transition: Transition


# --------------------------------------------------------------------------------------------- blocks


@dataclass(frozen=True, slots=True)
class Param:
    """`dir` is "in", "out", "inout" or "none"."""

    name: str
    dir: str
    type: Type


@dataclass(frozen=True, slots=True)
class Local:
    """A variable of a block or action; zero/false/invalid at the start of each invocation."""

    name: str
    type: Type


@dataclass(frozen=True, slots=True)
class Parser:
    """A parser block; `states` start with "start"."""

    name: str
    src: str
    params: tuple[Param, ...]
    locals: tuple[Local, ...]
    states: tuple[ParserState, ...]


@dataclass(frozen=True, slots=True)
class Control:
    """A control block; `body` is its apply block."""

    name: str
    src: str
    params: tuple[Param, ...]
    locals: tuple[Local, ...] = ()
    body: tuple[Stmt, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionParam:
    """Action data: `name` as in the P4Info, `var` the variable the body reads (the same name)."""

    name: str
    var: str = ""
    type: Type

    def __post_init__(self) -> None:
        if not self.var:
            object.__setattr__(self, "var", self.name)


@dataclass(frozen=True, slots=True)
class Action:
    """An action a table can run; `control` is the block whose variables it reaches (None: top level)."""

    name: str
    control: str | None
    src: str
    params: tuple[ActionParam, ...]
    locals: tuple[Local, ...] = ()
    body: tuple[Stmt, ...] = ()
    p4info_id: int = 0


# --------------------------------------------------------------------------------------------- tables


@dataclass(frozen=True, slots=True)
class TableKey:
    """`name` is the P4Info match field name; `match` exact/ternary/lpm/range/optional/selector."""

    name: str
    match: str
    type: Type
    expr: Expr


@dataclass(frozen=True, slots=True)
class ActionRef:
    """`scope`: "all", "table_only" or "default_only"."""

    name: str
    scope: str = "all"


@dataclass(frozen=True, slots=True)
class DefaultAction:
    name: str
    args: tuple[int, ...] = ()
    const: bool = False


class EntryMatch(Node):
    """The match of a const entry on one (non-selector) key."""

    __slots__ = ()
    UNION_KEY = "kind"


@dataclass(frozen=True, slots=True)
class MatchExact(EntryMatch):
    TAG = "exact"
    value: int


@dataclass(frozen=True, slots=True)
class MatchTernary(EntryMatch):
    TAG = "ternary"
    value: int
    mask: int


@dataclass(frozen=True, slots=True)
class MatchLpm(EntryMatch):
    TAG = "lpm"
    value: int
    prefix_len: int


@dataclass(frozen=True, slots=True)
class MatchRange(EntryMatch):
    TAG = "range"
    low: int
    high: int


@dataclass(frozen=True, slots=True)
class MatchOptional(EntryMatch):
    TAG = "optional"
    value: int


@dataclass(frozen=True, slots=True)
class MatchDontCare(EntryMatch):
    TAG = "dont_care"


@dataclass(frozen=True, slots=True)
class EntryAction:
    """The action of a const entry; args in the action's parameter order."""

    name: str
    args: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Entry:
    """A const entry; a larger priority wins (P4Runtime)."""

    match: tuple[EntryMatch, ...]
    action: EntryAction
    priority: int = 0
    src: str = ""


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    control: str
    src: str
    keys: tuple[TableKey, ...]
    actions: tuple[ActionRef, ...]
    default_action: DefaultAction
    entries: tuple[Entry, ...] = ()
    entries_const: bool = False
    size: int = 0
    direct_counter: str | None = None
    direct_meter: str | None = None
    implementation: str | None = None
    support_timeout: bool = _omit(False)
    p4info_id: int = 0


# ----------------------------------------------------------------------------------- extern instances


class ExternInstance(Node):
    """An extern object instance; `name` is fully qualified as in the P4Info."""

    __slots__ = ()
    UNION_KEY = "kind"
    name: str
    src: str
    p4info_id: int


@dataclass(frozen=True, slots=True)
class Counter(ExternInstance):
    """`unit`: "packets", "bytes" or "both"."""

    TAG = "counter"
    name: str
    size: int
    unit: str
    src: str = ""
    p4info_id: int = 0


@dataclass(frozen=True, slots=True)
class DirectCounter(ExternInstance):
    TAG = "direct_counter"
    name: str
    unit: str
    table: str | None
    src: str = ""
    p4info_id: int = 0


@dataclass(frozen=True, slots=True)
class Meter(ExternInstance):
    """A two-rate three-colour meter; `unit` "packets" or "bytes"."""

    TAG = "meter"
    name: str
    size: int
    unit: str
    src: str = ""
    p4info_id: int = 0


@dataclass(frozen=True, slots=True)
class DirectMeter(ExternInstance):
    TAG = "direct_meter"
    name: str
    unit: str
    table: str | None
    result_type: Type
    src: str = ""
    p4info_id: int = 0


@dataclass(frozen=True, slots=True)
class Register(ExternInstance):
    TAG = "register"
    name: str
    size: int
    type: Type
    src: str = ""
    p4info_id: int = 0


@dataclass(frozen=True, slots=True)
class ActionProfile(ExternInstance):
    TAG = "action_profile"
    name: str
    size: int
    tables: tuple[str, ...] = ()
    src: str = ""
    p4info_id: int = 0


@dataclass(frozen=True, slots=True)
class ValueSet(ExternInstance):
    """A parser `value_set<type>(size)`: up to `size` members the control plane sets, each a value of
    `widths` (one width per field of the type; one for bit<W>), matched exactly by `KeysetValueSet`."""

    TAG = "value_set"
    name: str
    size: int
    widths: tuple[int, ...]
    src: str = ""
    p4info_id: int = 0


@dataclass(frozen=True, slots=True)
class ActionSelector(ExternInstance):
    TAG = "action_selector"
    name: str
    algorithm: str
    size: int
    output_width: int
    max_group_size: int
    tables: tuple[str, ...] = ()
    src: str = ""
    p4info_id: int = 0


# -------------------------------------------------------------------------------------------- program


@dataclass(frozen=True, slots=True)
class HeaderField:
    """A field of `w` bits; a `varbit` field (at most one per header) holds up to `w` bits, its length set
    when the header is extracted or the field assigned, and is not counted in `HeaderType.bits`."""

    name: str
    w: int
    signed: bool = False
    varbit: bool = _omit(False)


@dataclass(frozen=True, slots=True)
class HeaderType:
    """`controller_header` is "packet_in"/"packet_out" for a @controller_header header."""

    fields: tuple[HeaderField, ...]
    bits: int
    controller_header: str | None = None


@dataclass(frozen=True, slots=True)
class StructField:
    """`field_lists`: the arguments of its @field_list annotation, if it has one (None for an argument
    that is not an integer literal: the front end does not evaluate those)."""

    name: str
    type: Type
    field_lists: tuple[int | None, ...] | None = _omit(None)


@dataclass(frozen=True, slots=True)
class StructType:
    fields: tuple[StructField, ...]


@dataclass(frozen=True, slots=True)
class DigestField:
    name: str
    type: Type


@dataclass(frozen=True, slots=True)
class DigestType:
    """A digest, named by its struct type; `fields` are what each digest() call sends, in order."""

    name: str
    fields: tuple[DigestField, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Pipeline:
    """The parser/control types bound in `V1Switch(...) main`, and the headers and metadata types."""

    arch: str = "v1model"
    parser: str
    verify_checksum: str
    ingress: str
    egress: str
    compute_checksum: str
    deparser: str
    headers_type: str
    metadata_type: str

    ROLES: ClassVar[tuple[str, ...]] = (
        "parser",
        "verify_checksum",
        "ingress",
        "egress",
        "compute_checksum",
        "deparser",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Program:
    """A whole v1model program. The dicts are keyed by type name and never change after construction."""

    source: str = ""
    errors: tuple[str, ...] = ()
    enums: dict[str, tuple[str, ...]] = field(default_factory=dict)
    headers: dict[str, HeaderType]
    structs: dict[str, StructType]
    externs: tuple[ExternInstance, ...] = ()
    actions: tuple[Action, ...] = ()
    tables: tuple[Table, ...] = ()
    parsers: tuple[Parser, ...]
    controls: tuple[Control, ...]
    digests: tuple[DigestType, ...] = ()
    pipeline: Pipeline


def children(node: Any) -> Iterator[Any]:
    """The nodes directly inside `node`, in field order (from fields holding a node, or a tuple or dict
    of them): what a pass needs to walk the whole tree without knowing every kind."""
    for f in _fields(type(node)):
        value = getattr(node, f.attr)
        if isinstance(value, tuple):
            yield from (item for item in value if dataclasses.is_dataclass(item))
        elif isinstance(value, dict):
            yield from (item for item in value.values() if dataclasses.is_dataclass(item))
        elif dataclasses.is_dataclass(value):
            yield value


# ----------------------------------------------------------------------------------------- serializer

_Encode = Callable[[Any], Any]
_Decode = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class _FieldCodec:
    attr: str
    key: str
    encode: _Encode
    decode: _Decode
    default: Any  # dataclasses.MISSING when the JSON must have it
    omit: bool


def to_json(program: Program) -> dict[str, Any]:
    """The JSON object of a program (docs/p4switch-ir.md), with "format" and "version"."""
    return {"format": FORMAT, "version": VERSION, **_encode_node(program)}


def from_json(doc: Any) -> Program:
    """Read a program from its JSON object; raises IRFormatError naming the path of a bad value."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise WrongFormat(f"program is not p4switch IR JSON (format != {FORMAT!r})")
    if doc.get("version") != VERSION:
        raise WrongFormat(
            f"p4switch IR version {doc.get('version')} is not this p4switch's version {VERSION}: "
            "compile the program again with this p4switch-cc"
        )
    program: Program = _decode_fields(Program, doc)
    return program


def node_to_json(node: Any) -> Any:
    """The JSON form of any node (an expression, a statement, ...): handy in tests and messages."""
    return _encode_node(node)


def node_from_json(cls: type[Any], doc: Any) -> Any:
    """Read one node of class `cls` (or of the union `cls`, e.g. Expr) from its JSON form."""
    return _codec(cls)[1](doc)


def _encode_node(node: Any) -> dict[str, Any]:
    cls = type(node)
    out: dict[str, Any] = {cls.UNION_KEY: cls.TAG} if getattr(cls, "TAG", "") else {}
    for f in _fields(cls):
        value = getattr(node, f.attr)
        if f.omit and value == f.default:
            continue
        out[f.key] = f.encode(value)
    return out


def _decode_fields(cls: type[Any], doc: Any) -> Any:
    if not isinstance(doc, dict):
        raise IRFormatError(f"expected an object for {cls.__name__}, got {_describe(doc)}")
    values = {}
    for f in _fields(cls):
        if f.key not in doc:
            if f.default is dataclasses.MISSING:
                raise IRFormatError(f"{cls.__name__} has no {f.key!r}")
            continue
        try:
            values[f.attr] = f.decode(doc[f.key])
        except IRFormatError as exc:
            raise exc.under(f.key) from None
    return cls(**values)


_FIELDS: dict[type[Any], tuple[_FieldCodec, ...]] = {}
_UNIONS: dict[type[Node], dict[str, type[Node]]] = {}


def _fields(cls: type[Any]) -> tuple[_FieldCodec, ...]:
    """How to write and read each field of a node class (built on first use, from its type hints)."""
    cached = _FIELDS.get(cls)
    if cached is not None:
        return cached
    hints = typing.get_type_hints(cls, vars(sys.modules[__name__]))
    codecs = []
    for f in dataclasses.fields(cls):
        encode, decode = _codec(hints[f.name])
        default = f.default
        if f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        codecs.append(
            _FieldCodec(f.name, f.name.rstrip("_"), encode, decode, default, bool(f.metadata.get("omit")))
        )
    _FIELDS[cls] = tuple(codecs)
    return _FIELDS[cls]


def _union(base: type[Node]) -> dict[str, type[Node]]:
    """The kinds of a union base by tag: the classes of this module derived from it."""
    if base not in _UNIONS:
        _UNIONS[base] = {
            obj.TAG: obj
            for obj in vars(sys.modules[__name__]).values()
            if isinstance(obj, type) and issubclass(obj, base) and "TAG" in obj.__dict__
        }
    return _UNIONS[base]


def _identity(value: Any) -> Any:
    return value


_NONE = type(None)
_PRIMITIVES: dict[Any, tuple[type, ...]] = {int: (int,), str: (str,), bool: (bool,), _NONE: (_NONE,)}


def _codec(hint: Any) -> tuple[_Encode, _Decode]:
    """Encoder and decoder of one field type (primitives, unions of them, X | None, tuples, dicts, nodes)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint in _PRIMITIVES:
        return _identity, _check_primitive(_PRIMITIVES[hint])
    if origin in (types.UnionType, typing.Union):
        if all(a in _PRIMITIVES for a in args):
            return _identity, _check_primitive(tuple(t for a in args for t in _PRIMITIVES[a]))
        (inner,) = [a for a in args if a is not _NONE]
        return _optional(*_codec(inner))
    if origin is tuple:
        return _sequence(*_codec(args[0]))
    if origin is dict:
        return _mapping(*_codec(args[1]))
    if isinstance(hint, type) and issubclass(hint, Node) and hint.UNION_KEY and "TAG" not in hint.__dict__:
        return _encode_node, functools.partial(_decode_union, hint)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _encode_node, functools.partial(_decode_fields, hint)
    raise TypeError(f"no JSON form for {hint!r}")  # pragma: no cover - a new field type needs a case


def _check_primitive(allowed: tuple[type, ...]) -> _Decode:
    def decode(value: Any) -> Any:
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            names = " or ".join("null" if t is _NONE else t.__name__ for t in allowed)
            raise IRFormatError(f"expected {names}, got {_describe(value)}")
        return value

    return decode


def _optional(encode: _Encode, decode: _Decode) -> tuple[_Encode, _Decode]:
    return (lambda v: None if v is None else encode(v)), (lambda v: None if v is None else decode(v))


def _sequence(encode: _Encode, decode: _Decode) -> tuple[_Encode, _Decode]:
    def decode_all(value: Any) -> tuple[Any, ...]:
        if not isinstance(value, list):
            raise IRFormatError(f"expected an array, got {_describe(value)}")
        out = []
        for i, item in enumerate(value):
            try:
                out.append(decode(item))
            except IRFormatError as exc:
                raise exc.under(f"[{i}]") from None
        return tuple(out)

    return (lambda v: [encode(x) for x in v]), decode_all


def _mapping(encode: _Encode, decode: _Decode) -> tuple[_Encode, _Decode]:
    def decode_all(value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise IRFormatError(f"expected an object, got {_describe(value)}")
        out = {}
        for key, item in value.items():
            try:
                out[key] = decode(item)
            except IRFormatError as exc:
                raise exc.under(key) from None
        return out

    return (lambda v: {k: encode(x) for k, x in v.items()}), decode_all


def _decode_union(base: type[Node], doc: Any) -> Any:
    if not isinstance(doc, dict):
        raise IRFormatError(f"expected an object for {base.__name__}, got {_describe(doc)}")
    tag = doc.get(base.UNION_KEY)
    cls = _union(base).get(tag) if isinstance(tag, str) else None
    if cls is None:
        raise IRFormatError(f"unknown {base.__name__} {base.UNION_KEY} {tag!r}")
    return _decode_fields(cls, doc)


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
