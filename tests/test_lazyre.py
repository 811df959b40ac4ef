"""A LazyPattern is the pattern re.compile makes, compiled on first use."""

from __future__ import annotations

import re

from docsum.lazyre import LazyPattern


def test_a_lazy_pattern_matches_as_the_compiled_one_and_compiles_once() -> None:
    lazy = LazyPattern(r"(\d+)\s*(apples?)", re.IGNORECASE)
    eager = re.compile(r"(\d+)\s*(apples?)", re.IGNORECASE)
    assert not lazy.compiled_yet
    text = "3 Apples, 10 apple and 7 pears"
    assert lazy.search(text).group(0) == eager.search(text).group(0)  # type: ignore[union-attr]
    assert lazy.compiled_yet and lazy.compiled is lazy.compiled
    assert lazy.findall(text) == eager.findall(text)
    assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in eager.finditer(text)]
    assert lazy.match(text) and lazy.fullmatch("3 apples") and not lazy.fullmatch(text)
    assert lazy.sub(r"\2", text, count=1) == eager.sub(r"\2", text, count=1)
    assert lazy.split(text) == eager.split(text)
    assert lazy.search(text, 5) and lazy.search(text, 5).start() == eager.search(text, 5).start()  # type: ignore[union-attr]
