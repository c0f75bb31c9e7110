"""Where BMv2's header instances live in p4switch's IR: the v1model blocks' three parameters.

BMv2 JSON has flat header instances (metadata or not), stacks of them and unions. The IR's v1model
pipeline passes a headers struct, a metadata struct and standard_metadata to every block, so:

- every non-metadata instance is a member of the struct ``headers`` (``hdr.ethernet``), a stack one
  member of stack type (``hdr.mpls``, its elements ``mpls[0]``... are ``hdr.mpls[0]``);
- every metadata instance but ``standard_metadata`` is a struct member of ``metadata``
  (``meta.scalars.tmp``), of a struct type made of its header type's fields;
- ``standard_metadata`` is the struct ``standard_metadata_t`` the engine fills.

Names that are not identifiers (p4c's ``M.hash1`` in ``scalars``) become ones (``M_hash1``); the mapping
is one to one per scope."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from p4switch import ir
from p4switch.bmv2json import unions
from p4switch.bmv2json.errors import BMv2JsonError

HEADERS = "headers"
METADATA = "metadata"
STANDARD_METADATA = "standard_metadata"
SM_TYPE = "standard_metadata_t"
HDR, META, SM = "hdr", "meta", "standard_metadata"
VARIABLE = "*"
"""The width BMv2 writes for a variable-length (varbit) field."""


class Names:
    """A one-to-one map from BMv2 names to identifiers, within one scope."""

    def __init__(self) -> None:
        self.by_name: dict[str, str] = {}
        self.taken: set[str] = set()

    def __call__(self, name: str) -> str:
        known = self.by_name.get(name)
        if known is not None:
            return known
        base = re.sub(r"\W", "_", name) or "_"
        if base[0].isdigit():
            base = "_" + base
        candidate, n = base, 0
        while candidate in self.taken:
            n += 1
            candidate = f"{base}_{n}"
        self.by_name[name] = candidate
        self.taken.add(candidate)
        return candidate


@dataclass
class HeaderTypeInfo:
    """One BMv2 header type: its fields' IR names and types, in order."""

    name: str  # the IR type name
    fields: dict[str, tuple[str, ir.Type]]  # BMv2 field name -> (IR name, type)


