"""Bad P4 source comes back as `file:line:col: message` pointing into the user's file, with exit code 1."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from p4switch.frontend.cli import main
from p4switch.frontend.errors import P4Error
from p4switch.tests.frontend.conftest import BODY_LINE, TEMPLATE

ErrorOf = Callable[[str], P4Error]


def where(err: P4Error) -> tuple[str, int, int]:
    return Path(err.pos.file).name, err.pos.line, err.pos.col


def test_header_union_member_that_is_not_a_header(compile_error: Callable[..., P4Error]) -> None:
    src = TEMPLATE.replace("struct meta_t", "header_union u_t { eth_t a; bit<8> b; }\nstruct meta_t").replace(
        "{BODY}", "apply {}"
    )
    err = compile_error(src)
    assert where(err) == ("prog.p4", 5, 29)
    assert err.message == "error: header_union u_t: b is not a header"
    assert str(err).endswith("prog.p4:5:29: error: header_union u_t: b is not a header")


def test_two_varbit_fields_in_a_header(compile_error: Callable[..., P4Error]) -> None:
    src = TEMPLATE.replace("bit<16> type_; }", "bit<16> type_; varbit<32> a; varbit<8> b; }").replace(
        "{BODY}", "apply {}"
    )
    err = compile_error(src)
    assert where(err) == ("prog.p4", 3, 8)
    assert err.message == "error: header eth_t has more than one varbit field"


def test_resubmit_needs_a_constant_field_list(ingress_error: ErrorOf) -> None:
    """(resubmit itself runs: the conformance case resubmit_recirculate)"""
    err = ingress_error("    apply {\n        resubmit_preserving_field_list(meta.m8);\n    }")
    assert where(err) == ("prog.p4", BODY_LINE + 1, 40)
    assert err.message == "error: the field list index must be a constant"


def test_unknown_name(ingress_error: ErrorOf) -> None:
    err = ingress_error("    apply {\n        meta.m8 = nosuch + 1;\n    }")
    assert where(err) == ("prog.p4", BODY_LINE + 1, 19)
    assert err.message == "error: unknown name nosuch"


def test_unknown_field(ingress_error: ErrorOf) -> None:
    err = ingress_error("    apply { meta.m9 = 1; }")
    assert where(err) == ("prog.p4", BODY_LINE, 18)
    assert err.message == "error: struct meta_t has no field m9"


def test_width_mismatch_in_assignment(ingress_error: ErrorOf) -> None:
    err = ingress_error("    apply {\n        meta.m8 = meta.m16;\n    }")
    assert where(err) == ("prog.p4", BODY_LINE + 1, 19)
    assert err.message == "error: expected bit<8>, got bit<16>"


def test_width_mismatch_in_operator(ingress_error: ErrorOf) -> None:
    err = ingress_error("    apply { meta.m16 = meta.m16 + meta.m8; }")
    assert where(err) == ("prog.p4", BODY_LINE, 24)
    assert err.message == "error: +: cannot operate on bit<16> and bit<8>"


def test_action_data_width_in_default_action(ingress_error: ErrorOf) -> None:
    err = ingress_error(
        "    action a(bit<8> x) { meta.m8 = x; }\n"
        "    table t { key = { hdr.eth.dst: exact; } actions = { a; } default_action = a(16w3); }\n"
        "    apply { t.apply(); }"
    )
    assert where(err) == ("prog.p4", BODY_LINE + 1, 81)
    assert err.message == "error: expected bit<8>, got bit<16>"


def test_unknown_match_kind(ingress_error: ErrorOf) -> None:
    err = ingress_error(
        "    table t { key = { hdr.eth.dst: fuzzy; } actions = { NoAction; } }\n    apply { t.apply(); }"
    )
    assert where(err) == ("prog.p4", BODY_LINE, 36)
    assert err.message == "error: unknown match kind fuzzy"


def test_extern_method_signature(ingress_error: ErrorOf) -> None:
    err = ingress_error("    register<bit<8>>(4) r;\n    apply { r.read(meta.m16, 0); }")
    assert where(err) == ("prog.p4", BODY_LINE + 1, 20)
    assert err.message == "error: result must be bit<8>, got bit<16>"


def test_syntax_error(ingress_error: ErrorOf) -> None:
    err = ingress_error("    apply { meta.m8 = ; }")
    assert where(err) == ("prog.p4", BODY_LINE, 23)
    assert err.message == "error: syntax error, unexpected ';'"


def test_missing_include(compile_error: Callable[..., P4Error]) -> None:
    err = compile_error('#include <core.p4>\n  #include "nowhere.p4"\n')
    assert where(err) == ("prog.p4", 2, 3)
    assert err.message == 'error: cannot find include file "nowhere.p4"'


def test_error_inside_an_included_file_points_into_it(compile_error: Callable[..., P4Error]) -> None:
    lib = "// helpers\nconst bit<8> OK = 1;\nconst bit<8> BAD = 8w1 + 16w1;\n"
    err = compile_error(
        '#include "lib/helpers.p4"\n' + TEMPLATE.replace("{BODY}", "apply {}"), {"lib/helpers.p4": lib}
    )
    assert where(err) == ("helpers.p4", 3, 20)
    assert err.message == "error: +: cannot operate on bit<8> and bit<16>"


@pytest.mark.parametrize(
    ("macro", "col", "message"),
    [
        ("16w0xFFFF", 23, "error: expected bit<8>, got bit<16>"),
        ("8w0xFF", 34, "error: struct meta_t has no field m9"),
    ],
)
def test_positions_through_a_macro(
    compile_error: Callable[..., P4Error], macro: str, col: int, message: str
) -> None:
    """An error inside an expansion points at the macro's use; one after it keeps its own source column."""
    src = f"#define WIDE {macro}\n" + TEMPLATE.replace("{BODY}", "    apply { meta.m8 = WIDE; meta.m9 = 0; }")
    err = compile_error(src)
    assert where(err) == ("prog.p4", BODY_LINE + 1, col)
    assert err.message == message


