"""Importing the `openai` package without building the hundreds of model
classes docsum never uses.

`import openai` runs the `__init__` of `openai.types`, `openai.resources`,
`openai.lib` and their subpackages, which import every request and response
model of every endpoint eagerly: on this project's machine 0.8 of its 0.9 s.
docsum sends only chat completions and embeddings, and reads their replies as
plain JSON (see `openaillm`), so it needs none of them.

`import_openai()` imports the package with a meta-path finder in place that,
for packages under those three names only, defers the package's `__init__`:
the package module is created with its `__path__` (so its submodules import
as usual) and a module-level `__getattr__`/`__dir__` (PEP 562) that runs the
real `__init__` the first time a name is read that is not already there.
Everything anyone reads therefore sees what an eager import gives:

- `from openai.types import CreateEmbeddingResponse`: the `__init__` runs,
  the class is returned;
- `from openai.types import embedding_create_params` (a submodule): the
  submodule is imported and returned without the `__init__`, but only when
  the `__init__` cannot bind that name to anything else (its source mentions
  the name only as `from .name`); otherwise the `__init__` runs first;
- exception classes, the client and the streaming classes live outside the
  deferred packages and are the very same objects;
- another thread reading a name while the `__init__` runs waits for it (one
  re-entrant lock per package), as it would wait on the import lock.

The finder is in `sys.meta_path` only while docsum's own `import openai`
runs; packages imported later (by a library that reads more of openai) are
imported normally. If the deferred import raises anything at all, it is
undone (the finder and every partly imported `openai` module removed) and the
package imported the ordinary way: a future `openai` whose `__init__`s do
something this scheme cannot defer costs start-up time, never correctness.
`vars()` on a deferred package, which no hook can intercept, shows it before
its `__init__` ran; docsum never does that.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import logging
import re
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

log = logging.getLogger("docsum")

# The packages whose `__init__`s only re-export model classes and resources.
DEFERRED_PREFIXES = ("openai.types", "openai.resources", "openai.lib")

# Serialises docsum's own imports of the package: two threads making their
# first request at once install the finder once.
_IMPORT_LOCK = threading.Lock()


class InitShape:
    """What a package's `__init__` does, read from its source (never run).

    Pure: every statement is a relative `from .x import A as B` (or the
    docstring, or `from __future__`), as in the generated `openai.types`
    packages. Then each name it binds can be had by importing just the one
    submodule that defines it: the very object the whole `__init__` would
    bind. A name bound twice, or bound and also a submodule's name, is left
    to the whole `__init__` (the later binding would win)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.pure = False
        self.bindings: dict[str, tuple[str, str]] = {}  # name -> (relative module, attribute)
        if not source:
            return
        import ast

        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            return
        submodules: set[str] = set()
        bound: dict[str, int] = {}
        for node in tree.body:
            if (
                isinstance(node, ast.Expr)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                continue
            if isinstance(node, ast.ImportFrom) and node.module == "__future__" and node.level == 0:
                continue
            if not isinstance(node, ast.ImportFrom) or node.level < 1 or any(a.name == "*" for a in node.names):
                return
            relative = "." * node.level + (node.module or "")
            if node.level == 1 and node.module:
                submodules.add(node.module.split(".")[0])
            for alias in node.names:
                name = alias.asname or alias.name
                bound[name] = bound.get(name, 0) + 1
                if node.module is None:
                    # `from . import x`: the submodule x (or a name bound before).
                    submodules.add(alias.name)
                    continue
                self.bindings[name] = (relative, alias.name)
        for name, times in bound.items():
            if times > 1 or name in submodules:
                self.bindings.pop(name, None)
                self.bindings[name] = ("", "")  # ambiguous: only the whole __init__ says
        self.pure = True

    def mentions_only_as_submodule(self, name: str) -> bool:
        """Whether the source names `name` nowhere but as `from .name` (so
        it cannot bind that name to anything but the submodule)."""
        return bool(self.source) and re.search(rf"(?<!from \.)\b{re.escape(name)}\b", self.source) is None


class DeferredInit:
    """The state of one deferred package: its real loader, whether its
    `__init__` ran, and the lock a second reader waits on."""

    def __init__(self, module: ModuleType, loader: importlib.abc.Loader) -> None:
        self.module = module
        self.loader = loader
        self.lock = threading.RLock()
        self.state = "deferred"  # then "running" (in the thread holding the lock), then "done"
        self._shape: InitShape | None = None

    def attribute(self, name: str) -> Any:
        """What `module.name` is after an eager import."""
        with self.lock:
            if self.state == "running":
                # Read by the `__init__` itself (`from . import sub` probes
                # with hasattr first): a plain module has no such name yet.
                raise AttributeError(f"module {self.module.__name__!r} has no attribute {name!r}")
            if self.state == "deferred" and name.isidentifier() and not name.startswith("__"):
                found = self._without_init(name)
                if found is not None:
                    return found[0]
            self.run()
        return getattr(self.module, name)

    def names(self) -> list[str]:
        with self.lock:
            if self.state == "deferred":
                self.run()
        return sorted(self.module.__dict__)

    def run(self) -> None:
        """Run the real `__init__` (the caller holds the lock)."""
        if self.state != "deferred":
            return
        self.state = "running"
        hooks = (self.module.__dict__.get("__getattr__"), self.module.__dict__.get("__dir__"))
        try:
            self.loader.exec_module(self.module)
        finally:
            self.state = "done"
            # Ours go; a `__getattr__` the `__init__` defined itself stays.
            for key, hook in zip(("__getattr__", "__dir__"), hooks):
                if self.module.__dict__.get(key) is hook:
                    del self.module.__dict__[key]

    def _without_init(self, name: str) -> tuple[Any] | None:
        """`(value,)` when `name` can be had exactly without the whole
        `__init__`; None when only running it can tell."""
        shape = self.shape()
        if shape.pure:
            binding = shape.bindings.get(name)
            if binding is None:
                # Bound by no statement: a submodule, or no such name.
                submodule = self._import_submodule(name)
                return (submodule,) if submodule is not None else None
            relative, attribute = binding
            if not relative:
                return None
            try:
                value = getattr(importlib.import_module(relative, self.module.__name__), attribute)
            except Exception:  # noqa: BLE001 - the whole __init__ raises it the eager way
                return None
            self.module.__dict__[name] = value  # what the __init__ would bind; later reads skip the hook
            return (value,)
        if shape.mentions_only_as_submodule(name):
            submodule = self._import_submodule(name)
            if submodule is not None:
                return (submodule,)
        return None

    def shape(self) -> InitShape:
        if self._shape is None:
            try:
                get_source = getattr(self.loader, "get_source", None)
                source = (get_source(self.module.__name__) if get_source else None) or ""
            except (ImportError, OSError, UnicodeDecodeError):
                source = ""
            self._shape = InitShape(source)
        return self._shape

    def _import_submodule(self, name: str) -> ModuleType | None:
        fullname = f"{self.module.__name__}.{name}"
        try:
            return importlib.import_module(fullname)
        except ModuleNotFoundError as exc:
            if exc.name != fullname:
                raise
            return None


def is_deferred(module: ModuleType) -> bool:
    """Whether `module` is a package whose `__init__` has not run yet."""
    hook = module.__dict__.get("__getattr__")
    state = getattr(hook, "deferred_init", None)
    return isinstance(state, DeferredInit) and state.state != "done"


class DeferredPackageLoader(importlib.abc.Loader):
    """Wraps a package's real loader: the module is made and given its hooks;
    the real `exec_module` runs on the first read of a missing name."""

    def __init__(self, real: importlib.abc.Loader) -> None:
        self.real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.real.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        # From here on the module reports its real loader (inspect, pkgutil,
        # importlib.resources and a reload all use that one).
        module.__loader__ = self.real
        if module.__spec__ is not None:
            module.__spec__.loader = self.real
        deferred = DeferredInit(module, self.real)

        def __getattr__(name: str) -> Any:
            return deferred.attribute(name)

        def __dir__() -> list[str]:
            return deferred.names()

        __getattr__.deferred_init = deferred  # type: ignore[attr-defined]
        module.__getattr__ = __getattr__  # type: ignore[method-assign]
        module.__dir__ = __dir__  # type: ignore[method-assign]

    def __getattr__(self, name: str) -> Any:
        # get_source, get_filename, get_resource_reader, ...: the real one's.
        return getattr(self.real, name)


class DeferredPackageFinder(importlib.abc.MetaPathFinder):
    """Finds what the rest of `sys.meta_path` finds; for a package under
    `prefixes`, hands back its spec with the real loader wrapped."""

    def __init__(self, prefixes: tuple[str, ...] = DEFERRED_PREFIXES) -> None:
        self.prefixes = prefixes

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not any(fullname == p or fullname.startswith(p + ".") for p in self.prefixes):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.submodule_search_locations is None or spec.loader is None:
            return spec  # a plain module, or not found by path: imported as usual
        if not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = DeferredPackageLoader(spec.loader)
        return spec


def import_openai(verify: Callable[[ModuleType], object] | None = None) -> ModuleType:
    """The `openai` package, imported with its model packages deferred, or
    the ordinary way when that fails. `verify` reads what the caller needs
    from the module (inside the deferred attempt, so a failure there also
    falls back)."""
    loaded = sys.modules.get("openai")
    if loaded is not None:
        return loaded
    with _IMPORT_LOCK:
        loaded = sys.modules.get("openai")
        if loaded is not None:
            return loaded
        finder = DeferredPackageFinder()
        sys.meta_path.insert(0, finder)
        try:
            module = importlib.import_module("openai")
            if verify is not None:
                verify(module)
            return module
        except Exception as exc:  # anything: the ordinary import is the answer
            log.debug("deferred import of openai failed (%s: %s); importing it eagerly", type(exc).__name__, exc)
            forget_openai()
        finally:
            if finder in sys.meta_path:
                sys.meta_path.remove(finder)
        return importlib.import_module("openai")


def forget_openai() -> None:
    """Remove every `openai` module from `sys.modules` (a failed import's
    leftovers), so the next import starts afresh."""
    for name in [n for n in sys.modules if n == "openai" or n.startswith("openai.")]:
        del sys.modules[name]
