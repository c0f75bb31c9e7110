"""P4_16 arithmetic as the generated code computes it: wrap-around, two's complement, saturation, shifts,
slices, concatenation and casts (each expression is generated and evaluated on Python ints)."""

from __future__ import annotations

from typing import Any

import pytest

from p4switch import ir
from p4switch.engine.api import ProgramError
from p4switch.engine.codegen import Codegen, Scope
from p4switch.tests.engine.irbuild import (
    BOOL,
    binary,
    bit,
    cast,
    concat,
    const,
    program,
    sint,
    slice_,
    unary,
    var,
)


def evaluate(expr: dict[str, Any], **values: int) -> Any:
    """Generate the expression (written in its JSON form, read as the engine reads a program) and run it."""
    gen = Codegen(ir.from_json(program({}, [], [], [])))
    names = {name: name for name in values}
    source = gen.expr(ir.node_from_json(ir.Expr, expr), Scope(names, "test"))
    return eval(source, {}, dict(values))  # noqa: S307 - our generated code


def a(t: dict[str, Any]) -> dict[str, Any]:
    return var("a", t)


def b(t: dict[str, Any]) -> dict[str, Any]:
    return var("b", t)


@pytest.mark.parametrize(
    ("op", "t", "x", "y", "expected"),
    [
        ("+", bit(8), 250, 10, 4),
        ("-", bit(8), 3, 5, 254),
        ("*", bit(8), 16, 17, 16),
        ("+", sint(8), 127, 1, -128),
        ("-", sint(8), -128, 1, 127),
        ("*", sint(8), -64, 2, -128),
        ("*", sint(8), -64, 4, 0),
        ("|+|", bit(8), 250, 10, 255),
        ("|-|", bit(8), 3, 5, 0),
        ("|+|", sint(8), 100, 100, 127),
        ("|-|", sint(8), -100, 100, -128),
        ("&", sint(8), -1, 5, 5),
        ("|", bit(4), 0b1010, 0b0101, 0b1111),
        ("^", sint(4), -1, 1, -2),
    ],
)
def test_binary_arithmetic_wraps_as_p4(op: str, t: dict[str, Any], x: int, y: int, expected: int) -> None:
    assert evaluate(binary(op, a(t), b(t)), a=x, b=y) == expected


@pytest.mark.parametrize(
    ("t", "x", "shift", "expected"),
    [
        (bit(8), 0x81, 1, 0x02),
        (bit(8), 1, 8, 0),
        (bit(8), 1, 200, 0),
        (sint(8), 1, 7, -128),
        (sint(8), 1, 9, 0),
    ],
)
def test_left_shift_truncates_and_large_shifts_give_zero(
    t: dict[str, Any], x: int, shift: int, expected: int
) -> None:
    assert evaluate(binary("<<", a(t), b(bit(32))), a=x, b=shift) == expected
    assert evaluate(binary("<<", a(t), const(shift, bit(32))), a=x) == expected


@pytest.mark.parametrize(
    ("t", "x", "shift", "expected"),
    [(bit(8), 0x80, 7, 1), (bit(8), 0x80, 9, 0), (sint(8), -128, 7, -1), (sint(8), -128, 100, -1)],
)
def test_right_shift_is_logical_for_bit_and_arithmetic_for_int(
    t: dict[str, Any], x: int, shift: int, expected: int
) -> None:
    assert evaluate(binary(">>", a(t), b(bit(8))), a=x, b=shift) == expected


def test_unary_minus_complement_and_not() -> None:
    assert evaluate(unary("-", a(bit(8))), a=1) == 255
    assert evaluate(unary("-", a(sint(8))), a=-128) == -128
    assert evaluate(unary("~", a(bit(4))), a=0b0011) == 0b1100
    assert evaluate(unary("~", a(sint(8))), a=0) == -1
    assert evaluate(unary("!", a(BOOL)), a=False) is True


def test_slices_and_concatenation() -> None:
    assert evaluate(slice_(a(bit(16)), 11, 4), a=0xABCD) == 0xBC
    assert evaluate(slice_(a(sint(8)), 7, 4), a=-1) == 0xF
    assert evaluate(concat(a(bit(4)), b(bit(8))), a=0xA, b=0x5C) == 0xA5C
    assert evaluate(concat(a(sint(4)), b(bit(4))), a=-1, b=0) == 0xF0


@pytest.mark.parametrize(
    ("src", "dst", "x", "expected"),
    [
        (bit(8), sint(8), 0xFF, -1),
        (sint(8), bit(8), -1, 0xFF),
        (sint(8), sint(16), -2, -2),
        (sint(16), sint(8), 0x1FF, -1),
        (bit(16), bit(8), 0x1234, 0x34),
        (bit(8), bit(16), 0xFF, 0xFF),
        (sint(8), bit(16), -1, 0xFFFF),
        (bit(1), BOOL, 1, True),
        (BOOL, bit(1), True, 1),
    ],
)
def test_casts(src: dict[str, Any], dst: dict[str, Any], x: Any, expected: Any) -> None:
    assert evaluate(cast(a(src), dst), a=x) == expected


def test_comparisons_of_signed_values() -> None:
    assert evaluate(binary("<", a(sint(8)), b(sint(8)), BOOL), a=-1, b=0) is True
    assert evaluate(binary("==", a(bit(8)), b(bit(8)), BOOL), a=3, b=3) is True
    mux = {"op": "mux", "cond": a(BOOL), "then": const(1, bit(8)), "else": const(2, bit(8)), "type": bit(8)}
    assert evaluate(mux, a=False) == 2


def test_division_and_modulo_only_of_constants() -> None:
    assert evaluate(binary("/", const(200, bit(8)), const(7, bit(8)))) == 28
    assert evaluate(binary("%", const(200, bit(8)), const(7, bit(8)))) == 4
    with pytest.raises(ProgramError, match="'/' of a non-constant operand is not supported by p4switch"):
        evaluate(binary("/", a(bit(8)), const(7, bit(8))), a=1)
    with pytest.raises(ProgramError, match="positive divisor"):
        evaluate(binary("%", const(1, bit(8)), const(0, bit(8))))
