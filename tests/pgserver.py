"""A throwaway PostgreSQL server for the tests (and bench/): a temporary data
directory, a Unix socket plus 127.0.0.1 on a free port, stopped by its PID.

initdb refuses to run as root, which is who runs CI; as root the server runs as
the `postgres` system user (Debian's packages create it), otherwise as whoever
runs the tests. The binaries come from $DOCSUM_PG_BINDIR, else `pg_config
--bindir` on PATH, else the newest /usr/lib/postgresql/N/bin (Debian keeps
them off PATH).

The pgvector tests need a server with the `vector` extension, which Debian's
packages here lack: `pgvector_bindir` finds the PostgreSQL 16 (with pgvector
0.6.2) that the `pgserver` wheel ships among its files. Only its binaries are
used, started the same way as any other; its Python API is never imported.
"""

from __future__ import annotations

import glob
import importlib.metadata
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

TEST_ROLE = "docsum_tester"
TEST_PASSWORD = "pg-S3cret-PLANTED-pw"


def find_bindir() -> Path | None:
    named = os.environ.get("DOCSUM_PG_BINDIR")
    if named:
        return Path(named) if (Path(named) / "initdb").exists() else None
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            out = ""
        if out and (Path(out) / "initdb").exists():
            return Path(out)
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    return Path(found[-1]).parent if found else None


def pgvector_bindir() -> Path | None:
    """The binaries of the `pgserver` wheel's PostgreSQL, which has pgvector
    (`pginstall/bin`, `pginstall/lib/postgresql/vector.so`); None when the
    wheel is not installed or lacks them. Found through the installed
    distribution's files, not by importing: this module is `pgserver` too."""
    named = os.environ.get("DOCSUM_PGVECTOR_BINDIR")
    if named:
        return Path(named) if (Path(named) / "initdb").exists() else None
    try:
        install = Path(str(importlib.metadata.distribution("pgserver").locate_file("pgserver/pginstall")))
    except importlib.metadata.PackageNotFoundError:
        return None
    if (install / "bin" / "initdb").exists() and (install / "lib" / "postgresql" / "vector.so").exists():
        return install / "bin"
    return None


