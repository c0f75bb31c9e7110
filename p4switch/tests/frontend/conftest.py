"""Fixtures of the front-end tests: compile a program from text or from p4switch/tests/programs/."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from p4switch.frontend.cli import Compiled, compile_file
from p4switch.frontend.errors import P4Error

PROGRAMS = Path(__file__).resolve().parent.parent / "programs"
REPO = Path(__file__).resolve().parents[3]

# A complete v1model program with a hole (`{BODY}`) in the ingress control: most error tests only need
# a few lines of their own, and their positions are counted from this template's first line.
TEMPLATE = """#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type_; }
struct headers_t { eth_t eth; }
struct meta_t { bit<8> m8; bit<16> m16; }
parser P(packet_in pk, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); transition accept; }
}
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
{BODY}
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out pk, in headers_t hdr) { apply { pk.emit(hdr); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
"""
BODY_LINE = 11  # the line of {BODY} in TEMPLATE


@pytest.fixture
def compile_text(tmp_path: Path) -> Callable[..., Compiled]:
    """Compile P4 source text written to tmp_path/prog.p4 (extra files via `files`)."""

    def run(text: str, files: dict[str, str] | None = None, **kw: object) -> Compiled:
        for name, content in (files or {}).items():
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text(content)
        path = tmp_path / "prog.p4"
        path.write_text(text)
        return compile_file(path, **kw)  # type: ignore[arg-type]

    return run


@pytest.fixture
def compile_error(compile_text: Callable[..., Compiled]) -> Callable[..., P4Error]:
    """Compile text that must fail; return the P4Error."""

    def run(text: str, files: dict[str, str] | None = None, **kw: object) -> P4Error:
        with pytest.raises(P4Error) as info:
            compile_text(text, files, **kw)
        return info.value

    return run


@pytest.fixture
def ingress(compile_text: Callable[..., Compiled]) -> Callable[[str], Compiled]:
    """Compile TEMPLATE with `body` as the ingress control's declarations and apply block."""
    return lambda body: compile_text(TEMPLATE.replace("{BODY}", body))


@pytest.fixture
def ingress_error(compile_error: Callable[..., P4Error]) -> Callable[[str], P4Error]:
    return lambda body: compile_error(TEMPLATE.replace("{BODY}", body))


@pytest.fixture(scope="session")
def features() -> Compiled:
    return compile_file(PROGRAMS / "features.p4")


@pytest.fixture(scope="session")
def l2fwd() -> Compiled:
    return compile_file(PROGRAMS / "l2fwd.p4")
