"""The options of each command, generated from docsum.settings by one
decorator, and the mapping from docsum's errors to exit codes."""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import os
import sys
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from docsum.errors import DocsumError, ExitCode, Interrupted, one_line
from docsum.sanitize import scrub
from docsum.settings import EVERY_COMMAND, Setting, for_command

from .env import Environment, configure_logging

if TYPE_CHECKING:  # the engines (and numpy) load when a command asks for one; the store when it opens one;
    # the settings' loader (with the TOML reader and the platform's folders) when a command runs, not for --help
    from docsum.config import Settings
    from docsum.locations import StoreLocation
    from docsum.models.llm import LLM


@dataclass
class Common:
    """What every command receives: where to write, and every setting's value."""

    env: Environment
    settings: Settings
    _notice: str | None = None

    @property
    def json(self) -> bool:
        return bool(self.settings.json)

    def store_path(self) -> StoreLocation:
        """The store this command uses (docsum.config.store_location: one rule for every command)."""
        from docsum.config import store_location

        return store_location(self.settings)

    def llm(self) -> LLM:
        """The engine the settings select. Its notice (the offline engine, a
        guessed model name) waits for `start()`."""
        from docsum.config import make_llm

        llm, self._notice = make_llm(self.settings)
        return llm

    def start(self) -> None:
        """Called once a command has checked everything it was given, before
        it does any work. So the order is the same for every error: a usage
        error (bad option, file, mode, template) comes alone, before any
        notice; the engine notice comes only when the command goes on, and
        any later error follows it."""
        if self._notice:
            self.env.info(self._notice)
            self._notice = None


def _option(setting: Setting) -> inspect.Parameter:
    """The typer option of one declared setting. Every value reaches
    docsum.config.load_settings as the text the user typed, so it is checked
    there, once, with the same rule as the environment and the config file."""
    kind, flag = setting.kind, setting.option
    assert flag is not None
    names = [flag] + ([setting.short] if setting.short else [])
    panel = "Common" if setting.commands == EVERY_COMMAND else None
    annotation: Any
    if kind.switch:
        annotation, default = bool, False
        info = typer.Option(*names, help=setting.help_text, rich_help_panel=panel)
    elif kind.toggle:
        annotation, default = bool | None, None
        info = typer.Option(f"{flag}/--no-{flag[2:]}", help=setting.help_text, rich_help_panel=panel)
    else:
        annotation, default = (list[str] | None if kind.repeated else str | None), None
        info = typer.Option(
            *names, metavar=kind.metavar, help=setting.help_text, rich_help_panel=panel, show_default=False
        )
    return inspect.Parameter(
        setting.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[annotation, info]
    )


def with_common(command: str) -> Callable[[Callable[..., int | None]], Callable[..., None]]:
    """Give a command the options docsum.settings declares for `command`; the
    function takes its own arguments and `common` (the settings, loaded and
    checked). Its return value is the exit code; DocsumError becomes a
    one-line message and that error's code."""
    # The command's own options first, then those every command takes.
    options = [_option(s) for s in sorted(for_command(command), key=lambda s: s.commands == EVERY_COMMAND)]
    names = [p.name for p in options]

    def decorate(func: Callable[..., int | None]) -> Callable[..., None]:
        sig = inspect.signature(func, eval_str=True)  # string annotations (PEP 563) would lose the typer details
        own = [p for name, p in sig.parameters.items() if name != "common"]

        @functools.wraps(func)
        def wrapper(**kwargs: Any) -> None:
            flags = {name: kwargs.pop(name) for name in names}
            _run(func, flags, kwargs)

        wrapper.__signature__ = sig.replace(parameters=own + options)  # type: ignore[attr-defined]
        return wrapper

    return decorate


def _machine_errors() -> tuple[type[Exception], ...]:
    """What the machine, not docsum, raises: OSError, and SQLite's
    OperationalError once a store was opened (sqlite3 is not imported for
    --help; never imported, it raised nothing)."""
    sqlite3 = sys.modules.get("sqlite3")
    return (OSError, sqlite3.OperationalError) if sqlite3 is not None else (OSError,)