def test_cli_prints_the_error_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prog = tmp_path / "bad.p4"
    prog.write_text(TEMPLATE.replace("{BODY}", "    apply { meta.m8 = undefined_thing; }"))
    out = tmp_path / "bad.json"
    assert main([str(prog), "-o", str(out), "--p4runtime-files", str(tmp_path / "bad.txtpb")]) == 1
    assert capsys.readouterr().err == f"{prog}:{BODY_LINE}:23: error: unknown name undefined_thing\n"
    assert not out.exists()


@pytest.mark.parametrize(
    ("body", "col", "message"),
    [
        (
            "    action a(bit<8> x) { x = 1; }\n"
            "    table t { key = { hdr.eth.dst: exact; } actions = { a; } }\n"
            "    apply { t.apply(); }",
            26,
            "error: the left side of an assignment must be an lvalue",
        ),
        ("    action a() { }\n    action a() { }\n    apply { }", 12, "error: duplicate declaration of a"),
        ("    apply { bit<8> v = 1; bit<8> v = 2; }", 34, "error: duplicate declaration of v"),
        ("    apply { if (meta.m8) { exit; } }", 17, "error: if condition must be bool, got bit<8>"),
        ("    apply { meta.m8 = hdr.eth.dst[48:1]; }", 23, "error: slice [48:1] out of range for bit<48>"),
        ("    apply { meta.m8 = 8w1 << -1; }", 23, "error: <<: the shift amount must be unsigned, got int"),
        (
            "    table t { key = { hdr.eth.dst: exact; } actions = { NoAction; } }\n"
            "    action a() { t.apply(); }\n"
            "    apply { a(); }",
            18,
            "error: table I.t cannot be applied inside an action",
        ),
    ],
)
def test_type_errors(ingress_error: ErrorOf, body: str, col: int, message: str) -> None:
    err = ingress_error(body)
    assert err.message == message
    assert err.pos.col == col


