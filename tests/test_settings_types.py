"""`Settings` values are typed attributes (issue 14), and the attributes
cannot drift from the one declaration in docsum.settings: same names, same
order, the type each setting's kind gives, and no default stated twice."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from docsum.config import Settings, load_settings
from docsum.settings import SETTINGS


def test_every_setting_is_an_attribute_of_its_declared_type() -> None:
    fields = [f for f in dataclasses.fields(Settings) if f.name != "sources"]
    assert [f.name for f in fields] == [s.name for s in SETTINGS]
    for f, setting in zip(fields, SETTINGS):
        assert f.type == setting.annotation, f"{f.name}: {f.type} in Settings, {setting.annotation} by its kind"
        # The default lives in the table only.
        assert f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING, f.name


def test_loaded_values_have_those_types(tmp_path: Path) -> None:
    flags = {
        "summary_prompt": str(tmp_path / "p.txt"),
        "var": ["tone=dry"],
        "timeout": "5",
        "stream": True,
        "exclude": ["*.log"],
    }
    settings = load_settings(flags, environ={"DOCSUM_TOP_K": "4"})
    python_types = {"str": str, "int": int, "float": float, "bool": bool, "Path": Path}
    for setting in SETTINGS:
        value = getattr(settings, setting.name)
        if value is None:
            assert setting.annotation.endswith("| None"), setting.name
            continue
        base = setting.kind.value_type
        assert isinstance(
            value, list if base.startswith("list[") else tuple if base.startswith("tuple[") else python_types[base]
        ), setting.name
    assert settings.top_k == 4 and settings.sources["top_k"] == "env DOCSUM_TOP_K"
    assert settings.var == [("tone", "dry")] and settings.summary_prompt == tmp_path / "p.txt"


def test_settings_are_frozen_and_keep_the_key_out_of_their_repr() -> None:
    settings = load_settings({}, environ={"OPENAI_API_KEY": "sk-secret-in-repr"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.top_k = 5  # type: ignore[misc]
    assert settings.api_key == "sk-secret-in-repr" and "sk-secret-in-repr" not in repr(settings)
