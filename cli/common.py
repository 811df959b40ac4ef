"""Options every command takes, added to each command by one decorator, and
the mapping from docsum's errors to exit codes."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import os
import signal
import sqlite3
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Awaitable, Callable, Optional, TypeVar, Union, get_args, get_origin

import typer

from docsum.config import Settings, load_settings, make_llm
from docsum.errors import DocsumError, ExitCode, Interrupted
from docsum.paths import data_dir, resolve_store_path, validate_index_name
from docsum.store.base import StoreLocation, is_postgres, location_secrets

from .env import Environment, configure_logging

if TYPE_CHECKING:  # the engines (and numpy) load when a command asks for one
    from docsum.models.llm import LLM

T = TypeVar("T")


@dataclass
class Common:
    env: Environment
    settings: Settings
    store: Optional[str]
    index: Optional[str]
    json: bool

    def store_path(self) -> StoreLocation:
        """The store file, or a postgresql:// URL (kept a string: Path would fold its "//")."""
        if self.index is not None:
            # Validated even when --store wins: a typo is reported, not ignored.
            validate_index_name(self.index)
        if self.store:
            return _location(self.store)
        if self.index:
            # An explicit --index beats $DOCSUM_STORE: flags win over the environment.
            return data_dir() / "indexes" / f"{validate_index_name(self.index)}.sqlite"
        configured = self.settings.values.get("store")  # $DOCSUM_STORE, else config.toml
        if configured:
            return _location(str(configured))
        return resolve_store_path(None, None)

    def llm(self) -> LLM:
        llm, notice = make_llm(self.settings)
        if notice:
            self.env.info(notice)
        return llm


def _location(text: str) -> StoreLocation:
    return text.strip() if is_postgres(text) else Path(text).expanduser()


