"""Regular expressions compiled when first used.

Python's `re` compiler is written in Python: a pattern with a large character
class (every CJK code point) or many case-insensitive alternatives costs it
0.5-4 ms, and a module that declares twenty patterns pays for all of them at
import, in every process, though a command uses a few. A `LazyPattern` is
declared like `re.compile(...)` and compiled by the first call of one of its
methods; the compiled pattern is the same, so every match is too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any


class LazyPattern:
    """`re.compile(pattern, flags)`, made on first use."""

    __slots__ = ("pattern", "flags", "_compiled")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled_yet(self) -> bool:
        return self._compiled is not None

    @property
    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self.pattern, self.flags)
        return self._compiled

    def search(self, *args: Any) -> re.Match[str] | None:
        return self.compiled.search(*args)

    def match(self, *args: Any) -> re.Match[str] | None:
        return self.compiled.match(*args)

    def fullmatch(self, *args: Any) -> re.Match[str] | None:
        return self.compiled.fullmatch(*args)

    def finditer(self, *args: Any) -> Iterator[re.Match[str]]:
        return self.compiled.finditer(*args)

    def findall(self, *args: Any) -> list[Any]:
        return self.compiled.findall(*args)

    def sub(self, *args: Any, **kwargs: Any) -> str:
        return self.compiled.sub(*args, **kwargs)

    def split(self, *args: Any, **kwargs: Any) -> list[Any]:
        return self.compiled.split(*args, **kwargs)
