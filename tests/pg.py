"""A throwaway PostgreSQL cluster for tests: ``initdb`` and ``pg_ctl`` in a temp dir.

The cluster listens on a Unix socket in its own temp dir only (no TCP port), with
trust authentication for its one superuser, fsync off (nothing in it needs to
survive a crash), and is stopped and deleted when the test session ends. It is
never a shared or system cluster.

PostgreSQL refuses to run as root, and tests run as root on CI: then the cluster's
files belong to the unprivileged system user :data:`PG_USER` (created once, with
``useradd --system``, if missing) and ``initdb``/``pg_ctl`` run as that user
(``runuser``, else ``setpriv``). Run as anyone else, they run as the caller.

Without the PostgreSQL server binaries (Debian: ``apt-get install postgresql``;
``make postgres-deps`` does it on CI), :func:`pg_cluster` skips the tests that
need it, saying so.

Use it from a conftest or a test module::

    from pg import pg_cluster, PgCluster  # noqa: F401  (the fixture)

    def test_x(pg_cluster: PgCluster) -> None:
        url = pg_cluster.create_database()
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

__all__ = ["PG_USER", "PgCluster", "find_bin_dir", "pg_cluster", "start_cluster"]

PG_USER = "ale-pg"
"""The system user that owns (and runs) the cluster when the tests run as root."""
SUPERUSER = "ale"
"""The cluster's database superuser (trust authentication on its private socket)."""
_SERVER_SETTINGS = (
    "-c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off "
    "-c max_connections=200"
)


def find_bin_dir() -> Path | None:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``; None when absent.

    On PATH (resolved through symlinks, so ``postgres`` is beside them), else the
    newest Debian ``/usr/lib/postgresql/<version>/bin``.
    """
    found = shutil.which("initdb")
    if found is not None:
        real = Path(found).resolve().parent
        if all((real / b).exists() for b in ("initdb", "pg_ctl", "postgres")):
            return real
    candidates = []
    for d in Path("/usr/lib/postgresql").glob("*/bin"):
        with contextlib.suppress(ValueError):
            if (d / "initdb").exists() and (d / "pg_ctl").exists():
                candidates.append((int(d.parent.name.split(".")[0]), d))
    return max(candidates)[1] if candidates else None


def _ensure_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(PG_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PG_USER],
            check=True,
            capture_output=True,
        )
        return pwd.getpwnam(PG_USER)


def _as_user(cmd: list[str]) -> list[str]:
    """``cmd`` run as :data:`PG_USER` when we are root; as ourselves otherwise."""
    if os.geteuid() != 0:
        return cmd
    if shutil.which("runuser"):
        return ["runuser", "-u", PG_USER, "--", *cmd]
    return ["setpriv", f"--reuid={PG_USER}", f"--regid={PG_USER}", "--init-groups", "--", *cmd]


class PgCluster:
    """A running throwaway cluster: :meth:`url` of a database, :meth:`create_database`."""

    def __init__(self, root: Path, bin_dir: Path) -> None:
        self.root = root
        self.bin_dir = bin_dir
        self.data = root / "data"
        self.socket_dir = root / "sock"
        self.log = root / "server.log"
        self._names = itertools.count()

    def url(self, dbname: str = "postgres") -> str:
        """A libpq URI for ``dbname`` on this cluster's socket, as its superuser."""
        host = quote(str(self.socket_dir), safe="")
        return f"postgresql:///{dbname}?host={host}&user={SUPERUSER}"

    def sql(self, statement: str, dbname: str = "postgres") -> list[tuple[object, ...]]:
        """Run one statement (autocommit) and return its rows (none for a command)."""
        import psycopg

        with psycopg.connect(self.url(dbname), autocommit=True) as conn:
            cur = conn.execute(statement)  # type: ignore[arg-type]
            return list(cur.fetchall()) if cur.description else []

    def create_database(self, prefix: str = "t") -> str:
        """A new, empty database; returns its URL."""
        name = f"{prefix}_{next(self._names)}_{secrets.token_hex(3)}"
        self.sql(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def _ctl(self, *args: str) -> None:
        subprocess.run(
            _as_user([str(self.bin_dir / "pg_ctl"), "-D", str(self.data), *args]),
            check=True,
            capture_output=True,
            cwd=self.root,
            timeout=60,
        )

    def start_server(self) -> None:
        """Start the server on the cluster's data (waits until it accepts connections)."""
        self._ctl(
            "-l",
            str(self.log),
            "-o",
            f"{_SERVER_SETTINGS} -c unix_socket_directories={self.socket_dir}",
            "-w",
            "-t",
            "60",
            "start",
        )

    def restart(self, down_s: float) -> None:
        """Stop the server (fast shutdown: every connection dropped), keep it down for
        ``down_s`` seconds, start it again: what an operator's restart looks like."""
        self._ctl("-m", "fast", "-w", "stop")
        time.sleep(down_s)
        self.start_server()

    def stop(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            self._ctl("-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


def start_cluster(bin_dir: Path) -> PgCluster:
    """initdb and start a cluster in a new temp dir (see the module docstring)."""
    # /tmp, not pytest's tmp dirs: those are private to the user running the tests
    root = Path(tempfile.mkdtemp(prefix="ale-pg-"))
    cluster = PgCluster(root, bin_dir)
    cluster.socket_dir.mkdir(mode=0o700)
    if os.geteuid() == 0:
        user = _ensure_user()
        for path in (root, cluster.socket_dir):
            os.chown(path, user.pw_uid, user.pw_gid)
    try:
        subprocess.run(
            _as_user(
                [
                    str(bin_dir / "initdb"),
                    "-D",
                    str(cluster.data),
                    "-U",
                    SUPERUSER,
                    "--auth=trust",
                    "--no-sync",
                    "--no-instructions",
                    "--locale=C",
                    "--encoding=UTF8",
                ]
            ),
            check=True,
            capture_output=True,
            cwd=root,
            timeout=120,
        )
        cluster.start_server()
    except subprocess.CalledProcessError as exc:
        log = cluster.log.read_text(errors="replace") if cluster.log.exists() else ""
        cluster.stop()
        raise RuntimeError(
            f"cannot start a throwaway PostgreSQL cluster: {exc.cmd}: "
            f"{exc.stderr.decode(errors='replace')}{log}"
        ) from None
    except BaseException:
        cluster.stop()
        raise
    return cluster


_shared: list[PgCluster] = []
_users = [0]


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """The session's throwaway cluster, started on first use, stopped at the end.

    Conftests and test modules that import this fixture share one cluster.
    Skips when the PostgreSQL server binaries are not installed.
    """
    if not _shared:
        bin_dir = find_bin_dir()
        if bin_dir is None:
            pytest.skip(
                "PostgreSQL is not installed (no initdb/pg_ctl on PATH or in "
                "/usr/lib/postgresql/*/bin): apt-get install postgresql, or make postgres-deps"
            )
        _shared.append(start_cluster(bin_dir))
    _users[0] += 1
    try:
        yield _shared[0]
    finally:
        _users[0] -= 1
        if _users[0] == 0:
            _shared.pop().stop()