def test_deparser_in_parameter_is_read_only(compile_error: Callable[..., P4Error]) -> None:
    src = TEMPLATE.replace("apply { pk.emit(hdr); }", "apply { hdr.eth.type_ = 1; pk.emit(hdr); }")
    err = compile_error(src.replace("{BODY}", "apply { }"))
    assert where(err) == ("prog.p4", 14, 54)
    assert err.message == "error: the left side of an assignment must be an lvalue"


def test_p4info_output_format_follows_the_extension(tmp_path: Path) -> None:
    from finsy.proto import p4i
    from google.protobuf import json_format, text_format

    prog = tmp_path / "ok.p4"
    prog.write_text(TEMPLATE.replace("{BODY}", "apply { }"))
    for ext in ("txt", "json", "bin"):
        assert (
            main(
                [str(prog), "-o", str(tmp_path / "ok.json"), "--p4runtime-files", str(tmp_path / f"i.{ext}")]
            )
            == 0
        )
    text = text_format.Parse((tmp_path / "i.txt").read_text(), p4i.P4Info())
    assert json_format.Parse((tmp_path / "i.json").read_text(), p4i.P4Info()) == text
    assert p4i.P4Info.FromString((tmp_path / "i.bin").read_bytes()) == text
    assert text.pkg_info.arch == "v1model"


def test_width_of_a_literal_expression_that_cannot_be_inferred(ingress_error: ErrorOf) -> None:
    err = ingress_error("    apply { meta.m8 = (bit<8>) ((hdr.eth.isValid() ? 1 : 2) + 1); }")
    assert err.message == "error: +: cannot infer the width of an integer expression; give it a width"
    assert where(err) == ("prog.p4", BODY_LINE, 33)


def test_stack_next_outside_a_parser(compile_error: Callable[..., P4Error]) -> None:
    src = TEMPLATE.replace("struct headers_t { eth_t eth; }", "struct headers_t { eth_t eth; eth_t[2] s; }")
    err = compile_error(src.replace("{BODY}", "    apply { hdr.s.next.type_ = 1; }"))
    assert (err.pos.line, err.pos.col, err.message) == (
        BODY_LINE,
        19,
        "header stack .next outside a parser is not supported by p4switch",
    )


@pytest.mark.parametrize(
    ("edit", "where_", "message"),
    [
        (
            ("V1Switch(P(), C(), I(), E(), C(), D()) main;", ""),
            (1, 1),
            "error: the program has no `V1Switch(...) main;` instantiation",
        ),
        (
            ("V1Switch(P(), C(), I(), E(), C(), D())", "V1Switch(P(), C(), I(), E(), C())"),
            (15, 1),
            "error: V1Switch takes 6 arguments, got 5",
        ),
        (("bit<16> type_;", "ether_type_t type_;"), (3, 42), "error: unknown type ether_type_t"),
        (("transition accept;", "transition nowhere;"), (7, 51), "error: unknown parser state nowhere"),
    ],
)
def test_program_structure_errors(
    compile_error: Callable[..., P4Error], edit: tuple[str, str], where_: tuple[int, int], message: str
) -> None:
    err = compile_error(TEMPLATE.replace("{BODY}", "apply { }").replace(*edit))
    assert (err.pos.line, err.pos.col, err.message) == (*where_, message)


