"""The reference docs are generated from the settings table and the typer
app; the checked-in copies must be what the generator gives now."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from helpers import REPO

from cli import gendocs
from docsum.settings import SETTINGS


def test_the_checked_in_reference_docs_are_current() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cli.gendocs", "--check"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr + "\nrun: python -m docsum_cli.gendocs"


def test_check_finds_a_stale_file_and_writing_fixes_it(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs)
    (docs / "cli.md").write_text((docs / "cli.md").read_text(encoding="utf-8").replace("--dry-run", "--dryrun"))
    assert gendocs.main(["--check", "--docs", str(docs)]) == 1
    assert gendocs.main(["--docs", str(docs)]) == 0
    assert gendocs.main(["--check", "--docs", str(docs)]) == 0


def test_every_setting_and_every_command_is_in_the_references() -> None:
    configuration = gendocs.configuration_md()
    cli = gendocs.cli_md()
    for setting in SETTINGS:
        assert f"`{setting.name}`" in configuration or f"{setting.name} (flag only)" in configuration, setting.name
        if setting.option and setting.commands:
            assert setting.option in cli, setting.option
        for var in setting.env:
            assert var in configuration, var
    for words in gendocs.command_paths()[1:]:
        assert f"Usage: docsum {' '.join(words)}" in cli, words
