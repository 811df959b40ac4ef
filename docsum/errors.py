"""Exit codes and the exceptions that map onto them.

Scripts and cron jobs branch on these codes, so they are one small enum and never
change meaning. `EXIT_CODE_MEANINGS` is the one statement of what each means:
`docsum --help` and docs/cli.md are rendered from it.
"""

from __future__ import annotations

import enum
import errno


class ExitCode(enum.IntEnum):
    OK = 0
    ERROR = 1
    USAGE = 2  # bad option, bad configuration, template variable without a value
    PARTIAL = 3  # build finished but some files failed; they are retried next run
    LOCKED = 4  # another build holds the store
    NOTHING_TO_ANSWER = 5  # empty store, nothing chosen, everything filtered, not satisfied
    SIGINT = 130
    SIGTERM = 143


# One cause per code, the same in every command.
EXIT_CODE_MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "ok",
    ExitCode.ERROR: "error (a server that failed after retries, a store that cannot be opened or is not a docsum store)",
    ExitCode.USAGE: "usage or configuration error, including a store or index that does not exist",
    ExitCode.PARTIAL: "the build finished but some files failed (listed; retried next run)",
    ExitCode.LOCKED: "the store is locked by another build (--wait SECONDS waits instead)",
    ExitCode.NOTHING_TO_ANSWER: "nothing to answer from: an empty store, no document chosen, everything filtered, "
    "nothing satisfied the question, an empty answer",
    ExitCode.SIGINT: "interrupted by SIGINT (the store stays consistent)",
    ExitCode.SIGTERM: "interrupted by SIGTERM (the store stays consistent)",
}


class DocsumError(Exception):
    """Base class: every error docsum raises on purpose carries an exit code and
    a one-line message meant for a person."""

    exit_code: ExitCode = ExitCode.ERROR


class ConfigError(DocsumError):
    exit_code = ExitCode.USAGE


class TemplateVariableError(ConfigError):
    """A prompt template variable has no value (reported before any LLM call)."""

    def __init__(self, missing: list[str], template_name: str = "template") -> None:
        self.missing = sorted(missing)
        names = ", ".join("{" + m + "}" for m in self.missing)
        super().__init__(f"{template_name}: no value for variable {names} (give it with --var NAME=VALUE)")


class StoreLockedError(DocsumError):
    exit_code = ExitCode.LOCKED


class StoreVersionError(DocsumError):
    """The store was written by a newer docsum; we refuse rather than corrupt it."""


class LoadError(DocsumError):
    """One file could not be turned into a document. `reason` is one line."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class LLMError(DocsumError):
    """The LLM server failed in a way retries did not fix. `status` is the
    HTTP status the server answered with, when it answered at all."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ContextLengthError(LLMError):
    """The server said the prompt is longer than the model's window."""


class Interrupted(DocsumError):
    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.exit_code = ExitCode.SIGTERM if signum == 15 else ExitCode.SIGINT
        super().__init__("interrupted")


# --------------------------------------------------------------------------- one-line reasons

REASON_MAX = 160


def one_line(message: str, limit: int = REASON_MAX) -> str:
    """``message`` flattened to one line of at most ``limit`` characters."""
    flat = " ".join(message.split())
    if len(flat) > limit:
        flat = flat[: limit - 1].rstrip() + "…"
    return flat


class ReasonedOSError(OSError):
    """An OSError docsum raised itself, whose ``strerror`` is already the
    one-line reason to show (see docsum.userfiles)."""


def os_reason(exc: OSError) -> str:
    """A short lower-case reason for an OS error on one file or folder."""
    if isinstance(exc, ReasonedOSError) and exc.strerror:
        return exc.strerror
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, FileNotFoundError):
        return "file vanished before it could be read"
    if isinstance(exc, IsADirectoryError):
        return "is a directory, not a file"
    if exc.errno == errno.ELOOP:
        return "symlink loop"
    if isinstance(exc, FileExistsError) or exc.errno == errno.ENOTDIR:
        # Creating a folder (or a file below one) where a file stands.
        return "a file is in the way: not a folder"
    return one_line(exc.strerror or str(exc) or type(exc).__name__, 80).lower()


class StoreDamagedError(DocsumError):
    """Part of the store cannot be read (a bit flip, a truncated file); the
    message names the documents concerned and what the next build does."""
