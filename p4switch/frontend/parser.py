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


Region = tuple[int, int, frozenset[str]]  # [start, end) of a generic declaration and its type parameters


def _names(group: str) -> frozenset[str]:
    return frozenset(n.strip() for n in group.split(",") if n.strip())


def scan_type_names(text: str) -> tuple[frozenset[str], list[Region]]:
    """The identifiers the program declares as types, and the type parameters of generic declarations.

    Type parameters (the T of `extern void random<T>(...)`) are types only inside their declaration,
    so a program may still name a constant or variable `T` or `D`.
    """
    text = _STRING.sub(lambda m: '"' + " " * (len(m.group(0)) - 2) + '"', text)  # keeps positions
    names: set[str] = set(_DECL_NAME.findall(text))
    names.update(_ENUM.findall(text))
    names.update(_TYPEDEF.findall(text))
    regions: list[Region] = []
    for m in _GENERIC_DECL.finditer(text):
        end = min(
            (k for k in (text.find(";", m.end()), text.find("{", m.end())) if k >= 0), default=len(text)
        )
        if text[end : end + 1] == "{":
            end = text.find("}", end) + 1 or len(text)
        regions.append((m.start(), end, _names(m.group(1))))
    for m in _EXTERN_OBJ.finditer(text):
        names.add(m.group(1))
        generic = [_names(gm.group(1)) for gm in _GENERIC_METHOD.finditer(m.group(3))]
        if generic:  # `T lookahead<T>();`: T is a type in the whole method, so in the whole body
            regions.append((m.start(3), m.end(3), frozenset().union(*generic)))
    return frozenset(names), regions


class _PostLexer:
    """Retypes NAME tokens of declared types and the first `>` of `>>` (see module docstring)."""

    always_accept = ("NAME",)

    def __init__(self) -> None:
        self.type_names: frozenset[str] = frozenset()
        self.regions: list[Region] = []

    def is_type(self, tok: Token) -> bool:
        if tok.value in self.type_names:
            return True
        pos = tok.start_pos or 0
        return any(start <= pos < end and tok.value in params for start, end, params in self.regions)

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        toks = list(stream)
        for tok in toks:
            if tok.type == "NAME" and self.is_type(tok):
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
    post.type_names, post.regions = scan_type_names(text)
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
