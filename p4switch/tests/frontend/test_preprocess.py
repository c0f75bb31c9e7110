"""The preprocessor: includes, object-like macros, conditionals, -D, and positions back into the sources."""

from __future__ import annotations

from pathlib import Path

import pytest

from p4switch.frontend.errors import P4Error, Pos
from p4switch.frontend.preprocess import P4INCLUDE, preprocess


def write(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path / next(iter(files))


def lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def test_includes_quoted_relative_then_angle_from_dirs(tmp_path: Path) -> None:
    main = write(
        tmp_path,
        {
            "src/main.p4": '#include "sub/a.p4"\n#include <b.p4>\nmain_line;\n',
            "src/sub/a.p4": "a_line;\n",
            "inc/b.p4": "b_line;\n",
        },
    )
    text, smap = preprocess(main, [tmp_path / "inc"])
    assert lines(text) == ["a_line;", "b_line;", "main_line;"]
    out = text.splitlines()
    assert smap.pos(out.index("a_line;") + 1, 1) == Pos(str(tmp_path / "src/sub/a.p4"), 1, 1)
    assert smap.pos(out.index("main_line;") + 1, 6) == Pos(str(main), 3, 6)


def test_angle_include_falls_back_to_our_p4include(tmp_path: Path) -> None:
    main = write(tmp_path, {"main.p4": "#include <v1model.p4>\n#include <core.p4>\n"})
    text, _ = preprocess(main)
    assert "extern packet_in" in text and "standard_metadata_t" in text
    assert text.count("extern packet_in") == 1  # include guard of core.p4
    assert (P4INCLUDE / "v1model.p4").is_file()


def test_object_like_macros_expand_recursively_but_not_in_strings(tmp_path: Path) -> None:
    main = write(
        tmp_path,
        {"m.p4": '#define A 1\n#define B (A + A)\nx = B; y = "B"; z = B_C; w = 8wB;\n#undef A\nv = A;\n'},
    )
    text, _ = preprocess(main)
    assert lines(text) == ['x = (1 + 1); y = "B"; z = B_C; w = 8wB;', "v = A;"]


def test_conditionals_and_command_line_defines(tmp_path: Path) -> None:
    src = """#ifdef FAST
fast;
#elif defined(LEVEL) && LEVEL >= 2
level2;
#else
slow;
#endif
#ifndef FAST
#if !defined(FAST) || 0
not_fast;
#endif
#endif
"""
    main = write(tmp_path, {"c.p4": src})
    assert lines(preprocess(main)[0]) == ["slow;", "not_fast;"]
    assert lines(preprocess(main, defines={"FAST": "1"})[0]) == ["fast;"]
    assert lines(preprocess(main, defines={"LEVEL": "3"})[0]) == ["level2;", "not_fast;"]
    assert lines(preprocess(main, defines={"LEVEL": "1"})[0]) == ["slow;", "not_fast;"]


def test_comments_do_not_hide_or_shift_code(tmp_path: Path) -> None:
    main = write(tmp_path, {"k.p4": "/* #include <nothing>\n */ a; // #define X\nb; /* c */ d;\n"})
    text, smap = preprocess(main)
    assert lines(text) == ["a;", "b;         d;"]
    out = text.splitlines()
    assert smap.pos(2, out[1].index("a") + 1) == Pos(str(main), 2, 5)
    assert smap.pos(3, out[2].index("d") + 1) == Pos(str(main), 3, 12)


def test_columns_after_a_macro_map_to_the_source(tmp_path: Path) -> None:
    main = write(tmp_path, {"p.p4": "#define LONG_NAME 0x0800\n  t = LONG_NAME + x;\n"})
    text, smap = preprocess(main)
    out = text.splitlines()[1]
    assert out == "  t = 0x0800 + x;"
    assert smap.pos(2, out.index("0x0800") + 3) == Pos(str(main), 2, 7)  # inside the expansion: the use
    assert smap.pos(2, out.rindex("x") + 1) == Pos(str(main), 2, 19)


@pytest.mark.parametrize(
    ("src", "where", "message"),
    [
        ('#include "missing.p4"\n', (1, 1), 'error: cannot find include file "missing.p4"'),
        ("#define F(x) x\n", (1, 1), "function-like macro is not supported by p4switch"),
        ("#ifdef A\n", (1, 1), "error: unterminated #if/#ifdef at end of file"),
        ("ok;\n  #endif\n", (2, 3), "error: #endif without #if"),
        ("#error stop here\n", (1, 1), "error: #error stop here"),
        ("#if 1 +\n#endif\n", (1, 1), "error: cannot evaluate #if expression '1 +'"),
    ],
)
def test_bad_directives(tmp_path: Path, src: str, where: tuple[int, int], message: str) -> None:
    main = write(tmp_path, {"bad.p4": src})
    with pytest.raises(P4Error) as info:
        preprocess(main)
    assert (info.value.pos.file, info.value.pos.line, info.value.pos.col) == (str(main), *where)
    assert info.value.message == message


def test_cli_include_dirs_and_defines(tmp_path: Path) -> None:
    """-I and -D reach the preprocessor: the same source compiles to different programs."""
    import json

    from p4switch.frontend.cli import main
    from p4switch.tests.frontend.conftest import TEMPLATE

    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "ports.p4").write_text("#ifndef OUT_PORT\n#define OUT_PORT 1\n#endif\n")
    body = "    apply { sm.egress_spec = OUT_PORT; }"
    prog = tmp_path / "p.p4"
    prog.write_text("#include <ports.p4>\n" + TEMPLATE.replace("{BODY}", body))
    ports = []
    for extra in ([], ["-D", "OUT_PORT=7"]):
        out = tmp_path / "p.json"
        assert main([str(prog), "-o", str(out), "-I", str(tmp_path / "inc"), *extra]) == 0
        ingress = next(c for c in json.loads(out.read_text())["controls"] if c["name"] == "I")
        ports.append(ingress["body"][0]["rhs"]["value"])
    assert ports == [1, 7]