@dataclass
class Layout:
    """The IR storage of a BMv2 program's instances, and expressions for BMv2's references to them."""

    doc: dict[str, Any]
    types: dict[str, HeaderTypeInfo] = field(default_factory=dict)
    headers: dict[str, ir.HeaderType] = field(default_factory=dict)
    structs: dict[str, ir.StructType] = field(default_factory=dict)
    instances: dict[str, ir.Expr] = field(default_factory=dict)  # BMv2 instance name -> IR lvalue
    instance_types: dict[str, str] = field(default_factory=dict)  # BMv2 instance -> BMv2 header type
    stacks: dict[str, ir.Expr] = field(default_factory=dict)  # BMv2 stack name -> IR lvalue
    stack_types: dict[str, tuple[str, int]] = field(default_factory=dict)  # -> (BMv2 type, size)
    max_width: int = 1
    unions: dict[str, list[ir.Expr]] = field(default_factory=dict)  # union name -> member lvalues
    siblings: dict[ir.Expr, tuple[ir.Expr, ...]] = field(default_factory=dict)  # member -> the others

    def build(self) -> Layout:
        doc = self.doc
        by_id = {h["id"]: h for h in doc.get("headers", [])}
        in_stack = {i for s in doc.get("header_stacks", []) for i in s["header_ids"]}
        header_types = {t["name"]: t for t in doc.get("header_types", [])}
        members = Names()
        meta_members = Names()
        hdr_fields: list[ir.StructField] = []
        meta_fields: list[ir.StructField] = []
        type_names = Names()
        for inst in doc.get("headers", []):
            tname = inst["header_type"]
            if tname not in header_types:
                raise BMv2JsonError(f"headers ({inst['name']})", f"unknown header type {tname}")
            self.instance_types[inst["name"]] = tname
            if inst["name"] == STANDARD_METADATA:
                self.instances[inst["name"]] = ir.Var(SM, ir.TStruct(SM_TYPE))
                self.structs[SM_TYPE] = self.struct_of(header_types[tname], SM_TYPE)
                continue
            if inst.get("metadata"):
                info = self.header_type(header_types[tname], type_names, metadata=True)
                member = meta_members(inst["name"])
                meta_fields.append(ir.StructField(member, ir.TStruct(info.name)))
                self.instances[inst["name"]] = ir.Member(
                    ir.Var(META, ir.TStruct(METADATA)), member, ir.TStruct(info.name)
                )
                continue
            info = self.header_type(header_types[tname], type_names, metadata=False)
            if inst["id"] in in_stack:
                continue
            member = members(inst["name"])
            hdr_fields.append(ir.StructField(member, ir.THeader(info.name)))
            self.instances[inst["name"]] = ir.Member(
                ir.Var(HDR, ir.TStruct(HEADERS)), member, ir.THeader(info.name)
            )
        for stack in doc.get("header_stacks", []):
            info = self.header_type(header_types[stack["header_type"]], type_names, metadata=False)
            size = len(stack["header_ids"])
            member = members(stack["name"])
            t = ir.TStack(info.name, size)
            hdr_fields.append(ir.StructField(member, t))
            base = ir.Member(ir.Var(HDR, ir.TStruct(HEADERS)), member, t)
            self.stacks[stack["name"]] = base
            self.stack_types[stack["name"]] = (stack["header_type"], size)
            for i, hid in enumerate(stack["header_ids"]):
                self.instances[by_id[hid]["name"]] = ir.Index(base, i, ir.THeader(info.name))
        if SM_TYPE not in self.structs:
            raise BMv2JsonError("headers", "no standard_metadata instance: not a v1model program")
        for union, names in unions.members(doc).items():
            exprs = [self.instance(n, f"header_unions ({union})") for n in names]
            self.unions[union] = exprs
            for e in exprs:
                self.siblings[e] = tuple(x for x in exprs if x is not e)
        self.structs[HEADERS] = ir.StructType(tuple(hdr_fields))
        self.structs[METADATA] = ir.StructType(tuple(meta_fields))
        return self

    def header_type(self, t: dict[str, Any], type_names: Names, metadata: bool) -> HeaderTypeInfo:
        """The IR type of a BMv2 header type, as a header or (metadata) as a struct: made once each."""
        key = t["name"] + ("/m" if metadata else "/h")
        if key in self.types:
            return self.types[key]
        name = type_names(t["name"] + ("_m" if metadata and t["name"] + "/h" in self.types else ""))
        fields: dict[str, tuple[str, ir.Type]] = {}
        names = Names()
        for f in t.get("fields", []):
            fname, fwidth = f[0], f[1]
            signed = len(f) > 2 and bool(f[2])
            if fwidth == VARIABLE:
                ft: ir.Type = ir.TVarbit(self.varbit_max(t, f"header_types ({t['name']}.{fname})"))
            elif isinstance(fwidth, int) and not isinstance(fwidth, bool):
                self.max_width = max(self.max_width, fwidth)
                ft = ir.TInt(fwidth) if signed else ir.TBit(fwidth)
            else:
                raise BMv2JsonError(f"header_types ({t['name']}.{fname})", f"field width {fwidth!r}")
            fields[fname] = (names(fname), ft)
        info = HeaderTypeInfo(name, fields)
        self.types[key] = info
        if metadata:
            self.structs[name] = ir.StructType(tuple(ir.StructField(n, ft) for n, ft in fields.values()))
        else:
            hfields = tuple(header_field(n, ft) for n, ft in fields.values())
            self.headers[name] = ir.HeaderType(hfields, sum(f.w for f in hfields if not f.varbit))
        return info

    @staticmethod
    def varbit_max(t: dict[str, Any], path: str) -> int:
        """The most bits of a header type's variable-length field: BMv2 gives the header's whole
        ``max_length`` in bytes, the fixed fields included (p4c's ``varbit<N>`` in a struct becomes a
        header type ``struct$varbitN`` of that one field)."""
        widths = [f[1] for f in t.get("fields", [])]
        if widths.count(VARIABLE) > 1:
            raise BMv2JsonError(path, "a header type with more than one variable-length field")
        fixed = sum(w for w in widths if w != VARIABLE)
        max_length = t.get("max_length")
        if not isinstance(max_length, int) or isinstance(max_length, bool) or 8 * max_length < fixed:
            raise BMv2JsonError(path, f"a variable-length field needs the header type's max_length "
                                      f"(bytes, at least its fixed {fixed} bits), got {max_length!r}")
        return 8 * max_length - fixed

    def struct_of(self, t: dict[str, Any], name: str) -> ir.StructType:
        """standard_metadata's struct: BMv2's fields but its byte padding."""
        info = HeaderTypeInfo(name, {})
        out = []
        for f in t.get("fields", []):
            if f[0].startswith("_padding"):
                continue
            ft: ir.Type = ir.TBit(f[1])
            info.fields[f[0]] = (f[0], ft)
            out.append(ir.StructField(f[0], ft))
        self.types[t["name"] + "/sm"] = info
        self.sm_info = info
        return ir.StructType(tuple(out))

    # --------------------------------------------------------------------------------- references
    def instance(self, name: str, path: str) -> ir.Expr:
        """The IR lvalue of a header (or metadata) instance."""
        try:
            return self.instances[name]
        except KeyError:
            raise BMv2JsonError(path, f"unknown header instance {name!r}") from None

    def info_of(self, name: str, path: str) -> HeaderTypeInfo:
        """The field names and types of an instance."""
        if name == STANDARD_METADATA:
            return self.sm_info
        base = self.instance(name, path)
        tname = self.instance_types[name]
        return self.types[tname + ("/m" if isinstance(base.type, ir.TStruct) else "/h")]

    def field(self, name: str, fname: str, path: str) -> ir.Expr:
        """``["inst", "field"]``: the field's lvalue (``$valid$``: the validity bit, read only)."""
        base = self.instance(name, path)
        if fname == "$valid$":
            return ir.Cast(ir.IsValid(base, ir.TBool()), ir.TBit(1))
        info = self.info_of(name, path)
        try:
            member, t = info.fields[fname]
        except KeyError:
            raise BMv2JsonError(path, f"header instance {name} has no field {fname!r}") from None
        return ir.Member(base, member, t)

    def field_at(self, header: ir.Expr, offset: int, path: str) -> ir.Expr:
        """Field number ``offset`` of a header expression (``access_field``)."""
        t = header.type
        assert isinstance(t, ir.THeader)
        fields = self.headers[t.name].fields
        if not 0 <= offset < len(fields):
            raise BMv2JsonError(path, f"header {t.name} has no field number {offset}")
        f = fields[offset]
        return ir.Member(header, f.name, field_type(f))

    def field_named(self, header: ir.Expr, fname: str, path: str) -> ir.Expr:
        """Field ``fname`` (its BMv2 name) of a header expression."""
        t = header.type
        info = next((i for i in self.types.values() if i.name == getattr(t, "name", None)), None)
        if not isinstance(t, ir.THeader) or info is None or fname not in info.fields:
            raise BMv2JsonError(path, f"no field {fname!r} in {t}")
        member, ft = info.fields[fname]
        return ir.Member(header, member, ft)

    def stack(self, name: str, path: str) -> ir.Expr:
        try:
            return self.stacks[name]
        except KeyError:
            raise BMv2JsonError(path, f"unknown header stack {name!r}") from None

    def stack_field(self, stack: str, index: int, fname: str, path: str) -> ir.Expr:
        """Field ``fname`` of element ``index`` of a stack."""
        tname, _ = self.stack_types[stack]
        info = self.types[tname + "/h"]
        member, t = info.fields[fname]
        elem = ir.Index(self.stack(stack, path), index, ir.THeader(info.name))
        return ir.Member(elem, member, t)


def header_field(name: str, t: ir.Type) -> ir.HeaderField:
    """A header type's field of IR type ``t``; a varbit holds up to ``t.max`` bits."""
    if isinstance(t, ir.TVarbit):
        return ir.HeaderField(name, t.max, varbit=True)
    return ir.HeaderField(name, ir.width(t), isinstance(t, ir.TInt))


def field_type(f: ir.HeaderField) -> ir.Type:
    """The IR type of a header type's field (``header_field`` backwards)."""
    if f.varbit:
        return ir.TVarbit(f.w)
    return ir.TInt(f.w) if f.signed else ir.TBit(f.w)