def link_tree(source: Path, target: Path, ignore: tuple[str, ...] = ()) -> None:
    """`source` under `target`, by hard links where the filesystem allows
    (instant, no space), else by copies; every folder 0755. For another user
    (postgres, uid 65534) who cannot enter the folder `source` is in: a clone
    in a folder made by `mktemp -d` is 0700."""

    def link_or_copy(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(
        source,
        target,
        symlinks=True,
        copy_function=link_or_copy,
        ignore=shutil.ignore_patterns(*ignore) if ignore else None,
        dirs_exist_ok=True,
    )
    for folder in (target, *(p for p in target.rglob("*") if p.is_dir() and not p.is_symlink())):
        folder.chmod(0o755)


def others_can_reach(path: Path) -> bool:
    """Whether a user with no rights but "other" can enter every folder on the way to `path`."""
    return all(os.stat(folder).st_mode & 0o001 for folder in [*reversed(path.resolve().parents), path.resolve()])


def _scratch_dir() -> str | None:
    """/dev/shm when it is a roomy memory file system, else the default temp dir.

    Every test database is a copy of the template (about 8 MB written per
    CREATE DATABASE); in memory that is three times faster than on disk."""
    shm = "/dev/shm"
    try:
        roomy = os.path.isdir(shm) and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free >= 2 << 30
    except OSError:
        roomy = False
    return shm if roomy else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """Start with start(), stop with stop(); `url(db)` is a superuser URL over the socket."""

    def __init__(self, bindir: Path, *, in_memory: bool = False) -> None:
        """in_memory: keep the data directory in /dev/shm when there is room (the tests)."""
        self.bindir = bindir
        self.base = Path(tempfile.mkdtemp(prefix="docsum-pg-", dir=_scratch_dir() if in_memory else None))
        self.data = self.base / "data"
        self.socket_dir = self.base / "sock"
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._as_user: str | None = None
        self._counter = 0
        self._create_options = ""

    def _run_kwargs(self) -> dict[str, object]:
        if self._as_user is None:
            return {}
        entry = pwd.getpwnam(self._as_user)
        return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}

    def start(self) -> None:
        if os.geteuid() == 0:
            self._as_user = "postgres"
            entry = pwd.getpwnam("postgres")
            os.chown(self.base, entry.pw_uid, entry.pw_gid)
            if not others_can_reach(self.bindir):
                # The wheel's PostgreSQL inside a clone that only root can
                # enter: postgres runs a linked copy. It finds lib/ and share/
                # beside bin/, and its libraries through the RPATH
                # $ORIGIN/../../../pgserver.libs, so the copy keeps that shape.
                install = self.bindir.parent
                site = install.parents[1]
                target = self.base / "site" / install.relative_to(site)
                link_tree(install, target)
                if (site / "pgserver.libs").is_dir():
                    link_tree(site / "pgserver.libs", self.base / "site" / "pgserver.libs")
                self.bindir = target / self.bindir.name
        self.socket_dir.mkdir()
        if self._as_user:
            entry = pwd.getpwnam(self._as_user)
            os.chown(self.socket_dir, entry.pw_uid, entry.pw_gid)
        kwargs = self._run_kwargs()
        subprocess.run(
            [str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres", "-E", "UTF8", "--no-sync",
             "--auth-local=trust", "--auth-host=scram-sha-256", "--locale=C"],
            check=True, capture_output=True, cwd=self.base, **kwargs,  # type: ignore[arg-type]
        )  # fmt: skip
        # The free port is found by binding and releasing it, so another
        # process (a parallel test worker starting its own server) can take it
        # before postgres does: then postgres exits at once and a new port is tried.
        for attempt in range(5):
            if self._launch(kwargs):
                break
            if attempt == 4 or "could not create any TCP/IP sockets" not in self._log()[-2000:]:
                raise RuntimeError(f"postgres exited: {self._log()[-2000:]}")
            self.port = _free_port()
        self.sql("postgres", f"CREATE ROLE {TEST_ROLE} LOGIN PASSWORD '{TEST_PASSWORD}'")
        # PostgreSQL 15 made WAL_LOG the default, which is slower for a small
        # template than copying its files (the checkpoint it needs is cheap with fsync off).
        if int(self.sql("postgres", "SHOW server_version_num")) >= 150000:
            self._create_options = " STRATEGY = FILE_COPY"

    def _log(self) -> str:
        return (self.base / "server.log").read_text(errors="replace")

    def _launch(self, kwargs: dict[str, object]) -> bool:
        """Start postgres on self.port; False if it exited before it was ready."""
        log = open(self.base / "server.log", "wb")
        self.proc = subprocess.Popen(
            [str(self.bindir / "postgres"), "-D", str(self.data), "-p", str(self.port), "-k", str(self.socket_dir),
             "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
             "-c", "full_page_writes=off", "-c", "max_connections=200", "-c", "shared_buffers=64MB"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.base,
            start_new_session=True, **kwargs,  # type: ignore[arg-type]
        )  # fmt: skip
        log.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            if (self.socket_dir / f".s.PGSQL.{self.port}").exists() and self._ready():
                return True
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("postgres did not start within 30 s")

    def _ready(self) -> bool:
        result = subprocess.run(
            [str(self.bindir / "pg_isready"), "-h", str(self.socket_dir), "-p", str(self.port), "-U", "postgres"],
            capture_output=True,
        )
        return result.returncode == 0

    def sql(self, db: str, statement: str) -> str:
        result = subprocess.run(
            [str(self.bindir / "psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", str(self.socket_dir),
             "-p", str(self.port), "-U", "postgres", "-d", db, "-c", statement],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return result.stdout

    def url(self, db: str) -> str:
        return f"postgresql://postgres@/{db}?host={self.socket_dir}&port={self.port}"

    def password_url(self, db: str) -> str:
        """A URL over TCP with a password (scram-sha-256), as a team's server would take."""
        return f"postgresql://{TEST_ROLE}:{TEST_PASSWORD}@127.0.0.1:{self.port}/{db}"

    def new_database(self, owner: str = TEST_ROLE) -> str:
        self._counter += 1
        name = f"t{os.getpid()}_{self._counter}"
        self.sql("postgres", f"CREATE DATABASE {name} OWNER {owner}{self._create_options}")
        return name

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGQUIT)  # "immediate" shutdown: the data is thrown away anyway
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None
        shutil.rmtree(self.base, ignore_errors=True)
