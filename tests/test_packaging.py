"""Packaging (issue 14 item 5): what an install puts into site-packages, the
licence, and the library's independence from the CLI's packages."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from helpers import REPO

import docsum


def test_the_library_never_imports_typer_or_rich() -> None:
    """Every module of docsum/, imported in a fresh interpreter, pulls in
    neither typer nor rich (nor the CLI package)."""
    modules = sorted(m.name for m in pkgutil.walk_packages(docsum.__path__, "docsum."))
    assert "docsum.query.ask" in modules and "docsum.builder.pipeline" in modules
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('typer', 'rich', 'click', 'cli', 'docsum_cli'))\n"
        "print(' '.join(bad))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def test_the_licence_file_matches_pyproject() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == {"text": "MIT"}
    assert (REPO / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")


def test_an_install_puts_no_generic_cli_package_into_site_packages(tmp_path: Path) -> None:
    """What setuptools would copy into site-packages, built offline from the
    checkout's own configuration (nothing written inside the checkout)."""
    pytest.importorskip("setuptools")
    lib = tmp_path / "lib"
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from setuptools import setup; setup()",
            "-q",
            "egg_info",
            "--egg-base",
            str(tmp_path),
            "build_py",
            "--build-lib",
            str(lib),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in lib.iterdir()) == ["docsum", "docsum_cli"]
    assert (lib / "docsum_cli" / "main.py").is_file()
    # Every module of the library is installed: a sub-package missing from
    # pyproject's explicit package list would import in a checkout and fail
    # after `pip install .`.
    source = sorted(str(p.relative_to(REPO)) for p in (REPO / "docsum").rglob("*.py"))
    installed = sorted(str(p.relative_to(lib)) for p in (lib / "docsum").rglob("*.py"))
    assert installed == source
    entry_points = (tmp_path / "docsum.egg-info" / "entry_points.txt").read_text(encoding="utf-8")
    assert "docsum = docsum_cli.main:run" in entry_points
