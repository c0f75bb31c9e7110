"""P4_16 source -> lark parse tree (LALR), with type names told apart from other names before parsing.

P4 is LALR-friendly only when the lexer knows which identifiers name types (p4c does the same with its
symbol table). A quick scan of the preprocessed text collects every declared type name and the type
parameters of generic declarations; the post-lexer then turns those NAME tokens into TYPE_NAME, and marks a
`>` immediately followed by another `>` as SHR_GT (the first half of a right shift, or the end of a nested
type argument list such as `register<bit<32>>`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from p4switch.frontend.errors import P4Error, Pos, type_error
from p4switch.frontend.preprocess import SourceMap

_GRAMMAR = Path(__file__).with_name("p4.lark")

_DECL_NAME = re.compile(r"\b(?:header|struct|header_union|parser|control|package)\s+([A-Za-z_]\w*)")
_EXTERN_OBJ = re.compile(r"\bextern\s+([A-Za-z_]\w*)\s*(<[^>{};]*>)?\s*\{([^}]*)\}")
_ENUM = re.compile(r"\benum\s+(?:(?:bit|int)\s*<\s*\d+\s*>\s*)?([A-Za-z_]\w*)\s*\{")
_TYPEDEF = re.compile(r"(?<![.\w])(?:typedef|type)\s+[^;{}=]*?\b([A-Za-z_]\w*)\s*;")
_GENERIC_DECL = re.compile(
    r"\b(?:extern|parser|control|package)\s+(?:[A-Za-z_]\w*\s+)?[A-Za-z_]\w*\s*<([\w\s,]*)>"
)
_GENERIC_METHOD = re.compile(r"\b[A-Za-z_]\w*\s*<([\w\s,]*)>\s*\(")
_STRING = re.compile(r'"(?:\\.|[^"\\])*"')


def scan_type_names(text: str) -> frozenset[str]:
    """Every identifier the program declares as a type (including type parameters of generic externs)."""
    text = _STRING.sub('""', text)
    names: set[str] = set(_DECL_NAME.findall(text))
    names.update(_ENUM.findall(text))
    names.update(_TYPEDEF.findall(text))
    for m in _GENERIC_DECL.finditer(text):
        names.update(n.strip() for n in m.group(1).split(",") if n.strip())
    for m in _EXTERN_OBJ.finditer(text):
        names.add(m.group(1))
        for gm in _GENERIC_METHOD.finditer(m.group(3)):
            names.update(n.strip() for n in gm.group(1).split(",") if n.strip())
    return frozenset(names)


class _PostLexer:
    """Retypes NAME tokens of declared types and the first `>` of `>>` (see module docstring)."""

    always_accept = ("NAME",)

    def __init__(self) -> None:
        self.type_names: frozenset[str] = frozenset()

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        toks = list(stream)
        for tok in toks:
            if tok.type == "NAME" and tok.value in self.type_names:
                tok.type = "TYPE_NAME"
        for i, tok in enumerate(toks[:-1]):
            nxt = toks[i + 1]
            if tok.type == "MORETHAN" and nxt.type == "MORETHAN" and tok.end_pos == nxt.start_pos:
                tok.type = "SHR_GT"
            elif (
                tok.type == "LESSTHAN" and i > 0 and toks[i - 1].type == "NAME" and _starts_type(toks, i + 1)
            ):
                tok.type = "TYPE_LT"
        return iter(toks)


def _starts_type(toks: list[Token], i: int) -> bool:
    """Does a type (not an expression) start at toks[i]? Used to tell `f<T>(x)` from `a < b`."""
    after = toks[i + 1].type if i + 1 < len(toks) else ""
    if toks[i].type in _TYPE_KEYWORDS:
        return True
    return toks[i].type in ("TYPE_NAME", "ERROR") and after != "DOT"


_TYPE_KEYWORDS = frozenset({"BIT", "INT", "BOOL", "VARBIT", "STRING", "TUPLE"})


@lru_cache(maxsize=1)
def _lark() -> tuple[Lark, _PostLexer]:
    post = _PostLexer()
    parser = Lark(
        _GRAMMAR.read_text(),
        parser="lalr",
        lexer="basic",
        propagate_positions=True,
        postlex=post,
        maybe_placeholders=True,
        cache=True,
    )
    return parser, post


def _describe(tok: Token) -> str:
    if tok.type == "$END":
        return "end of file"
    return f"'{tok.value}'"


def parse(text: str, smap: SourceMap) -> Tree[Token]:
    """Parse preprocessed P4 text; syntax errors become P4Error at the original file:line:col."""
    parser, post = _lark()
    post.type_names = scan_type_names(text)
    try:
        return parser.parse(text)
    except UnexpectedToken as exc:
        tok = exc.token
        pos = smap.pos(tok.line or 1, tok.column or 1) if tok.line else _end(smap)
        if tok.type == "NAME" and "TYPE_NAME" in exc.expected:  # a name where only a type fits
            raise type_error(pos, f"unknown type {tok.value}") from None
        raise type_error(pos, f"syntax error, unexpected {_describe(tok)}") from None
    except UnexpectedCharacters as exc:
        pos = smap.pos(exc.line, exc.column)
        char = text[exc.pos_in_stream] if exc.pos_in_stream is not None else "?"
        raise type_error(pos, f"syntax error, unexpected character {char!r}") from None
    except UnexpectedEOF:
        raise type_error(_end(smap), "syntax error, unexpected end of file") from None
    except UnexpectedInput as exc:  # pragma: no cover - other lark input errors
        raise type_error(smap.pos(exc.line, exc.column), "syntax error") from None


def _end(smap: SourceMap) -> Pos:
    return smap.pos(10**9, 1)


__all__ = ["P4Error", "parse", "scan_type_names"]
