"""The C-style preprocessor subset P4 programs use, with a map from every output column back to its source.

Supported: #include "..." / <...> (our own p4include/ is searched last), object-like #define and #undef,
#ifdef / #ifndef / #if / #elif / #else / #endif with `defined`, integer constants and C operators, -D
definitions from the command line. Function-like macros are refused with a clear error.
"""

from __future__ import annotations

import ast
import bisect
import re
from dataclasses import dataclass, field
from pathlib import Path

from p4switch.frontend.errors import P4Error, Pos, type_error, unsupported

P4INCLUDE = Path(__file__).resolve().parent.parent / "p4include"

_IDENT = re.compile(r"[A-Za-z_]\w*")
_STRING = re.compile(r'"(?:\\.|[^"\\])*"')
_DIRECTIVE = re.compile(r"\s*#\s*(\w+)(.*)$")


@dataclass
class _OutLine:
    file: str
    line: int
    out_cols: list[int] = field(default_factory=lambda: [0])  # 0-based output column where a segment starts
    src_cols: list[int] = field(default_factory=lambda: [0])  # 0-based source column of that segment
    shifts: list[bool] = field(default_factory=lambda: [True])  # False: a macro expansion (one source column)


class SourceMap:
    """Maps (line, column) of the preprocessed text back to the original file:line:col."""

    def __init__(self) -> None:
        self._lines: list[_OutLine] = []

    def add(self, line: _OutLine) -> None:
        self._lines.append(line)

    def pos(self, line: int, col: int) -> Pos:
        """Original position of 1-based (line, col) in the preprocessed text."""
        if not self._lines:
            return Pos("<empty>", 1, 1)
        out = self._lines[min(max(line, 1), len(self._lines)) - 1]
        i = bisect.bisect_right(out.out_cols, col - 1) - 1
        offset = col - 1 - out.out_cols[i] if out.shifts[i] else 0
        return Pos(out.file, out.line, out.src_cols[i] + offset + 1)


