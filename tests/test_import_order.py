"""Imports go one way through the whole tree, and no module imports (directly or around a loop) a module
that imports it back.

The order, bottom up (DESIGN, README's layout): p4switch (the P4 target, usable without the rest) and the wire
library (``ibsec`` without its agent, attacks and fuzz subpackages) depend on nothing of ours; the agent, the
attack tools and the SM (``ibsm``) on the wire library only, never on each other; the in-process labs and
benchmarks (``labs``) on those and p4switch; the fuzzer on those and the labs; the topologies on the layers
below the labs; the evaluation on everything below it; the tests on anything. A product module never
imports a test module.

Imports are read from the source (every ``import`` and ``from ... import``, at module level or inside a
function, since both run), not by importing it. An import under ``if TYPE_CHECKING:`` runs only under
mypy: it names a type, it cannot form an import cycle, so the cycle check leaves it out (the order check
does not: a type from above is still knowledge from above). The last tests run the checks on small made-up
trees, to show what they catch.
"""

from __future__ import annotations

import ast
import functools
import re
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path

import networkx as nx

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "p4switch"
PRODUCTS = [REPO / "p4switch", REPO / "scapy-tools" / "ibsec", REPO / "controller" / "ibsm",
            REPO / "topologies", REPO / "labs", REPO / "evaluation"]
"""The packages of the tree; their ``tests`` subpackages are the tests' layer."""

BELOW = {
    "p4switch": set(),
    "wire": set(),
    "agent": {"wire"},
    "attacks": {"wire"},
    "sm": {"wire"},
    "labs": {"wire", "agent", "attacks", "sm", "p4switch"},
    "fuzz": {"wire", "agent", "attacks", "sm", "labs"},
    "topologies": {"wire", "agent", "attacks", "sm", "p4switch"},
    "evaluation": {"wire", "agent", "attacks", "sm", "p4switch", "labs", "fuzz", "topologies"},
}
"""The layers each layer may import besides itself (tests may import any)."""

KNOWN_UPWARD: dict[tuple[str, str], str] = {}
"""Upward imports the tree has today, each with why; a new one fails the order check, and one that went away
must leave this list (the stale check), so it only shrinks. Empty since issue 15 moved the test fabrics and
benchmarks out of the product packages (to ``labs``, ``ibsec.fuzz.sm`` and ``p4switch/tests``)."""


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


def import_graph(*packages: Path) -> nx.DiGraph:
    """Module -> the module each of its imports runs, among the modules of ``packages`` (the most specific
    module an import names; the parent packages Python runs on the way are not edges: every submodule has
    them)."""
    known = tree_modules(packages)
    graph = nx.DiGraph()
    graph.add_nodes_from(known)
    for module, path in known.items():
        for names in imports(path, module, type_checking=False):
            target = next((name for name in names if name in known), None)
            if target is not None and target != module:
                graph.add_edge(module, target)
    return graph


def cycles(*packages: Path) -> list[list[str]]:
    """Every import cycle among the modules of ``packages``, each as its sorted module names."""
    return sorted(sorted(cycle) for cycle in nx.simple_cycles(import_graph(*packages)))


def tree_modules(roots: Iterable[Path]) -> dict[str, Path]:
    """Every module of the packages ``roots`` by dotted name."""
    return {name: path for root in roots for name, path in modules(root).items()}


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


def layer(module: str, ours: set[str]) -> str | None:
    """The layer of the dotted name ``module`` (None: not ours, e.g. the standard library or finsy)."""
    parts = module.split(".")
    if parts[0] not in ours | {"p4switch"}:
        return None
    if "tests" in parts or parts[0] not in {"p4switch", "ibsec", "ibsm", "topologies", "labs", "evaluation"}:
        return "tests"  # a tests subpackage, or a PTF library module the PTF tests import by bare name
    if parts[0] == "ibsec":
        return parts[1] if len(parts) > 1 and parts[1] in {"agent", "attacks", "fuzz"} else "wire"
    return {"ibsm": "sm"}.get(parts[0], parts[0])


HARNESS = re.compile(r"(^|_)(bench|lab|outcomes)(_|$)")
"""How a lab or benchmark module is named (``bench``, ``sm_bench``, ``agent_lab``, ``attack_outcomes``)."""


