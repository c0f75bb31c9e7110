"""Resubmit and recirculate are bounded per received frame: a program that always asks for another pass
(BMv2 would loop forever) has the frame dropped after MAX_PASSES, counted; on both back ends (the native
one runs the passes in C, not through a fallback)."""

from __future__ import annotations

from pathlib import Path

import pytest

from p4switch.engine import loader
from p4switch.engine.api import MAX_PASSES
from p4switch.frontend import compile_file

PROGRAM = """#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type_; }
struct headers_t { eth_t eth; }
struct meta_t { @field_list(1) bit<8> n; }
parser P(packet_in pk, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); transition accept; }
}
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { sm.egress_spec = 1; meta.n = meta.n + 1; INGRESS }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { hdr.eth.type_ = (bit<16>) meta.n; EGRESS }
}
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pk, in headers_t hdr) { apply { pk.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
"""
FRAME = bytes(12) + b"\x88\xb5"


@pytest.mark.parametrize("engine", ["python", "native"])
@pytest.mark.parametrize(
    ("kind", "ingress", "egress"),
    [
        ("resubmit", "resubmit_preserving_field_list(1);", ""),
        ("recirculate", "", "recirculate_preserving_field_list(1);"),
        ("recirculate", "", "if (meta.n < 5) { recirculate_preserving_field_list(1); }"),
    ],
)
def test_passes_are_bounded_and_counted(tmp_path: Path, kind: str, ingress: str, egress: str,
                                        engine: str) -> None:
    source = tmp_path / "loop.p4"
    source.write_text(PROGRAM.replace("INGRESS", ingress).replace("EGRESS", egress))
    switch = loader.load(compile_file(source).program, engine=engine)
    assert switch.engine == engine, switch.engine_note
    out = switch.process(0, FRAME)
    if "meta.n < 5" in egress:  # four recirculations, then out with the count the field list kept
        assert out == [(1, bytes(12) + b"\x00\x05")]
        assert switch.stats[kind] == 4 and f"{kind}_limit" not in switch.stats
        return
    assert out == []
    assert switch.stats[kind] == MAX_PASSES and switch.stats[f"{kind}_limit"] == 1
    assert "internal_error" not in switch.stats
