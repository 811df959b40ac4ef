"""No module of docsum/ or cli/ reaches into another module's private names
(issue 14 item 4): `from docsum.x import _name` and `docsum.x._name` (through
any import alias) are refused, so what one module needs of another has a
public, named home. A module's own names, and dunder names, are its own."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import REPO

PACKAGES = ("docsum", "cli")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def absolute_module(module: str | None, level: int, importer: str, is_package: bool) -> str:
    """The module an ImportFrom names, relative imports resolved."""
    if not level:
        return module or ""
    base = importer.split(".")
    if not is_package:
        base.pop()
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def private_reaches(source: str, importer: str, is_package: bool, modules: set[str]) -> list[str]:
    """Every reach of module `importer` (whose text is `source`) into another
    project module's private names, as `line: what`."""
    tree = ast.parse(source, importer)
    found: list[str] = []
    # Local names bound to a project module: `import docsum.x as x`, `from docsum import x`.
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            origin = absolute_module(node.module, node.level, importer, is_package)
            for alias in node.names:
                if is_private(alias.name) and origin != importer and origin.split(".")[0] in PACKAGES:
                    found.append(f"{node.lineno}: from {origin} import {alias.name}")
                if f"{origin}.{alias.name}" in modules:
                    bound[alias.asname or alias.name] = f"{origin}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    bound[top] = top
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and is_private(node.attr)):
            continue
        chain: list[str] = []
        value: ast.expr = node.value
        while isinstance(value, ast.Attribute):
            chain.append(value.attr)
            value = value.value
        if isinstance(value, ast.Name) and value.id in bound:
            target = ".".join([bound[value.id], *reversed(chain)])
            if target in modules and target != importer:
                found.append(f"{node.lineno}: {target}.{node.attr}")
    return found


def project_files() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (REPO / package).rglob("*.py"))


def test_no_module_reaches_into_another_modules_private_names() -> None:
    files = project_files()
    modules = {module_name(p) for p in files}
    assert {"docsum.models.llm", "docsum.query.ask", "cli.main"} <= modules
    reaches = [
        f"{path.relative_to(REPO)}:{reach}"
        for path in files
        for reach in private_reaches(
            path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py", modules
        )
    ]
    assert reaches == [], "private names used across modules:\n" + "\n".join(reaches)


def test_the_scan_sees_both_kinds_of_reach() -> None:
    """The check itself: a module written with both kinds of reach is caught
    (its own private names, public names and dunders are not)."""
    probe = (
        "from docsum.models.llm import _active_sinks\n"
        "from . import ask as asking\n"
        "import docsum.store.sqlite as sqlite_store\n"
        "_mine = 1\n"
        "print(_mine, asking._templates, sqlite_store.utc_now, sqlite_store.__name__, _active_sinks)\n"
    )
    modules = {module_name(p) for p in project_files()}
    assert private_reaches(probe, "docsum.query.probe", False, modules) == [
        "1: from docsum.models.llm import _active_sinks",
        "5: docsum.query.ask._templates",
    ]