def harnesses_in_products(roots: Iterable[Path], ours: set[str]) -> list[str]:
    """The modules of ``roots`` named as a lab or benchmark that live in a product's layer, not in ``labs``,
    a tests package or the evaluation: a harness in a product is installed and imported with it, and what
    it needs (another product to drive, a fabric to build) becomes the product's dependency."""
    harness_layers = {"labs", "tests", "evaluation", None}
    return sorted(name for name in tree_modules(roots)
                  if HARNESS.search(name.rsplit(".", 1)[-1]) and layer(name, ours) not in harness_layers)


def upward_imports(roots: list[Path], ours: set[str]) -> dict[tuple[str, str], str]:
    """``(module, imported module): "layer -> layer"`` for every import in ``roots`` outside the order
    (the imported module: the most specific module of ours an import names)."""
    known = tree_modules(roots)
    found = {}
    for module, path in known.items():
        source = layer(module, ours)
        if source in (None, "tests"):
            continue
        for names in imports(path, module, type_checking=True):
            target = layer(names[-1], ours)
            if target is None or target == source or target in BELOW[source]:
                continue
            imported = next((name for name in names if name in known), names[-1])
            found[(module, imported)] = f"{source} -> {target}"
    return found


# ------------------------------------------------------------------------------------------ the checks


def test_no_import_cycle_in_the_tree() -> None:
    assert cycles(*PRODUCTS) == []


def test_every_import_goes_down_the_layers() -> None:
    ours = our_other_packages()
    assert {"ibsec", "ibsm", "topologies", "evaluation", "base_test"} <= ours
    upward = upward_imports(PRODUCTS, ours)
    assert {pair: why for pair, why in upward.items() if pair not in KNOWN_UPWARD} == {}


def test_no_lab_or_benchmark_lives_in_a_product() -> None:
    assert harnesses_in_products(PRODUCTS, our_other_packages()) == []


def test_the_known_upward_imports_are_still_there() -> None:
    """One that went away (moved, say, by issue 15's codec) leaves the list, so no new one can hide there."""
    assert set(KNOWN_UPWARD) - set(upward_imports(PRODUCTS, our_other_packages())) == set()


def test_p4switch_imports_nothing_of_ours_from_outside_it() -> None:
    assert outside_imports(PACKAGE, our_other_packages()) == []


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


def test_an_upward_import_is_found_in_any_layer(tmp_path: Path) -> None:
    write(tmp_path, {
        "ibsec/__init__.py": "",
        "ibsec/transport.py": "def f():\n    from ibsm.core import SubnetManager\n",  # wire -> sm, lazily
        "ibsec/agent/__init__.py": "",
        "ibsec/agent/adapter.py": "from ibsec import transport\nfrom ..attacks import common\n",  # sibling
        "ibsec/attacks/__init__.py": "",
        "ibsec/attacks/common.py": "import ibsec.transport\n",  # down: allowed
        "ibsm/__init__.py": "",
        "ibsm/core.py": "from ibsec.transport import Mode\nfrom topologies import run\n",  # sm -> topologies
        "ibsm/tests/__init__.py": "",
        "ibsm/tests/test_core.py": "from topologies import run\n",  # tests: anything
        "topologies/__init__.py": "",
        "topologies/run.py": "import ibsm.core\nfrom ibsm.tests import test_core\n",  # product -> tests
    })
    roots = [tmp_path / name for name in ("ibsec", "ibsm", "topologies")]
    assert upward_imports(roots, {"ibsec", "ibsm", "topologies"}) == {
        ("ibsec.transport", "ibsm.core"): "wire -> sm",
        ("ibsec.agent.adapter", "ibsec.attacks.common"): "agent -> attacks",
        ("ibsm.core", "topologies.run"): "sm -> topologies",
        ("topologies.run", "ibsm.tests.test_core"): "topologies -> tests",
    }


def test_a_lab_or_benchmark_in_a_product_is_found(tmp_path: Path) -> None:
    write(tmp_path, {
        "ibsec/__init__.py": "",
        "ibsec/bench_transport.py": "",  # a benchmark in the wire library
        "ibsec/labels.py": "",  # a name that only looks like one
        "ibsec/agent/__init__.py": "",
        "ibsec/agent/lab.py": "",  # a test fabric in the agent
        "ibsec/agent/tests/__init__.py": "",
        "ibsec/agent/tests/bench.py": "",  # beside the tests: allowed
        "labs/__init__.py": "",
        "labs/agent_lab.py": "",  # in the labs: allowed
    })
    roots = [tmp_path / "ibsec", tmp_path / "labs"]
    assert harnesses_in_products(roots, {"ibsec", "labs"}) == ["ibsec.agent.lab", "ibsec.bench_transport"]
