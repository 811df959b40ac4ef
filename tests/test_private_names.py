"""No module of docsum/ or cli/ reaches into another module's private names,
nor into another package's: `from docsum.x import _name` and `docsum.x._name` (through
any import alias) are refused, so what one module needs of another has a
public, named home. A module's own names, and dunder names, are its own."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import REPO, absolute_module

PACKAGES = ("docsum", "cli")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_reaches(source: str, importer: str, is_package: bool, modules: set[str]) -> list[str]:  # noqa: C901 (listed when the check came in: simplify, then drop this)
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


# Underscore names other packages document as public: a namedtuple's methods
# (underscored so they cannot clash with a field) and os._exit.
DOCUMENTED_UNDERSCORE = frozenset({"_replace", "_asdict", "_fields", "_make", "_field_defaults", "_exit"})


def foreign_private_reaches(source: str, importer: str, is_package: bool) -> list[str]:  # noqa: C901 (listed when the check came in: simplify, then drop this)
    """Every reach of `importer` into another package's private names:
    `from pkg import _name`, and `_name` read off a name bound by importing a
    module of another package, as `line: what`."""
    tree = ast.parse(source, importer)
    found: list[str] = []
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            origin = absolute_module(node.module, node.level, importer, is_package)
            if origin.split(".")[0] in PACKAGES or node.level:
                continue
            for alias in node.names:
                if is_private(alias.name) and alias.name not in DOCUMENTED_UNDERSCORE:
                    found.append(f"{node.lineno}: from {origin} import {alias.name}")
                bound[alias.asname or alias.name] = f"{origin}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in PACKAGES:
                    bound[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0]
                    )
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and is_private(node.attr)) or node.attr in DOCUMENTED_UNDERSCORE:
            continue
        chain: list[str] = []
        value: ast.expr = node.value
        while isinstance(value, ast.Attribute):
            chain.append(value.attr)
            value = value.value
        if isinstance(value, ast.Name) and value.id in bound:
            found.append(f"{node.lineno}: {'.'.join([bound[value.id], *reversed(chain)])}.{node.attr}")
    return found


def test_no_module_reaches_into_another_packages_private_names() -> None:
    reaches = [
        f"{path.relative_to(REPO)}:{reach}"
        for path in project_files()
        for reach in foreign_private_reaches(
            path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py"
        )
    ]
    assert reaches == [], "other packages' private names used:\n" + "\n".join(reaches)


def test_the_scan_sees_reaches_into_other_packages() -> None:
    probe = (
        "import sys\n"
        "import openai.resources as res\n"
        "from tiktoken.load import _private_loader\n"
        "from urllib.parse import urlsplit\n"
        "from docsum.models import llm\n"
        "print(sys._getframe(), res.chat._client, urlsplit('x')._replace(), llm._own_to_this_project)\n"
    )
    assert sorted(foreign_private_reaches(probe, "docsum.query.probe", False)) == [
        "3: from tiktoken.load import _private_loader",
        "6: openai.resources.chat._client",
        "6: sys._getframe",
    ]
