"""Imports go one way in p4switch: no module imports (directly or around a loop) a module that imports it
back, and p4switch imports nothing of ours outside it (it is the P4 target, usable without the rest of
the project: the wire library, the SM, the topologies and the evaluation build on it, never the reverse).

Imports are read from the source (every ``import`` and ``from ... import``, at module level or inside a
function, since both run), not by importing it. An import under ``if TYPE_CHECKING:`` runs only under
mypy: it names a type, it cannot form an import cycle, so the cycle check leaves it out (the check for
imports of the rest of the project does not). The last tests run the checks on small made-up trees, to
show what they catch."""

from __future__ import annotations

import ast
import functools
import tomllib
from collections.abc import Iterator
from pathlib import Path

import networkx as nx

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "p4switch"


def modules(package: Path) -> dict[str, Path]:
    """Every module of ``package`` by dotted name (a package by the name of its directory)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _statements(body: list[ast.stmt], type_checking: bool) -> Iterator[ast.stmt]:
    """Every statement in ``body`` and the blocks it nests (imports are statements: expressions need no
    visit), leaving out ``if TYPE_CHECKING:`` blocks unless ``type_checking``."""
    for stmt in body:
        yield stmt
        if not type_checking and isinstance(stmt, ast.If) and _type_checking_only(stmt):
            yield from _statements(stmt.orelse, type_checking)
            continue
        for _, value in ast.iter_fields(stmt):
            for item in value if isinstance(value, list) else ():
                if isinstance(item, ast.stmt):
                    yield from _statements([item], type_checking)
                elif isinstance(item, ast.ExceptHandler | ast.match_case):
                    yield from _statements(item.body, type_checking)


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


@functools.cache
def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


@functools.cache
def imports(path: Path, module: str, *, type_checking: bool) -> tuple[tuple[str, ...], ...]:
    """What ``module`` (at ``path``) imports, one tuple per imported thing: the dotted names it may be,
    the most specific first (``from a import x``: the module ``a.x``, else a name of ``a``; ``import
    a.b``: ``a.b``, whose parent ``a`` Python runs first), relative imports resolved."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, ...]] = []
    for node in _statements(_parse(path).body, type_checking):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                found.append(tuple(".".join(parts[:n]) for n in range(len(parts), 0, -1)))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            found += [(f"{base}.{alias.name}", base) for alias in node.names]
    return tuple(found)


def import_graph(package: Path) -> nx.DiGraph:
    """Module -> the module each of its imports runs, inside ``package`` (the most specific module an
    import names; the parent packages Python runs on the way are not edges: every submodule has them)."""
    known = modules(package)
    graph = nx.DiGraph()
    graph.add_nodes_from(known)
    for module, path in known.items():
        for names in imports(path, module, type_checking=False):
            target = next((name for name in names if name in known), None)
            if target is not None and target != module:
                graph.add_edge(module, target)
    return graph


def cycles(package: Path) -> list[list[str]]:
    """Every import cycle of ``package``, each as its sorted module names."""
    return sorted(sorted(cycle) for cycle in nx.simple_cycles(import_graph(package)))


def our_other_packages() -> set[str]:
    """The top-level packages and modules of the project besides p4switch: those setuptools installs
    (pyproject.toml) and the PTF library modules, which the PTF tests import by their bare names."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    find = config["tool"]["setuptools"]["packages"]["find"]
    names = {pattern.rstrip("*.") for pattern in find["include"]}
    for root in [*find["where"], "ptf-tests", "ptf-tests/lib"]:
        for child in (REPO / root).iterdir():
            if (child / "__init__.py").exists() or (child.suffix == ".py" and child.stem != "conftest"):
                names.add(child.stem)
    return names - {"p4switch", "tests"}


def outside_imports(package: Path, ours: set[str]) -> list[str]:
    """``module imports name`` for every import in ``package`` of one of the packages ``ours``."""
    found = set()
    for module, path in modules(package).items():
        for names in imports(path, module, type_checking=True):
            if names[-1].split(".")[0] in ours:
                found.add(f"{module} imports {names[-1]}")
    return sorted(found)


# ------------------------------------------------------------------------------------------ the checks


def test_no_import_cycle_inside_p4switch() -> None:
    assert cycles(PACKAGE) == []


def test_p4switch_imports_nothing_of_ours_from_outside_it() -> None:
    ours = our_other_packages()
    assert {"ibsec", "ibsm", "topologies", "evaluation", "base_test"} <= ours
    assert outside_imports(PACKAGE, ours) == []


def test_the_engine_interface_imports_no_engine_module() -> None:
    """api.py is what a second back end implements: it must not depend on the first one."""
    graph = import_graph(PACKAGE)
    assert [m for m in graph.successors("p4switch.engine.api") if m.startswith("p4switch.engine")] == []


# ---------------------------------------------------------------------- what the checks catch (made up)


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_a_cycle_is_found_through_any_kind_of_import(tmp_path: Path) -> None:
    package = write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/api.py": "def load():\n    from pkg.impl import make\n    return make()\n",  # a lazy import
        "pkg/impl.py": "from . import api\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/a.py": "import pkg.sub.b\n",
        "pkg/sub/b.py": "from pkg.sub import c\n",
        "pkg/sub/c.py": "from ..sub.a import thing\n",
        "pkg/typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.impl import X\n",
        "pkg/uses_typed.py": "import pkg.typed\n",
    })
    assert cycles(package) == [["pkg.api", "pkg.impl"], ["pkg.sub.a", "pkg.sub.b", "pkg.sub.c"]]


def test_an_import_of_the_rest_of_the_project_is_found(tmp_path: Path) -> None:
    package = write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/bench.py": "import json\nfrom ibsec.addressing import make_gid\n",
        "pkg/lab.py": "def f():\n    import topologies.run\n",
        "pkg/typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import ibsm\n",
    })
    assert outside_imports(package, {"ibsec", "ibsm", "topologies"}) == [
        "pkg.bench imports ibsec.addressing", "pkg.lab imports topologies", "pkg.typed imports ibsm"]
