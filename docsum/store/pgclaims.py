"""Claims: which builder summarizes a document when several share a
PostgreSQL store (docsum.store.postgres takes and releases them through this).

Design notes (the why):

* A builder claims a document in the `claims` table before summarizing it.
  A claim is a lease: the holder's heartbeat extends it, and it can be taken
  over once it has expired or once the backend of the connection that took it
  is gone (a builder killed with SIGKILL closes its socket, so its claims free
  up at once; a machine that vanished frees them after the timeout).
* Takeover selects the claim row FOR UPDATE SKIP LOCKED, so two builders never
  take over the same document.
* A fresh claim is one INSERT in its own transaction: every builder makes one
  per document it reaches, so this is the hot path.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Any

from docsum.errors import ConfigError, DocsumError
from docsum.store import pgschema

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger("docsum")

# Seconds a claim lives without a heartbeat. A builder that died without its
# connection closing (a machine gone) blocks its documents this long.
DEFAULT_CLAIM_SECONDS = 60.0


def claim_seconds_from_env() -> float:
    raw = os.environ.get("DOCSUM_CLAIM_TIMEOUT", "")
    try:
        value = float(raw) if raw else DEFAULT_CLAIM_SECONDS
    except ValueError:
        raise ConfigError(f"DOCSUM_CLAIM_TIMEOUT must be a number of seconds, got {raw!r}") from None
    if value <= 0:
        raise ConfigError(f"DOCSUM_CLAIM_TIMEOUT must be positive, got {raw!r}")
    return value


def backend_gone(row: str) -> str:
    """SQL true when the backend that `row` (a table alias with backend_pid) names has ended."""
    return f"NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = {row}.backend_pid)"


# Claims nobody holds any more: expired, or their builder's backend is gone.
SWEEP_SQL = f"DELETE FROM claims c WHERE c.expires_at < now() OR {backend_gone('c')}"
# The claim a builder ends inside the transaction that stores or removes the
# document: released afterwards, a builder killed in between would leave the row.
RELEASE_SQL = "DELETE FROM claims WHERE doc_id = %s AND owner = %s"


def take(conn: psycopg.Connection[Any], doc_id: str, owner: str, seconds: float) -> bool:
    """Claim `doc_id` for `owner`; False when a live builder holds it. An
    existing claim is taken over only when it expired or its holder's
    connection is gone, and only by one builder (FOR UPDATE SKIP LOCKED: the
    others skip the row another is taking)."""
    interval = f"{seconds} seconds"
    pid = conn.info.backend_pid
    fresh = conn.execute(
        "INSERT INTO claims (doc_id, owner, backend_pid, expires_at) "
        "VALUES (%s, %s, %s, now() + %s::interval) ON CONFLICT (doc_id) DO NOTHING RETURNING doc_id",
        (doc_id, owner, pid, interval),
    ).fetchone()
    if fresh is not None:
        return True
    with conn.transaction():
        stale = conn.execute(
            f"SELECT doc_id FROM claims c WHERE doc_id = %s AND (owner = %s OR expires_at < now() OR {backend_gone('c')}) "
            "FOR UPDATE SKIP LOCKED",
            (doc_id, owner),
        ).fetchone()
        if stale is None:
            return False
        conn.execute(
            "UPDATE claims SET owner = %s, backend_pid = %s, expires_at = now() + %s::interval WHERE doc_id = %s",
            (owner, pid, interval, doc_id),
        )
    return True


class Heartbeat:
    """Keeps this builder's claims alive, on its own connection and thread, so a
    long LLM call never lets a live builder's claim expire."""

    def __init__(self, url: str, owner: str, claim_seconds: float) -> None:
        self._url = url
        self._owner = owner
        self._claim_seconds = claim_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="docsum-claims", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            conn = pgschema.connect(self._url)
        except DocsumError as exc:
            log.warning("claims heartbeat cannot connect (%s); claims expire after %.0f s", exc, self._claim_seconds)
            return
        try:
            while not self._stop.wait(self._claim_seconds / 3):
                conn.execute(
                    "UPDATE claims SET expires_at = now() + %s::interval WHERE owner = %s",
                    (f"{self._claim_seconds} seconds", self._owner),
                )
        except Exception as exc:  # noqa: BLE001 - a lost heartbeat must not kill the build
            log.warning("claims heartbeat stopped (%s)", pgschema.driver_message(self._url, exc)[:160])
        finally:
            conn.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
