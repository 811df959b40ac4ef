"""The layers point one way (docs/layers.md): every import in docsum/ and cli/,
at module level or inside a function, goes to the same layer or one below it,
and no two modules import each other, however indirectly. Imports under
`if TYPE_CHECKING:` count too: a type a module names is a dependency of it."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from helpers import REPO, absolute_module

# Top first. A module's layer is the first entry whose prefix names it; the
# base is the modules directly in docsum/ (a new package must be given a layer).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("cli", ("cli",)),
    ("api", ("docsum.index", "docsum.config")),
    ("query", ("docsum.query",)),
    ("builder", ("docsum.builder",)),
    ("synthesizers", ("docsum.synthesizers",)),
    ("ingest", ("docsum.ingest",)),
    ("models", ("docsum.models",)),
    ("store", ("docsum.store",)),
)
BASE = "base"
# The package's __init__ only names where the public API lives (imported on
# first use); it sits with the api layer.
PACKAGE_INIT_LAYER = "api"


def layer_name(rank: int) -> str:
    return LAYERS[rank][0] if rank < len(LAYERS) else BASE


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int:
    """The rank of a module's layer, 0 the top."""
    if module == "docsum":
        return [name for name, _ in LAYERS].index(PACKAGE_INIT_LAYER)
    for rank, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    if module.count(".") == 1 and module.startswith("docsum.") and (REPO / "docsum" / f"{module[7:]}.py").is_file():
        return len(LAYERS)
    raise AssertionError(f"{module} is in no layer: add it to LAYERS and docs/layers.md")


def canonical(module: str) -> str:
    """The installed CLI package is docsum_cli; its source folder is cli/."""
    return "cli" + module[len("docsum_cli") :] if module.split(".")[0] == "docsum_cli" else module


def imports_of(source: str, importer: str, is_package: bool, modules: set[str]) -> Iterator[tuple[int, str]]:
    """(line, module) for every project module `importer` imports, wherever the
    import statement is. `from package import name` is an import of the
    submodule when `name` is one, else of the package."""
    for node in ast.walk(ast.parse(source, importer)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = canonical(alias.name)
                if target in modules:
                    yield node.lineno, target
        elif isinstance(node, ast.ImportFrom):
            origin = canonical(absolute_module(node.module, node.level, importer, is_package))
            for alias in node.names:
                sub = f"{origin}.{alias.name}"
                if sub in modules:
                    yield node.lineno, sub
                elif origin in modules:
                    yield node.lineno, origin


def project_graph() -> dict[str, dict[str, int]]:
    """importer -> {imported module: first line}, over docsum/ and cli/."""
    files = sorted(p for package in ("docsum", "cli") for p in (REPO / package).rglob("*.py"))
    modules = {module_name(p) for p in files}
    graph: dict[str, dict[str, int]] = {}
    for path in files:
        name = module_name(path)
        edges = graph.setdefault(name, {})
        for line, target in imports_of(path.read_text(encoding="utf-8"), name, path.name == "__init__.py", modules):
            if target != name:
                edges.setdefault(target, line)
    return graph


def upward_imports(graph: dict[str, dict[str, int]]) -> list[str]:
    return [
        f"{importer}:{line} imports {target} ({layer_name(layer_of(importer))} -> {layer_name(layer_of(target))})"
        for importer, edges in sorted(graph.items())
        for target, line in sorted(edges.items())
        if layer_of(target) < layer_of(importer)
    ]


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:  # noqa: C901 (listed when the check came in: simplify, then drop this)
    """Every strongly connected group of more than one module (Tarjan), each
    sorted, so a cycle however long is reported once with all its members."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(groups)


def describe(group: list[str], graph: dict[str, dict[str, int]]) -> str:
    """A cycle's members and the imports between them, `a:line -> b`."""
    links = [f"{a}:{graph[a][b]} -> {b}" for a in group for b in sorted(graph.get(a, {})) if b in group]
    return " | ".join(links)


def test_no_import_points_up_a_layer() -> None:
    graph = project_graph()
    assert {"docsum.query.ask", "docsum.store.base", "cli.main"} <= set(graph)
    found = upward_imports(graph)
    assert found == [], "imports that point up a layer:\n" + "\n".join(found)


def test_no_import_cycles() -> None:
    graph = project_graph()
    found = [describe(group, graph) for group in cycles(graph)]
    assert found == [], "import cycles:\n" + "\n".join(found)


def test_every_module_is_in_a_layer() -> None:
    for module in project_graph():
        layer_of(module)


def test_the_scan_sees_every_kind_of_import() -> None:
    """The check itself: module-level, function-level, relative and
    TYPE_CHECKING imports are all seen, and an upward one and a cycle are caught."""
    modules = {"docsum.query.a", "docsum.query.b", "docsum.query", "docsum.models.m", "docsum.store.s", "cli.x"}
    probe_m = (
        "from typing import TYPE_CHECKING\n"
        "import os\n"
        "from ..store import s\n"
        "if TYPE_CHECKING:\n"
        "    from docsum.query import b\n"
        "def f():\n"
        "    import docsum.query.a\n"
        "    from docsum_cli import x\n"
    )
    edges = list(imports_of(probe_m, "docsum.models.m", False, modules))
    assert edges == [(3, "docsum.store.s"), (5, "docsum.query.b"), (7, "docsum.query.a"), (8, "cli.x")]
    graph = {
        "docsum.models.m": {target: line for line, target in edges},
        "docsum.query.a": {"docsum.query.b": 1},
        "docsum.query.b": {"docsum.query.a": 4},
        "docsum.store.s": {},
    }
    assert upward_imports(graph) == [
        "docsum.models.m:8 imports cli.x (models -> cli)",
        "docsum.models.m:7 imports docsum.query.a (models -> query)",
        "docsum.models.m:5 imports docsum.query.b (models -> query)",
    ]
    assert cycles(graph) == [["docsum.query.a", "docsum.query.b"]]
    assert describe(["docsum.query.a", "docsum.query.b"], graph) == (
        "docsum.query.a:1 -> docsum.query.b | docsum.query.b:4 -> docsum.query.a"
    )
