"""Constant folding agrees with run-time evaluation: random bit<8>/int<8> expressions are compiled twice,
once over constants (folded by the front end) and once over header fields (computed by the engine), and
a packet carrying the same values must give the same bytes for every expression."""

from __future__ import annotations

import random
from collections.abc import Callable

from p4switch.engine import loader
from p4switch.frontend.cli import Compiled

VALUES = {"a": 200, "b": 77, "c": -100, "d": 3}  # a, b: bit<8>; c, d: int<8>
OPS = ["+", "-", "*", "&", "|", "^", "|+|", "|-|"]


class ExprGen:
    """Random typed P4 expressions; `operand` decides how a, b, c, d are written."""

    def __init__(self, rng: random.Random, operand: Callable[[str], str]) -> None:
        self.rng, self.operand = rng, operand

    def leaf(self, t: str) -> str:
        r = self.rng.random()
        if r < 0.7:
            return self.operand(("a" if r < 0.35 else "b") if t == "bit" else ("c" if r < 0.35 else "d"))
        return f"8{'w' if t == 'bit' else 's'}{self.rng.randrange(128)}"

    def expr(self, t: str, depth: int) -> str:
        if depth == 0 or self.rng.random() < 0.2:
            return self.leaf(t)
        sub, rng = (lambda tt=t: self.expr(tt, depth - 1)), self.rng
        other = "int" if t == "bit" else "bit"
        kind = rng.randrange(8)
        if kind < 3:
            return f"({sub()} {rng.choice(OPS)} {sub()})"
        if kind == 3:
            return f"({sub()} {rng.choice(['<<', '>>'])} {rng.randrange(10)})"
        if kind == 4:
            return f"({rng.choice(['~', '-'])}{sub()})"
        if kind == 5:
            cmp, ct = rng.choice(["<", ">", "<=", ">=", "==", "!="]), rng.choice(["bit", "int"])
            return f"(({sub(ct)} {cmp} {sub(ct)}) ? {sub()} : {sub()})"
        if kind == 6:
            wide = (
                f"(({t}<16>) {sub()})" if rng.random() < 0.5 else f"(({t}<16>) (({other}<8>) {sub(other)}))"
            )
            return f"(({t}<8>) ({wide} * 16{'w' if t == 'bit' else 's'}{rng.randrange(300)}))"
        hi = rng.randrange(7, 16)
        return f"(({t}<8>) (({sub()} ++ {sub()})[{hi}:{hi - 7}]))"


def program(exprs: list[tuple[str, str, str]]) -> str:
    fields = "".join(f" bit<8> f{i}; bit<8> g{i};" for i in range(len(exprs)))
    body = "".join(
        f"        hdr.res.f{i} = (bit<8>) {folded};\n        hdr.res.g{i} = (bit<8>) {runtime};\n"
        for i, (_, folded, runtime) in enumerate(exprs)
    )
    return f"""#include <core.p4>
#include <v1model.p4>
const bit<8> A = {VALUES["a"]}; const bit<8> B = {VALUES["b"]};
const int<8> C = {VALUES["c"]}; const int<8> D = {VALUES["d"]};
header inp_t {{ bit<8> a; bit<8> b; int<8> c; int<8> d; }}
header res_t {{{fields} }}
struct headers_t {{ inp_t inp; res_t res; }}
struct meta_t {{ }}
parser P(packet_in pk, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {{
    state start {{ pk.extract(hdr.inp); transition accept; }}
}}
control N(inout headers_t hdr, inout meta_t m) {{ apply {{ }} }}
control I(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {{
    apply {{
        sm.egress_spec = 1;
        hdr.res.setValid();
{body}    }}
}}
control E(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {{ apply {{ }} }}
control Dep(packet_out pk, in headers_t hdr) {{ apply {{ pk.emit(hdr); }} }}
V1Switch(P(), N(), I(), E(), N(), Dep()) main;
"""


def test_folded_and_runtime_arithmetic_agree(compile_text: Callable[..., Compiled]) -> None:
    exprs = []
    for seed in range(60):
        t = "bit" if seed % 2 else "int"
        folded = ExprGen(random.Random(seed), str.upper).expr(t, 3)
        runtime = ExprGen(random.Random(seed), lambda v: f"hdr.inp.{v}").expr(t, 3)
        exprs.append((t, folded, runtime))
    prog = compile_text(program(exprs))
    ingress = next(c for c in prog.ir["controls"] if c["name"] == "I")
    folded_rhs = [s["rhs"] for s in ingress["body"][2::2]]
    assert all(r["op"] == "const" for r in folded_rhs)  # the front end folded every constant expression
    packet = bytes([VALUES["a"], VALUES["b"], VALUES["c"] & 0xFF, VALUES["d"] & 0xFF])
    ((_, out),) = loader.load(prog.ir_json().encode()).process(0, packet)
    results = out[4:]
    mismatches = [
        (expr[1], results[2 * i], results[2 * i + 1])
        for i, expr in enumerate(exprs)
        if results[2 * i] != results[2 * i + 1]
    ]
    assert not mismatches