@pytest.mark.parametrize(
    ("function", "use", "where_", "message"),
    [
        (
            "void f(in bit<8> x) { }",
            "meta.m8 = f(meta.m8);",
            (BODY_LINE + 1, 23),
            "error: function f returns no value",
        ),
        (
            "bit<8> f(in bit<8> x) { x = 1; return x; }",
            "meta.m8 = f(meta.m8);",
            (5, 25),
            "error: the left side of an assignment must be an lvalue",
        ),
    ],
)
def test_function_errors(
    compile_error: Callable[..., P4Error], function: str, use: str, where_: tuple[int, int], message: str
) -> None:
    src = TEMPLATE.replace("struct meta_t", function + "\nstruct meta_t").replace(
        "{BODY}", f"    apply {{ {use} }}"
    )
    err = compile_error(src)
    assert (err.pos.line, err.pos.col, err.message) == (*where_, message)


def test_cli_reports_unwritable_outputs_and_missing_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prog = tmp_path / "ok.p4"
    prog.write_text(TEMPLATE.replace("{BODY}", "apply { }"))
    assert main([str(prog), "-o", str(tmp_path / "no" / "such" / "dir.json")]) == 1
    assert (
        capsys.readouterr().err
        == f"p4switch-cc: cannot write {tmp_path}/no/such/dir.json: No such file or directory\n"
    )
    assert main([str(tmp_path / "missing.p4")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{tmp_path}/missing.p4:1:1: error: cannot read") and "No such file" in err


def test_runtime_division_is_refused(ingress_error: ErrorOf) -> None:
    err = ingress_error("    apply { meta.m8 = meta.m8 / 3; }")
    assert where(err) == ("prog.p4", BODY_LINE, 23)
    assert err.message == "/ of values known only at run time is not supported by p4switch"


def test_hash_algorithms_the_engine_lacks_are_refused(ingress_error: ErrorOf) -> None:
    err = ingress_error("    action_selector(HashAlgorithm.crc16_custom, 32w64, 32w8) sel;\n    apply { }")
    assert where(err) == ("prog.p4", BODY_LINE, 21)
    assert err.message == "hash algorithm crc16_custom is not supported by p4switch"


def test_headers_are_whole_bytes(compile_error: Callable[..., P4Error]) -> None:
    err = compile_error(
        TEMPLATE.replace("bit<16> type_; }", "bit<12> type_; }").replace("{BODY}", "apply { }")
    )
    assert where(err) == ("prog.p4", 3, 8)
    assert err.message == "error: header eth_t is 108 bits wide, not whole bytes"


def test_subcontrol_with_a_table_applied_twice_is_refused(compile_error: Callable[..., P4Error]) -> None:
    """Its table exists once (p4c refuses such a program for BMv2); one without tables may be applied
    twice (the conformance case inlining)."""
    sub = (
        "control S(inout bit<8> x) {\n"
        "    table t { key = { x: exact; } actions = { NoAction; } }\n"
        "    apply { t.apply(); }\n"
        "}\n"
    )
    src = TEMPLATE.replace("control I(", sub + "control I(").replace(
        "{BODY}", "    S() s;\n    apply { s.apply(meta.m8); s.apply(meta.m8); }"
    )
    err = compile_error(src)
    assert (err.pos.line, err.pos.col) == (BODY_LINE + 5, 31)
    assert err.message == (
        "applying control instance I.s (with tables or externs) twice is not supported by p4switch"
    )


def test_action_bound_to_other_arguments_in_two_tables_is_refused(ingress_error: ErrorOf) -> None:
    """One IR action per P4Info action: bound alike in two tables it is shared, bound otherwise refused."""
    tables = "".join(
        f"    table t{i} {{ key = {{ meta.m8: exact; }} actions = {{ a({arg}); }} }}\n"
        for i, arg in ((1, "meta.m8"), (2, "meta.m8"), (3, "hdr.eth.type_[7:0]"))
    )
    action = "    action a(inout bit<8> v) { v = 1; }\n"
    body = action + tables + "    apply { t1.apply(); t2.apply(); t3.apply(); }"
    err = ingress_error(body)
    assert where(err) == ("prog.p4", BODY_LINE + 3, 54)
    assert err.message == "action I.a bound to other arguments elsewhere is not supported by p4switch"