_COMMON_PARAMS = [
    inspect.Parameter("store", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[Optional[str], typer.Option("--store", help="Store file or postgresql:// URL (default: $DOCSUM_STORE, else the named index).", rich_help_panel="Common")]),
    inspect.Parameter("index", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[Optional[str], typer.Option("--index", help="Named store under the docsum data directory (default: default).", rich_help_panel="Common")]),
    inspect.Parameter("llm_engine", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[Optional[str], typer.Option("--llm", help="auto | openai | extractive.", rich_help_panel="Common")]),
    inspect.Parameter("model", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[Optional[str], typer.Option("--model", help="Chat model name.", rich_help_panel="Common")]),
    inspect.Parameter("embed_model", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[Optional[str], typer.Option("--embed-model", help="Embedding model name.", rich_help_panel="Common")]),
    inspect.Parameter("base_url", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[Optional[str], typer.Option("--base-url", help="OpenAI-compatible server URL, e.g. http://127.0.0.1:11434/v1.", rich_help_panel="Common")]),
    inspect.Parameter("context_window", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[Optional[int], typer.Option("--context-window", min=256, help="Model context window in tokens.", rich_help_panel="Common")]),
    inspect.Parameter("max_output_tokens", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[Optional[int], typer.Option("--max-output-tokens", min=16, help="Tokens reserved for each answer.", rich_help_panel="Common")]),
    inspect.Parameter("concurrency", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[Optional[int], typer.Option("--concurrency", min=1, help="Most LLM requests in flight (default 8).", rich_help_panel="Common")]),
    inspect.Parameter("json_out", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.", rich_help_panel="Common")]),
    inspect.Parameter("quiet", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=Annotated[bool, typer.Option("--quiet", "-q", help="Only errors on stderr.", rich_help_panel="Common")]),
    inspect.Parameter("verbose", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=Annotated[bool, typer.Option("--verbose", "-v", help="More detail on stderr.", rich_help_panel="Common")]),
    inspect.Parameter("no_color", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=Annotated[bool, typer.Option("--no-color", help="No colours (NO_COLOR is honoured too).", rich_help_panel="Common")]),
]
_COMMON_NAMES = [p.name for p in _COMMON_PARAMS]


def with_common(func: Callable[..., int | None]) -> Callable[..., None]:
    """Give a command the common options; it receives them as `common`.
    Its return value is the exit code; DocsumError becomes a one-line message
    and that error's code."""
    sig = inspect.signature(func, eval_str=True)  # string annotations (PEP 563) would lose the typer.Option details
    own = [p for name, p in sig.parameters.items() if name != "common"]

    @functools.wraps(func)
    def wrapper(**kwargs: Any) -> None:
        picked = {name: kwargs.pop(name) for name in _COMMON_NAMES}
        env = Environment.from_os()
        env.quiet, env.verbose = picked["quiet"], picked["verbose"]
        if picked["no_color"]:
            env.color = False
        logger = logging.getLogger("docsum")
        saved = (list(logger.handlers), logger.propagate, logger.level)
        configure_logging(env)
        code: int = ExitCode.OK
        failure: tuple[str, str] | None = None  # (type, message) for the --json error document
        try:
            settings = load_settings(
                {
                    "llm": picked["llm_engine"],
                    "model": picked["model"],
                    "embed_model": picked["embed_model"],
                    "base_url": picked["base_url"],
                    "context_window": picked["context_window"],
                    "max_output_tokens": picked["max_output_tokens"],
                    "concurrency": picked["concurrency"],
                    **{k: v for k, v in kwargs.items() if k in ("chunk_size", "chunk_overlap", "top_k", "retriever", "choice_batch_size", "candidates", "max_calls")},
                }
            )
            for secret in settings.secret_values():
                env.secrets.add(secret)
            common = Common(env, settings, picked["store"], picked["index"], picked["json_out"])
            with contextlib.suppress(ValueError):  # a bad --index is reported by the command itself
                for secret in location_secrets(common.store_path()):
                    env.secrets.add(secret)
            code = func(common=common, **kwargs) or ExitCode.OK
        except Interrupted as exc:
            name = "SIGTERM" if exc.exit_code == ExitCode.SIGTERM else "SIGINT"
            env.error(f"docsum: interrupted by {name}")
            code, failure = exc.exit_code, ("Interrupted", f"interrupted by {name}")
        except DocsumError as exc:
            env.error(f"docsum: error: {exc}")
            code, failure = exc.exit_code, (type(exc).__name__, str(exc))
        except ValueError as exc:  # bad names and values that slipped past option parsing
            env.error(f"docsum: error: {exc}")
            code, failure = ExitCode.USAGE, ("ConfigError", str(exc))
        except KeyboardInterrupt:
            env.error("docsum: interrupted")
            code, failure = ExitCode.SIGINT, ("Interrupted", "interrupted by SIGINT")
        except BrokenPipeError:
            # `docsum summaries | head`: the reader has all it wanted. Point
            # stdout at /dev/null so the interpreter's final flush stays quiet.
            with contextlib.suppress(OSError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            code = ExitCode.OK
        except (OSError, sqlite3.OperationalError) as exc:
            # The machine, not docsum: a full disk, a read-only folder, a
            # permission. Say what and where, without a traceback.
            if env.verbose:
                env.error("".join(traceback.format_exception(exc)).rstrip())
            if isinstance(exc, OSError) and exc.strerror:
                where = f": {exc.filename}" if exc.filename else ""
                message = f"{exc.strerror.lower()}{where}"
            else:
                message = f"store: {exc}"
            env.error(f"docsum: error: {message}")
            code, failure = ExitCode.ERROR, (type(exc).__name__, message)
        except Exception as exc:  # a bug: one line by default, the traceback with -v
            if env.verbose:
                env.error("".join(traceback.format_exception(exc)).rstrip())
            hint = "" if env.verbose else " (run with -v for details)"
            env.error(f"docsum: internal error: {type(exc).__name__}: {exc}{hint}")
            code, failure = ExitCode.ERROR, ("InternalError", f"{type(exc).__name__}: {exc}")
        finally:
            # Library users (and in-process tests) keep their own logging setup.
            logger.handlers[:], logger.propagate, logger.level = saved[0], saved[1], saved[2]
        if picked["json_out"] and failure is not None and not env.wrote_stdout:
            # With --json every outcome is one JSON document on stdout.
            with contextlib.suppress(OSError, ValueError):
                env.out_json({"error": {"exit_code": int(code), "type": failure[0], "message": failure[1]}})
        if code:
            raise typer.Exit(int(code))

    for param in own + _COMMON_PARAMS:
        _name_the_value(param)
    wrapper.__signature__ = sig.replace(parameters=own + _COMMON_PARAMS)  # type: ignore[attr-defined]
    return wrapper


# What --help calls a value of each type (typer's own default shows Python
# types: "<list[Path]>", "<float range>").
_METAVARS: dict[Any, str] = {int: "INTEGER", float: "FLOAT", str: "TEXT", Path: "PATH"}


def _name_the_value(param: inspect.Parameter) -> None:
    """Give an option or argument without a metavar the plain one for its
    type: FLOAT, PATH; an argument its own name (PATH, QUESTION)."""
    if get_origin(param.annotation) is not Annotated:
        return
    base, *extras = get_args(param.annotation)
    info = next((e for e in extras if isinstance(e, typer.models.ParameterInfo)), None)
    if info is None or info.metavar:
        return
    if get_origin(base) is Union:  # Optional[X]
        base = next(a for a in get_args(base) if a is not type(None))
    many = get_origin(base) is list
    if many:
        base = get_args(base)[0]
    if base is bool:
        return
    if isinstance(info, typer.models.ArgumentInfo):
        # typer itself marks a repeatable argument ("PATH...").
        info.metavar = param.name.upper().rstrip("S") if many else param.name.upper()
    elif base in _METAVARS:
        info.metavar = _METAVARS[base]


def run_async(coro_factory: Callable[[], Awaitable[T]]) -> T:
    """Run the command's coroutine; SIGINT and SIGTERM cancel it cleanly (open
    transactions roll back, locks are released) and become exit 130 / 143."""

    async def main() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        received: list[int] = []

        def stop(signum: int) -> None:
            received.append(signum)
            assert task is not None
            task.cancel()

        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(signum, stop, signum)
            except (NotImplementedError, RuntimeError):
                pass
        try:
            return await coro_factory()
        except asyncio.CancelledError:
            if received:
                raise Interrupted(received[0]) from None
            raise
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.remove_signal_handler(signum)
                except (NotImplementedError, RuntimeError):
                    pass

    return asyncio.run(main())
