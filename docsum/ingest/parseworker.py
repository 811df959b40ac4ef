"""The loop a file-reading worker process runs (see docsum.ingest.parsing).

The build's fork server imports this module once and forks every worker from
it, so what is loaded here is loaded once per build, not once per worker:
PDFium, and the cl100k token table most models use.
"""

from __future__ import annotations

import contextlib
import multiprocessing.connection
import signal
from typing import Any

import pypdfium2  # noqa: F401 - loaded once in the fork server (see above)

from docsum.errors import LoadError
from docsum.ingest.parsing import parse_file, unexpected_reason
from docsum.models.tokens import get_encoding

get_encoding("cl100k_base")


def worker_main(conn: multiprocessing.connection.Connection, memory_mb: int, encoding: str) -> None:
    # The parent stops the build and kills its workers; a Ctrl-C reaching the
    # whole process group must not print a traceback from every worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if memory_mb > 0:
        with contextlib.suppress(ValueError, OSError, ImportError):
            import resource

            limit = memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        # Loading the token table takes a moment; done before the first file's
        # clock starts, so it is not charged to that file's time limit.
        get_encoding(encoding)
        conn.send(("ready", None))
    except (OSError, ValueError):
        return
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return  # the parent is gone
        reply: tuple[str, Any]
        try:
            reply = ("ok", parse_file(request))
        except LoadError as exc:
            reply = ("failed", exc.reason)
        except MemoryError:
            reply = ("failed", f"needs more than {memory_mb} MB of memory to read; stopped")
        except RecursionError:
            reply = ("failed", "nested too deeply to read; stopped")
        except Exception as exc:  # noqa: BLE001 - a bug on one odd file is that file's failure
            reply = ("failed", unexpected_reason(exc))
        try:
            conn.send(reply)
        except (OSError, ValueError):
            return