def _run(func: Callable[..., int | None], flags: dict[str, Any], kwargs: dict[str, Any]) -> None:
    env = Environment.from_os()
    env.quiet, env.verbose = bool(flags.get("quiet")), bool(flags.get("verbose"))
    if flags.get("no_color"):
        env.color = False
    logger = logging.getLogger("docsum")
    saved = (list(logger.handlers), logger.propagate, logger.level)
    configure_logging(env)
    shown_warnings = warnings.showwarning
    warnings.showwarning = env.show_warning
    code: int = ExitCode.OK
    failure: tuple[str, str] | None = None  # (type, message) for the --json error document
    try:
        from docsum.config import load_settings
        from docsum.locations import location_secrets

        settings = load_settings(flags)
        for secret in settings.secret_values():
            env.secrets.add(secret)
        common = Common(env, settings)
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
    except _machine_errors() as exc:
        # The machine, not docsum: a full disk, a read-only folder, a
        # permission. Say what and where, without a traceback.
        if env.verbose:
            env.error("".join(traceback.format_exception(exc)).rstrip())
        if isinstance(exc, OSError) and exc.strerror:
            where = f": {exc.filename}" if exc.filename else ""
            message = f"{exc.strerror.lower()}{where}"
        else:
            # One line, and never the value sqlite3 quotes after "with text"
            # (a document's own text, when a read met damaged text).
            message = f"store: {one_line(str(exc).split(' with text ', 1)[0])}"
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
        warnings.showwarning = shown_warnings
    if flags.get("json") and failure is not None and not env.wrote_stdout:
        # With --json every outcome is one JSON document on stdout. The message
        # is as scrubbed as the stderr line: it is the same library text.
        message = scrub(failure[1], env.secrets)
        with contextlib.suppress(OSError, ValueError):
            env.out_json({"error": {"exit_code": int(code), "type": failure[0], "message": message}})
    if code:
        raise typer.Exit(int(code))


# The annotations docsum's options and arguments are declared with whose value
# is the text the parser read: load_settings checks every value itself.
_TEXT_ANNOTATIONS = (str, bool, list[str])


class _AsParsed:
    """Coercion for a text or switch parameter: the value as the parser read
    it. typer (0.2x) builds a pydantic TypeAdapter for every parameter of the
    invoked command to coerce values, even those not given; importing pydantic
    and building some forty adapters was about a fifth of a second of every
    command's start-up (bench/RESULTS.md, section 9)."""

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if value is None:
            return () if param.multiple or param.nargs == -1 else None
        if isinstance(value, (list, tuple)):
            return [str(item) for item in value]
        return value


_AS_PARSED = _AsParsed()


def _runtime_param(param: TyperOption | TyperArgument, inherited: Callable[[Any], Any]) -> Any:
    """How `param`'s value is coerced: a text or switch parameter is not sent
    through typer's pydantic coercion (see `_AsParsed`); any other (a Path)
    still is. Read defensively: `type_descriptor` is typer's, not a promise,
    and a typer without it must still coerce every value its own way."""
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    if annotation is not None and annotation in _TEXT_ANNOTATIONS:
        return _AS_PARSED
    return inherited(param)


class _PlainOption(TyperOption):
    def get_runtime_param(self) -> Any:
        return _runtime_param(self, TyperOption.get_runtime_param)


class _PlainArgument(TyperArgument):
    """An argument as --help should name it: `PATH...` and `[QUESTION]` in the
    usage line, no Python type beside it (typer's own: `{PATH}...`,
    `PATH <list[Path]>`)."""

    def get_runtime_param(self) -> Any:
        return _runtime_param(self, TyperArgument.get_runtime_param)

    def _usage_display_name(self) -> str:
        name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
        return name + ("..." if self.nargs != 1 else "")

    def _rich_display_name(self) -> str:
        return self.display_name_raw + ("..." if self.nargs != 1 else "")

    def display_type_rich(self, ctx: Any) -> str | None:
        return None


def _plain(param: Any) -> Any:
    """`param` as docsum's own class (see `_PlainOption`, `_PlainArgument`)."""
    if type(param) is TyperArgument:
        param.__class__ = _PlainArgument
    elif type(param) is TyperOption:
        param.__class__ = _PlainOption
    return param


class _PlainParameters:
    """Every parameter of the command (its --help too) made plain (`_plain`)."""

    params: list[Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            _plain(param)

    def get_help_option(self, ctx: Any) -> Any:
        return _plain(super().get_help_option(ctx))  # type: ignore[misc]


class DocsumCommand(_PlainParameters, TyperCommand):
    """A command whose arguments are named plainly in --help and whose text
    options reach it without typer's pydantic coercion."""


class DocsumGroup(_PlainParameters, TyperGroup):
    """The `docsum` and `docsum config` groups, whose --help and --version
    are coerced as a `DocsumCommand`'s options are."""
