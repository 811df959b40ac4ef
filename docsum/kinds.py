"""The kinds of value a setting takes (docsum.settings declares which kind
each setting has): how text becomes a value, the one statement of its range,
and what --help calls it. Imports nothing heavy: --help reads it."""

from __future__ import annotations

import math
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docsum.sanitize import mask_url
from docsum.stimuli import EMOTION_STIMULI

RETRIEVERS = ("fused", "embedding", "bm25", "llm", "hybrid")


@dataclass(frozen=True)
class Kind:
    """A kind of value: how text becomes one (`parse`), which Python values
    are allowed (`check`, the one statement of the range), and what --help
    calls it."""

    metavar: str
    parse: Callable[[str], Any]
    check: Callable[[Any], Any]
    switch: bool = False  # an on/off flag that takes no value
    toggle: bool = False  # --name/--no-name, unset by default
    repeated: bool = False  # the flag may be given many times; the value is a list
    # The Python type of a checked value (tests/test_settings_types.py holds
    # every loaded value to it).
    value_type: str = "str"


def _from_text(convert: Callable[[str], Any], what: str, check: Callable[[Any], Any]) -> Callable[[str], Any]:
    """Text to a value by `convert`, then checked: one message for text that is not a value at all."""

    def parse(text: str) -> Any:
        try:
            value = convert(text.strip())
        except ValueError:
            raise ValueError(f"{text!r} is not a {what}") from None
        return check(value)

    return parse


def whole(low: int, high: int | None = None) -> Kind:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{value!r} is not a whole number")
        if value < low or (high is not None and value > high):
            allowed = f"{low}..{high}" if high is not None else f"at least {low}"
            raise ValueError(f"{value} is out of range (allowed: {allowed})")
        return value

    return Kind("INTEGER", _from_text(int, "whole number", check), check, value_type="int")


def number(low: float, high: float, *, above_low: bool = False, unit: str = "number") -> Kind:
    """A finite float in low..high (more than `low` with above_low)."""

    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{value!r} is not a {unit}")
        value = float(value)
        # "nan" and "inf" parse as floats; neither is a usable value.
        too_low = value <= low if above_low else value < low
        if not math.isfinite(value) or too_low or value > high:
            allowed = f"more than {low:g}, at most {high:g}" if above_low else f"{low:g}..{high:g}"
            raise ValueError(f"{value:g} is out of range (allowed: {allowed})")
        return value

    return Kind("FLOAT", _from_text(float, unit, check), check, value_type="float")


def choice(*allowed: str) -> Kind:
    def check(value: Any) -> str:
        if value not in allowed:
            raise ValueError(f"{value!r} is not one of {', '.join(allowed)}")
        return str(value)

    return Kind("[" + "|".join(allowed) + "]", check, check)


def text(metavar: str = "TEXT") -> Kind:
    def check(value: Any) -> str:
        if not isinstance(value, str):
            raise ValueError(f"{value!r} is not text")
        return value

    return Kind(metavar, check, check)


def path(metavar: str = "PATH") -> Kind:
    def check(value: Any) -> Path:
        if not isinstance(value, (str, Path)) or not str(value).strip():
            raise ValueError(f"{value!r} is not a file name")
        return Path(value).expanduser()

    return Kind(metavar, check, check, value_type="Path")


def _http_url(value: Any) -> str:
    """An http(s) URL with a host and, if given, a port in 1..65535."""
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a URL")
    value = value.strip()
    try:
        parts = urllib.parse.urlsplit(value)
        port = parts.port  # raises ValueError for a port out of range or not a number
    except ValueError as exc:
        raise ValueError(f"{mask_url(value)} is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{mask_url(value)} is not an http:// or https:// URL with a host")
    if port == 0:
        raise ValueError(f"{mask_url(value)}: port 0 is not a port a server listens on")
    return value


URL = Kind("URL", _http_url, _http_url)


def _switch_check(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{value!r} is not true or false")
    return value


SWITCH = Kind("", _switch_check, _switch_check, switch=True, value_type="bool")
TOGGLE = Kind("", _switch_check, _switch_check, toggle=True, value_type="bool")


def _name_value(value: Any) -> tuple[str, str]:
    if isinstance(value, tuple):
        return value
    name, sep, rest = str(value).partition("=")
    if not sep or not name.strip().isidentifier():
        raise ValueError(f"takes NAME=VALUE, got {value!r}")
    return name.strip(), rest


def repeated(item: Kind) -> Kind:
    def check(values: Any) -> list[Any]:
        if not isinstance(values, (list, tuple)):
            raise ValueError(f"{values!r} is not a list")
        return [item.check(v) for v in values]

    def parse(text: str) -> list[Any]:
        return [item.parse(text)]

    return Kind(item.metavar, parse, check, repeated=True, value_type=f"list[{item.value_type}]")


NAME_VALUE = Kind("NAME=VALUE", _name_value, _name_value, value_type="tuple[str, str]")


def _retriever_list_check(values: Any) -> list[str]:
    if not isinstance(values, (list, tuple)) or not values:
        raise ValueError(f"{values!r} names no retriever")
    unknown = [v for v in values if v not in RETRIEVERS]
    if unknown:
        raise ValueError(f"unknown retriever {unknown[0]!r}; choose from {', '.join(RETRIEVERS)} or 'all'")
    return list(dict.fromkeys(values))


def _retriever_list(text: str) -> list[str]:
    if text.strip() == "all":
        return list(RETRIEVERS)
    return _retriever_list_check([n.strip() for n in text.split(",") if n.strip()] or [text])


def _emotion(value: Any) -> str:
    if not isinstance(value, str) or (value.lower() != "none" and value.upper() not in EMOTION_STIMULI):
        raise ValueError(f"unknown emotion stimulus {value!r}; use EP01..EP11 or none")
    return value


EMOTION = Kind("STIMULUS", _emotion, _emotion)


# "fused,bm25" or "all": several retrievers compared by `docsum eval`.
RETRIEVER_LIST = Kind("NAMES", _retriever_list, _retriever_list_check, value_type="list[str]")


def _index_name(value: Any) -> str:
    from docsum.paths import validate_index_name

    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not an index name")
    return validate_index_name(value)


INDEX_NAME = Kind("NAME", _index_name, _index_name)
