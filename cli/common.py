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
import typer.core

from docsum.errors import ConfigError, DocsumError, ExitCode, Interrupted, one_line
from docsum.sanitize import scrub
from docsum.settings import Setting, for_command, unused_shared

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

    def existing_store(self) -> StoreLocation:
        """The store this command reads, which must exist: a store or index
        that does not is a usage error (exit 2, a typo is not "nothing to
        answer from"), naming the indexes that do exist."""
        from docsum.locations import display_location
        from docsum.paths import existing_indexes
        from docsum.store.opening import store_exists

        location = self.store_path()
        if store_exists(location):
            return location
        index = self.settings.index
        if index and not self.settings.given("store"):
            missing, build = f"no index {index!r} (no store at {display_location(location)})", f"--index {index}"
        else:
            missing, build = f"no store at {display_location(location)}", f"--store {display_location(location)}"
        names = existing_indexes()
        there = f"the indexes that exist: {', '.join(names)} (--index NAME)" if names else "no index exists yet"
        raise ConfigError(f"{missing}; {there}; create it with `docsum build PATH {build}`")

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


def _option(setting: Setting, hidden: bool = False) -> inspect.Parameter:
    """The typer option of one declared setting. Every value reaches
    docsum.config.load_settings as the text the user typed, so it is checked
    there, once, with the same rule as the environment and the config file.
    A `hidden` option is accepted but left out of --help."""
    kind, flag = setting.kind, setting.option
    assert flag is not None
    names = [flag] + ([setting.short] if setting.short else [])
    annotation: Any
    if kind.switch:
        annotation, default = bool, False
        info = typer.Option(*names, help=setting.help_text, hidden=hidden)
    elif kind.toggle:
        annotation, default = bool | None, None
        info = typer.Option(f"{flag}/--no-{flag[2:]}", help=setting.help_text, hidden=hidden)
    else:
        annotation, default = (list[str] | None if kind.repeated else str | None), None
        info = typer.Option(*names, metavar=kind.metavar, help=setting.help_text, show_default=False, hidden=hidden)
    return inspect.Parameter(
        setting.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[annotation, info]
    )


def with_common(command: str) -> Callable[[Callable[..., int | None]], Callable[..., None]]:
    """Give a command the options docsum.settings declares for `command`; the
    function takes its own arguments and `common` (the settings, loaded and
    checked). Its return value is the exit code; DocsumError becomes a
    one-line message and that error's code."""
    # The command's own options first, then the shared ones by group (see DocsumCommand).
    options = [_option(s) for s in sorted(for_command(command), key=lambda s: s.group != "")]
    # A shared option the command does not use is still accepted, unlisted: a
    # script that passes the same --base-url to every command keeps working.
    options += [_option(s, hidden=True) for s in unused_shared(command)]
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


def _run(func: Callable[..., int | None], flags: dict[str, Any], kwargs: dict[str, Any]) -> None:  # noqa: C901 (listed when the check came in: simplify, then drop this)
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


# The headings of shared options, in the order --help shows them (after the command's own).
GROUP_ORDER = ("Store", "Model", "Output")


def examples(*pairs: tuple[str, str]) -> str:
    """A command's examples, (command line, what it does), as its --help
    prints them under "Examples:" (DocsumCommand.format_epilog)."""
    return "\n".join(f"{line}\n    {what}" for line, what in pairs)


class DocsumCommand(typer.core.TyperCommand):
    """A command whose --help lists its arguments, then its own options, then
    the shared options it takes under their headings (docsum.settings declares
    each option's group). It overrides only the public formatting hooks
    typer.core.TyperCommand inherits from click's Command (typer 0.2x
    vendors click, so click's classes are reached through typer.core)."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        # `PATH...` and `[QUESTION]`, as a person reads a usage line.
        pieces = ["[OPTIONS]"] if any(isinstance(p, typer.core.TyperOption) for p in self.get_params(ctx)) else []
        for param in self.get_params(ctx):
            if isinstance(param, typer.core.TyperArgument):
                name = (param.metavar or str(param.name).upper()) + ("..." if param.nargs != 1 else "")
                pieces.append(name if param.required else f"[{name}]")
        return pieces

    def format_epilog(self, ctx: Any, formatter: Any) -> None:
        # The epilog is the command's examples (see `examples`), kept as written.
        if self.epilog:
            with formatter.section("Examples"):
                for line in self.epilog.splitlines():
                    formatter.write(f"{' ' * formatter.current_indent}{line}\n")

    def format_options(self, ctx: Any, formatter: Any) -> None:
        from docsum.settings import SETTING_BY_NAME

        arguments: list[tuple[str, str]] = []
        groups: dict[str, list[tuple[str, str]]] = {"": []}
        for param in self.get_params(ctx):
            if isinstance(param, typer.core.TyperArgument):
                name = (param.metavar or str(param.name).upper()) + ("..." if param.nargs != 1 else "")
                arguments.append((name, getattr(param, "help", None) or ""))
                continue
            record = param.get_help_record(ctx)
            if record is None:
                continue
            setting = SETTING_BY_NAME.get(param.name or "")
            groups.setdefault(setting.group if setting is not None else "", []).append(record)
        if arguments:
            with formatter.section("Arguments"):
                formatter.write_dl(arguments)
        with formatter.section("Options"):
            formatter.write_dl(groups.pop(""))
        for heading in GROUP_ORDER:
            if heading in groups:
                with formatter.section(f"{heading} options"):
                    formatter.write_dl(groups[heading])