def _strip_comments(text: str) -> str:
    """Blank out // and /* */ comments, keeping newlines and columns so positions stay exact."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            m = _STRING.match(text, i)
            end = m.end() if m else n
            out.append(text[i:end])
            i = end
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:end]))
            i = end
        else:
            out.append(c)
            i += 1
    return "".join(out)


_ALLOWED_NODES = (
    ast.Expression,
    ast.BoolOp,
    ast.BinOp,
    ast.UnaryOp,
    ast.Compare,
    ast.Constant,
    ast.And,
    ast.Or,
    ast.Not,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.FloorDiv,
    ast.Mod,
    ast.LShift,
    ast.RShift,
    ast.BitAnd,
    ast.BitOr,
    ast.BitXor,
    ast.Invert,
    ast.USub,
    ast.UAdd,
    ast.Eq,
    ast.NotEq,
    ast.Lt,
    ast.LtE,
    ast.Gt,
    ast.GtE,
)


class Preprocessor:
    """Expands one P4 source file with its includes into text plus a SourceMap."""

    def __init__(self, include_dirs: list[Path] | None = None, defines: dict[str, str] | None = None) -> None:
        self.include_dirs = list(include_dirs or [])
        self.macros: dict[str, str] = dict(defines or {})
        self.out: list[str] = []
        self.smap = SourceMap()
        self._depth = 0

    def run(self, path: Path) -> tuple[str, SourceMap]:
        self._file(path, Pos(str(path), 1, 1))
        return "\n".join(self.out) + "\n", self.smap

    def _file(self, path: Path, where: Pos) -> None:
        self._depth += 1
        if self._depth > 50:
            raise type_error(where, f"#include nested too deeply at {path}")
        try:
            text = path.read_text()
        except OSError as exc:
            raise type_error(where, f"cannot read {path}: {exc.strerror}") from None
        name = str(path)
        lines = _strip_comments(text).split("\n")
        stack: list[
            tuple[bool, bool, bool, Pos]
        ] = []  # (branch active, some branch taken, parent active, #if)
        i = 0
        while i < len(lines):
            start = i
            line = lines[i]
            while line.endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line[:-1] + " " + lines[i]
            i += 1
            active = all(s[0] for s in stack)
            m = _DIRECTIVE.match(line)
            if m:
                col = line.index("#") + 1
                self._directive(m.group(1), m.group(2), Pos(name, start + 1, col), path, stack, active)
                for k in range(start, i):
                    self._emit("", name, k + 1)
            elif active:
                self._emit_expanded(line, name, start + 1)
                for k in range(start + 1, i):
                    self._emit("", name, k + 1)
            else:
                for k in range(start, i):
                    self._emit("", name, k + 1)
        if stack:
            raise type_error(stack[-1][3], "unterminated #if/#ifdef at end of file")
        self._depth -= 1

    def _directive(
        self,
        word: str,
        rest: str,
        pos: Pos,
        path: Path,
        stack: list[tuple[bool, bool, bool, Pos]],
        active: bool,
    ) -> None:
        rest = rest.strip()
        if word in ("ifdef", "ifndef", "if"):
            cond = active and self._condition(word, rest, pos)
            stack.append((cond, cond, active, pos))
        elif word in ("elif", "else"):
            if not stack:
                raise type_error(pos, f"#{word} without #if")
            _, taken, parent, opened = stack.pop()
            cond = parent and not taken and (word == "else" or self._condition("if", rest, pos))
            stack.append((cond, taken or cond, parent, opened))
        elif word == "endif":
            if not stack:
                raise type_error(pos, "#endif without #if")
            stack.pop()
        elif not active:
            return
        elif word == "include":
            self._include(rest, pos, path)
        elif word == "define":
            m = re.match(r"([A-Za-z_]\w*)(\(?)(.*)$", rest)
            if not m:
                raise type_error(pos, "#define needs a name")
            if m.group(2):
                raise unsupported(pos, "function-like macro")
            self.macros[m.group(1)] = m.group(3).strip()
        elif word == "undef":
            self.macros.pop(rest, None)
        elif word == "error":
            raise type_error(pos, f"#error {rest}")
        elif word not in ("pragma", "line", "warning"):
            raise unsupported(pos, f"preprocessor directive #{word}")

    def _include(self, rest: str, pos: Pos, path: Path) -> None:
        m = re.match(r'"([^"]+)"|<([^>]+)>', rest)
        if not m:
            raise type_error(pos, f'#include expects "FILE" or <FILE>, got {rest!r}')
        target = m.group(1) or m.group(2)
        dirs = ([path.parent] if m.group(1) else []) + self.include_dirs + [P4INCLUDE]
        for d in dirs:
            candidate = d / target
            if candidate.is_file():
                self._file(candidate, pos)
                return
        raise type_error(pos, f"cannot find include file {m.group(0)}")

    def _condition(self, word: str, rest: str, pos: Pos) -> bool:
        if word in ("ifdef", "ifndef"):
            return (rest.split()[0] in self.macros if rest else False) == (word == "ifdef")
        text = re.sub(
            r"\bdefined\s*\(\s*(\w+)\s*\)|\bdefined\s+(\w+)",
            lambda m: "1" if (m.group(1) or m.group(2)) in self.macros else "0",
            rest,
        )
        text = self._expand(text, set())[0]
        text = re.sub(r"[A-Za-z_]\w*", "0", text)
        text = text.replace("&&", " and ").replace("||", " or ").replace("/", "//")
        text = re.sub(r"!(?!=)", " not ", text)
        try:
            tree = ast.parse(text.strip() or "0", mode="eval")
        except SyntaxError:
            raise type_error(pos, f"cannot evaluate #if expression {rest!r}") from None
        if not all(isinstance(node, _ALLOWED_NODES) for node in ast.walk(tree)):
            raise type_error(pos, f"cannot evaluate #if expression {rest!r}")
        return bool(eval(compile(tree, "<#if>", "eval"), {"__builtins__": {}}))  # noqa: S307 - checked AST

    def _expand(self, text: str, seen: set[str]) -> tuple[str, list[tuple[int, int, bool]]]:
        """Expand macros; return text and segments (out col, src col, shifts) for the top level."""
        parts: list[str] = []
        segs: list[tuple[int, int, bool]] = [(0, 0, True)]
        out_len = 0
        i = 0
        for m in _IDENT.finditer(text):
            if m.group(0) not in self.macros or m.group(0) in seen or _inside_string(text, m.start()):
                continue
            if m.start() > 0 and (text[m.start() - 1].isdigit() or text[m.start() - 1] == "."):
                continue
            parts.append(text[i : m.start()])
            out_len += m.start() - i
            body = self._expand(self.macros[m.group(0)], seen | {m.group(0)})[0]
            segs.append((out_len, m.start(), False))
            parts.append(body)
            out_len += len(body)
            segs.append((out_len, m.end(), True))
            i = m.end()
        parts.append(text[i:])
        return "".join(parts), segs

    def _emit_expanded(self, line: str, name: str, lineno: int) -> None:
        text, segs = self._expand(line, set())
        out = _OutLine(name, lineno, [s[0] for s in segs], [s[1] for s in segs], [s[2] for s in segs])
        self.out.append(text)
        self.smap.add(out)

    def _emit(self, text: str, name: str, lineno: int) -> None:
        self.out.append(text)
        self.smap.add(_OutLine(name, lineno))


def _inside_string(text: str, index: int) -> bool:
    return text.count('"', 0, index) % 2 == 1


def preprocess(
    path: Path, include_dirs: list[Path] | None = None, defines: dict[str, str] | None = None
) -> tuple[str, SourceMap]:
    """Preprocess `path`; raises P4Error with the original position on a bad directive or include."""
    return Preprocessor(include_dirs, defines).run(path)


__all__ = ["P4Error", "SourceMap", "preprocess", "P4INCLUDE"]
