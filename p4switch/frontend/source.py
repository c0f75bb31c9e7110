"""Parse-tree helpers every front-end pass uses: children, names, integer literals and annotations."""

from __future__ import annotations

import re
from typing import Any

from lark import Token, Tree

from p4switch.frontend.errors import Pos
from p4switch.frontend.preprocess import SourceMap
from p4switch.frontend.types import INFINT, Type

PTree = Tree[Any]
Node = PTree | Token


def kids(tree: Node) -> list[Any]:
    return [c for c in tree.children if c is not None] if isinstance(tree, Tree) else []


def parse_int(text: str) -> tuple[int, Type]:
    """An integer literal with its type: `8w5` bit<8>, `8s5` int<8>, plain literals are infinite precision."""
    s = text.replace("_", "")
    t = INFINT
    m = re.fullmatch(r"(\d+)([ws])(.+)", s)
    if m:
        t = Type("bit" if m.group(2) == "w" else "int", int(m.group(1)))
        s = m.group(3)
    low = s.lower()
    base = 10
    if low.startswith(("0x", "0b", "0o", "0d")):
        base = {"x": 16, "b": 2, "o": 8, "d": 10}[low[1]]
        s = s[2:]
    return int(s, base), t


def name_of(node: Node) -> str:
    """The identifier a name node (or keyword used as a name) stands for."""
    if isinstance(node, Token):
        return str(node.value)
    if node.data.startswith(("kw_", "mkw_")):
        return node.data.split("_", 1)[1]
    return name_of(node.children[0])


def read_annotations(tree: PTree | None) -> dict[str, list[Any]]:
    """Annotations as name -> list of literal arguments (strings and integers; None for others)."""
    result: dict[str, list[Any]] = {}
    if tree is None:
        return result
    for ann in kids(tree):
        parts = kids(ann)
        values: list[Any] = []
        if len(parts) > 1:
            for arg in kids(parts[1]):
                if isinstance(arg, Tree) and arg.data == "string_lit":
                    values.append(str(arg.children[0])[1:-1])
                elif isinstance(arg, Tree) and arg.data == "int_lit":
                    values.append(parse_int(str(arg.children[0]))[0])
                else:
                    values.append(None)
        result.setdefault(name_of(parts[0]), values)  # the first one counts, as in p4c
    return result


class Source:
    """The preprocessed text of one program, and where its nodes are in the original files."""

    def __init__(self, smap: SourceMap, text: str, file: str) -> None:
        self.smap = smap
        self.text = text
        self.file = file

    def pos(self, node: Node) -> Pos:
        if isinstance(node, Token):
            return self.smap.pos(node.line or 1, node.column or 1)
        meta = node.meta
        if getattr(meta, "empty", True):
            for c in node.children:
                if c is not None:
                    return self.pos(c)
            return Pos(self.file, 1, 1)
        return self.smap.pos(meta.line, meta.column)

    def src(self, node: Node) -> str:
        """The position as the IR writes it: `file:line:col`."""
        return str(self.pos(node))

    def text_of(self, node: PTree) -> str:
        """The node's source text without whitespace (p4c's name for a table key)."""
        return re.sub(r"\s+", "", self.text[node.meta.start_pos : node.meta.end_pos])
