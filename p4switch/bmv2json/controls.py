"""BMv2 pipelines (tables and conditionals in a graph) as IR controls with structured bodies.

A pipeline is a DAG of tables and conditionals from ``init_table`` to the end (``null``). Each node's
branches meet again at its immediate post-dominator, so the body is built region by region: the node,
its branches up to that meeting point (an ``if`` for a conditional or a table's ``__HIT__``/``__MISS__``,
a ``switch`` on the action run for a table whose next node depends on the action), then the meeting point
onwards. Every path of the graph is one path of the body, in the same order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from p4switch import ir
from p4switch.bmv2json.errors import BMv2JsonError, Unsupported, source_position, where
from p4switch.bmv2json.expressions import BOOL, Context, Expressions, hexstr
from p4switch.bmv2json.layout import Layout
from p4switch.bmv2json.parsers import block_params

END = "\0end"


@dataclass
class Pipeline:
    """One BMv2 pipeline: its nodes by name and their successors."""

    doc: dict[str, Any]
    exprs: Expressions
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    conditionals: dict[str, dict[str, Any]] = field(default_factory=dict)
    ipdom: dict[str, str] = field(default_factory=dict)
    action_names: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.tables = {t["name"]: t for t in self.doc.get("tables", [])}
        self.conditionals = {c["name"]: c for c in self.doc.get("conditionals", [])}
        self.path = f"pipelines ({self.doc.get('name')})"

    def successors(self, node: str) -> list[str]:
        if node in self.conditionals:
            c = self.conditionals[node]
            nexts = [c.get("true_next"), c.get("false_next")]
        elif node in self.tables:
            nexts = list(self.table_nexts(self.tables[node]).values())
        else:
            raise BMv2JsonError(self.path, f"unknown next node {node!r}")
        return [END if n is None else str(n) for n in nexts]

    @staticmethod
    def table_nexts(t: dict[str, Any]) -> dict[str, Any]:
        nexts = dict(t.get("next_tables") or {})
        if not nexts:
            return {"": t.get("base_default_next")}
        return nexts

    def post_dominators(self, start: str) -> None:
        """ipdom of every node reachable from ``start`` (the graph must be acyclic)."""
        pdom: dict[str, list[str]] = {END: [END]}  # a node's post-dominators, nearest first
        state: dict[str, int] = {}

        def visit(node: str) -> list[str]:
            if node in pdom:
                return pdom[node]
            if state.get(node) == 1:
                raise BMv2JsonError(self.path, f"the control flow loops at {node}")
            state[node] = 1
            chains = [visit(s) for s in self.successors(node)]
            common = [n for n in chains[0] if all(n in c for c in chains[1:])]
            pdom[node] = [node, *common]
            self.ipdom[node] = common[0]
            state[node] = 2
            return pdom[node]

        visit(start)

    def body(self, node: str, stop: str) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        while node not in (stop, END):
            ip = self.ipdom[node]
            out.append(self.node(node, ip))
            node = ip
        return tuple(out)

    def node(self, name: str, ip: str) -> ir.Stmt:
        if name in self.conditionals:
            c = self.conditionals[name]
            at = f"{self.path}.conditionals ({name})"
            cond = self.exprs.boolean(self.exprs.expr(c["expression"], Context(), at))
            then, else_ = (
                self.body(END if n is None else str(n), ip) for n in (c.get("true_next"), c.get("false_next"))
            )
            return ir.If(cond, then, else_, source_position(c))
        t = self.tables[name]
        src = source_position(t)
        nexts = {k: END if v is None else str(v) for k, v in self.table_nexts(t).items()}
        if set(nexts.values()) <= {ip}:
            return ir.Apply(name, src)
        if "__HIT__" in nexts or "__MISS__" in nexts:
            hit = self.body(nexts.get("__HIT__", ip), ip)
            miss = self.body(nexts.get("__MISS__", ip), ip)
            return ir.If(ir.TableHit(name, BOOL), hit, miss, src)
        groups: dict[str, list[str]] = {}
        for action, target in nexts.items():
            groups.setdefault(target, []).append(action)
        cases = tuple(
            ir.SwitchCase(tuple(acts), self.body(target, ip))
            for target, acts in groups.items()
            if target != ip
        )
        return ir.Switch(name, cases, src)


def control(doc: dict[str, Any], exprs: Expressions, name: str) -> ir.Control:
    """A pipeline as a control named ``name`` (tables are built by TableBuilder)."""
    p = Pipeline(doc, exprs)
    start = doc.get("init_table")
    body: tuple[ir.Stmt, ...] = ()
    if start is not None:
        p.post_dominators(str(start))
        body = p.body(str(start), END)
    return ir.Control(name, source_position(doc), block_params(None), (), body)


@dataclass
class TableBuilder:
    """The tables, action profiles and direct externs of every pipeline."""

    layout: Layout
    exprs: Expressions
    actions_by_id: dict[int, str]
    doc: dict[str, Any]
    tables: list[ir.Table] = field(default_factory=list)
    externs: list[ir.ExternInstance] = field(default_factory=list)
    direct_meter_reads: dict[str, tuple[str, ir.Expr]] = field(default_factory=dict)  # action -> (meter, dst)
    needs_noaction: bool = False

    def pipeline(self, pl: dict[str, Any], control_name: str) -> None:
        profiles = {ap["name"]: ap for ap in pl.get("action_profiles", [])}
        users: dict[str, list[str]] = {}
        for t in pl.get("tables", []):
            if t.get("action_profile"):
                users.setdefault(t["action_profile"], []).append(t["name"])
        for name, ap in profiles.items():
            self.externs.append(self.profile(ap, tuple(users.get(name, ()))))
        for t in pl.get("tables", []):
            self.tables.append(self.table(t, control_name, profiles))

    def profile(self, ap: dict[str, Any], tables: tuple[str, ...]) -> ir.ExternInstance:
        src = source_position(ap)
        sel = ap.get("selector")
        if sel is None:
            return ir.ActionProfile(ap["name"], int(ap.get("max_size", 0)), tables, src)
        return ir.ActionSelector(
            ap["name"], str(sel.get("algo")), int(ap.get("max_size", 0)), 0, 0, tables, src
        )

    def table(self, t: dict[str, Any], control_name: str, profiles: dict[str, Any]) -> ir.Table:
        name = t["name"]
        path = where(t, f"tables ({name})")
        keys = [self.key(k, path) for k in t.get("key", [])]
        ap = profiles.get(t.get("action_profile") or "")
        if ap is not None and ap.get("selector"):
            for i, item in enumerate(ap["selector"].get("input", [])):
                e = self.exprs.expr(item, Context(), path)
                keys.append(ir.TableKey(f"$selector{i}", "selector", e.type, e))
        action_names = [self.action_name(a, path) for a in t.get("action_ids", [])]
        refs = tuple(ir.ActionRef(a) for a in action_names)
        default = self.default(t, path, action_names)
        if default.name not in action_names:
            refs += (ir.ActionRef(default.name, "default_only"),)
        entries = self.entries(t, keys, path)
        return ir.Table(
            name,
            control_name,
            source_position(t),
            tuple(keys),
            refs,
            default,
            entries,
            bool(entries),
            int(t.get("max_size", 0)),
            self.direct_counter(t),
            self.direct_meter(t, action_names, path),
            t.get("action_profile") or None,
            bool(t.get("support_timeout")),
        )

    def action_name(self, action_id: Any, path: str) -> str:
        try:
            return self.actions_by_id[int(action_id)]
        except (KeyError, ValueError, TypeError):
            raise BMv2JsonError(path, f"no action with id {action_id!r}") from None

    def key(self, k: dict[str, Any], path: str) -> ir.TableKey:
        kind = k.get("match_type")
        target = k.get("target")
        if kind == "valid":
            e: ir.Expr = ir.IsValid(self.layout.instance(str(target), path), BOOL)
            kind = "exact"
            default_name = f"{target}.$valid$"
        elif isinstance(target, list) and len(target) == 2:
            e = self.layout.field(target[0], target[1], path)
            default_name = f"{target[0]}.{target[1]}"
        elif isinstance(target, dict):
            e = self.exprs.expr(target, Context(), path)
            default_name = str(k.get("name"))
        else:
            raise Unsupported(path, "a table key that is not a field")
        if kind not in ("exact", "lpm", "ternary", "range", "optional"):
            raise Unsupported(path, f"match kind {kind}")
        if k.get("mask") is not None:
            m = hexstr(k["mask"], path)
            e = ir.Binary("&", e, ir.Const(m & ((1 << ir.width(e.type)) - 1), e.type), e.type)
        return ir.TableKey(str(k.get("name") or default_name), str(kind), e.type, e)

    def default(self, t: dict[str, Any], path: str, action_names: list[str]) -> ir.DefaultAction:
        d = t.get("default_entry")
        if d is None:
            self.needs_noaction = "NoAction" not in action_names
            return ir.DefaultAction("NoAction")
        args = tuple(hexstr(v, path) for v in d.get("action_data", []))
        return ir.DefaultAction(self.action_name(d.get("action_id"), path), args, bool(d.get("action_const")))

    def entries(self, t: dict[str, Any], keys: list[ir.TableKey], path: str) -> tuple[ir.Entry, ...]:
        rows = t.get("entries") or []
        prios = [int(e["priority"]) for e in rows if e.get("priority") is not None]
        top = max(prios, default=0) + 1
        out = []
        matched = [k for k in keys if k.match != "selector"]
        for i, e in enumerate(rows):
            at = where(e, f"{path}.entries[{i}]")
            match = tuple(
                self.entry_match(m, k, at) for m, k in zip(e.get("match_key", []), matched, strict=True)
            )
            act = e.get("action_entry") or {}
            action = ir.EntryAction(
                self.action_name(act.get("action_id"), at),
                tuple(hexstr(v, at) for v in act.get("action_data", [])),
            )
            priority = top - int(e["priority"]) if e.get("priority") is not None else 0
            out.append(ir.Entry(match, action, priority, source_position(e)))
        return tuple(out)

    @staticmethod
    def entry_match(m: dict[str, Any], k: ir.TableKey, path: str) -> ir.EntryMatch:
        kind = m.get("match_type")
        if kind == "valid":
            return ir.MatchExact(int(bool(m.get("key"))))
        if kind == "exact":
            return ir.MatchExact(hexstr(m["key"], path))
        if kind == "lpm":
            return ir.MatchLpm(hexstr(m["key"], path), int(m["prefix_length"]))
        if kind == "ternary":
            return ir.MatchTernary(hexstr(m["key"], path), hexstr(m["mask"], path))
        if kind == "range":
            return ir.MatchRange(hexstr(m["start"], path), hexstr(m["end"], path))
        if kind == "optional":
            return ir.MatchOptional(hexstr(m["key"], path))
        raise Unsupported(path, f"entry match kind {kind}")

    def direct_counter(self, t: dict[str, Any]) -> str | None:
        for c in self.doc.get("counter_arrays", []):
            if c.get("is_direct") and c.get("binding") == t["name"]:
                return str(c["name"])
        if t.get("with_counters"):
            raise BMv2JsonError(f"tables ({t['name']})", "with_counters but no direct counter bound to it")
        return None

    def direct_meter(self, t: dict[str, Any], action_names: list[str], path: str) -> str | None:
        name = t.get("direct_meters")
        if not name:
            return None
        meter = next((m for m in self.doc.get("meter_arrays", []) if m["name"] == name), None)
        if meter is None or not meter.get("result_target"):
            raise BMv2JsonError(path, f"direct meter {name} without a result_target")
        dst = self.layout.field(meter["result_target"][0], meter["result_target"][1], path)
        for a in action_names:
            if a in self.direct_meter_reads and self.direct_meter_reads[a][0] != name:
                raise Unsupported(path, f"action {a} in tables of different direct meters")
            self.direct_meter_reads[a] = (str(name), dst)
        return str(name)


def externs(doc: dict[str, Any], tables: list[ir.Table]) -> list[ir.ExternInstance]:
    """Counters, meters and registers (indirect and direct); other extern instances are refused."""
    out: list[ir.ExternInstance] = []
    for c in doc.get("counter_arrays", []):
        src = source_position(c)
        if c.get("is_direct"):
            out.append(ir.DirectCounter(c["name"], "both", c.get("binding"), src))
        else:
            out.append(ir.Counter(c["name"], int(c.get("size", 0)), "both", src))
    for m in doc.get("meter_arrays", []):
        src = source_position(m)
        unit = "bytes" if m.get("type") == "bytes" else "packets"
        if int(m.get("rate_count", 2)) != 2:
            raise Unsupported(where(m, f"meter_arrays ({m['name']})"), "a meter of other than two rates")
        if m.get("is_direct"):
            out.append(ir.DirectMeter(m["name"], unit, m.get("binding"), ir.TBit(32), src))
        else:
            out.append(ir.Meter(m["name"], int(m.get("size", 0)), unit, src))
    for r in doc.get("register_arrays", []):
        out.append(
            ir.Register(
                r["name"], int(r.get("size", 0)), ir.TBit(int(r.get("bitwidth", 1))), source_position(r)
            )
        )
    for e in doc.get("extern_instances", []):
        raise Unsupported(where(e, f"extern_instances ({e.get('name')})"), f"extern {e.get('type')}")
    return out
