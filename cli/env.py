"""The environment a command runs in: streams, whether they are terminals, and
how chatty to be. Commands take it instead of reaching for sys.*, so tests can
flip TTY handling on and off."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # rich is imported only when something is drawn on a terminal
    from rich.console import Console

from docsum.errors import one_line
from docsum.sanitize import Redactor, StreamRedactor, clean_json_text, clean_text, scrub


@dataclass
class Environment:
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    stdin_isatty: bool = field(default_factory=lambda: sys.stdin.isatty() if sys.stdin else False)
    stdout_isatty: bool = field(default_factory=lambda: sys.stdout.isatty())
    stderr_isatty: bool = field(default_factory=lambda: sys.stderr.isatty())
    quiet: bool = False
    verbose: bool = False
    color: bool = True
    # Values that must never be printed (the API key, a password in the base
    # URL). Every line docsum writes passes through redact(): the last guard,
    # after the LLM layer's own.
    secrets: Redactor = field(default_factory=Redactor)
    wrote_stdout: bool = False  # whether any result has gone to stdout yet

    @classmethod
    def from_os(cls) -> Environment:
        env = cls()
        forced = os.environ.get("DOCSUM_FORCE_TTY")  # tests and demos: pretend both are terminals
        if forced:
            env.stdout_isatty = env.stderr_isatty = forced == "1"
        if os.environ.get("NO_COLOR"):
            env.color = False
        return env

    def err_console(self) -> Console:
        from rich.console import Console

        return Console(
            file=self.stderr,
            force_terminal=self.stderr_isatty,
            no_color=not self.color,
            highlight=False,
            soft_wrap=True,
        )

    def redact(self, text: str) -> str:
        """`text` as it may be printed: secrets replaced, nothing that could
        act on a terminal (escape sequences, control characters)."""
        return clean_text(self.secrets.redact(text))

    def scrubbed(self, text: str) -> str:
        """A message for stderr (an error, a warning, progress): the known
        secrets and any secret a library's message spells out
        (docsum.sanitize.scrub) replaced, nothing that acts on a terminal.
        Results on stdout get redact() only: scrub's forms could be a
        document's own words."""
        return clean_text(scrub(text, self.secrets))

    def out(self, text: str = "") -> None:
        self.wrote_stdout = True
        self.stdout.write(self.redact(text) + "\n")
        self.stdout.flush()

    def out_lines(self, lines: Iterable[str], block: int = 1000) -> None:
        """Many result lines, written a block at a time (one flush per line
        would cost a system call each on a 100,000-document listing)."""
        buffer: list[str] = []
        for line in lines:
            buffer.append(self.redact(line))
            if len(buffer) >= block:
                self.stdout.write("\n".join(buffer) + "\n")
                buffer.clear()
        if buffer:
            self.stdout.write("\n".join(buffer) + "\n")
        self.stdout.flush()

    def out_json_array(self, items: Iterable[Any]) -> None:
        """One JSON array, an element per line, written as the elements come."""
        rows = (json.dumps(item, ensure_ascii=False, default=str) for item in items)
        first = True

        def lines() -> Iterator[str]:
            nonlocal first
            yield "["
            for row in rows:
                yield ("  " if first else ", ") + row
                first = False
            yield "]"

        self.out_lines(lines())

    def out_stream(self) -> StreamRedactor:
        """For text written to stdout piece by piece (a streamed answer):
        feed each piece, write what it returns, then write flush()."""
        return self.secrets.stream()

    def out_json(self, data: Any) -> None:
        # Redacting inside the serialized text keeps the JSON valid: a key
        # cannot contain a quote or a backslash, so it is never escaped.
        self.wrote_stdout = True
        text = json.dumps(data, ensure_ascii=False, indent=2, default=str)
        self.stdout.write(clean_json_text(self.secrets.redact(text)) + "\n")
        self.stdout.flush()

    def info(self, text: str) -> None:
        """Progress and notes: stderr, silenced by -q."""
        if not self.quiet:
            self.stderr.write(self.scrubbed(text) + "\n")
            self.stderr.flush()

    def error(self, text: str) -> None:
        self.stderr.write(self.scrubbed(text) + "\n")
        self.stderr.flush()

    def show_warning(
        self,
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        """A Python warning from a library, as one docsum line: no source
        path, no quoted code, no advice meant for programmers (stands in for
        ``warnings.showwarning`` while a command runs)."""
        try:
            self.error(f"docsum: warning: {one_line(str(message))}")
        except (ValueError, OSError):
            pass  # the stream is gone, as for log lines


class _StderrHandler(logging.Handler):
    def __init__(self, env: Environment) -> None:
        super().__init__()
        self.env = env

    def emit(self, record: logging.LogRecord) -> None:
        level = "warning" if record.levelno == logging.WARNING else record.levelname.lower()
        prefix = "docsum: " if record.levelno < logging.WARNING else f"docsum: {level}: "
        try:
            self.env.error(prefix + record.getMessage())
        except (ValueError, OSError):
            # The command's stream is gone (an in-process test runner closed
            # it); a log line is not worth an exception in library code.
            pass


def configure_logging(env: Environment) -> None:
    logger = logging.getLogger("docsum")
    logger.handlers[:] = [_StderrHandler(env)]
    logger.propagate = False
    logger.setLevel(logging.ERROR if env.quiet else logging.INFO if env.verbose else logging.WARNING)
    # psycopg warns on its own logger when a lost connection fails its
    # pipeline's cleanup ("error ignored terminating …"); with no handler of
    # its own, Python's last-resort handler printed it beside docsum's one-line
    # error for the same loss. It is shown with -v only.
    driver = logging.getLogger("psycopg")
    driver.handlers[:] = [_StderrHandler(env)] if env.verbose else [logging.NullHandler()]
    driver.propagate = False
