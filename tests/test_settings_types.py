"""`Settings` is read from the one declaration in docsum.settings: its
attributes are the table's names, each loaded value has the type its kind
declares, and no second list of settings exists to drift from the table."""

from __future__ import annotations

from pathlib import Path

import pytest

from docsum.config import Settings, load_settings
from docsum.settings import SETTINGS


def test_every_setting_is_an_attribute_and_nothing_else_is() -> None:
    settings = load_settings({}, environ={})
    assert list(settings.values) == [s.name for s in SETTINGS]
    for setting in SETTINGS:
        assert getattr(settings, setting.name) == settings.values[setting.name]
    with pytest.raises(AttributeError):
        settings.no_such_setting  # noqa: B018 - the lookup itself is the test


def test_settings_cannot_be_made_with_a_missing_or_unknown_name() -> None:
    values = load_settings({}, environ={}).values
    with pytest.raises(TypeError, match="missing"):
        Settings({k: v for k, v in values.items() if k != "top_k"})
    with pytest.raises(TypeError, match="unknown"):
        Settings({**values, "top_kk": 3})


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
            assert setting.default is None, setting.name
            continue
        base = setting.kind.value_type
        assert isinstance(
            value, list if base.startswith("list[") else tuple if base.startswith("tuple[") else python_types[base]
        ), setting.name
    assert settings.top_k == 4 and settings.sources["top_k"] == "env DOCSUM_TOP_K"
    assert settings.var == [("tone", "dry")] and settings.summary_prompt == tmp_path / "p.txt"


def test_settings_are_read_only_and_keep_the_key_out_of_their_repr() -> None:
    settings = load_settings({}, environ={"OPENAI_API_KEY": "sk-secret-in-repr"})
    with pytest.raises(AttributeError):
        settings.top_k = 5
    assert settings.api_key == "sk-secret-in-repr" and "sk-secret-in-repr" not in repr(settings)
