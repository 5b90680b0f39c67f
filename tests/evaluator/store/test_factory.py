"""``open_store``: which store a path or URL opens, and the errors an operator reads."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ale_robotics.errors import FailedPreconditionError, InvalidArgumentError
from ale_robotics.evaluator.store import SqliteJobStore, open_store, redacted
from ale_robotics.evaluator.store.factory import StoreKind, parse_store_url


@pytest.mark.parametrize("form", ["path", "str", "url"])
def test_a_path_or_a_sqlite_url_opens_the_sqlite_store(tmp_path: Path, form: str) -> None:
    db = tmp_path / "jobs.sqlite3"
    given = {"path": db, "str": str(db), "url": f"sqlite://{db}"}[form]
    store = open_store(given, owner="o", lease_s=2.0)
    try:
        assert isinstance(store, SqliteJobStore) and store.path == db
        assert (store.owner, store.lease_s) == ("o", 2.0)
    finally:
        store.close()
    assert db.is_file()


def test_postgresql_urls_name_the_postgresql_store() -> None:
    for url in ("postgresql://u@h/db", "postgres://u@h/db", "POSTGRESQL:///db?host=%2Ftmp"):
        assert parse_store_url(url).kind is StoreKind.POSTGRESQL
        assert parse_store_url(url).target == url


@pytest.mark.parametrize(
    ("given", "match"),
    [
        ("", "empty"),
        ("mysql://u@h/db", "unknown scheme 'mysql'"),
        ("sqlite://relative/jobs.sqlite3", "sqlite:///ABSOLUTE/PATH"),
        ("sqlite:///x.db?mode=ro", "sqlite:///ABSOLUTE/PATH"),
    ],
)
def test_a_url_no_store_has_is_one_clear_error(given: str, match: str) -> None:
    with pytest.raises(InvalidArgumentError, match=match):
        open_store(given)


def test_an_unknown_scheme_error_never_shows_a_password() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        parse_store_url("mysql://user:hunter2@db/jobs")
    assert "hunter2" not in info.value.message


def test_passwords_are_redacted() -> None:
    assert redacted("postgresql://u:hunter2@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert redacted("postgresql://u@h/db?password=hunter2&sslmode=require") == (
        "postgresql://u@h/db?password=***&sslmode=require"
    )
    plain = "postgresql:///db?host=%2Ftmp&user=a"
    assert redacted(plain) == plain
    assert redacted("/var/lib/jobs.sqlite3") == "/var/lib/jobs.sqlite3"


def test_without_psycopg_the_error_names_the_package_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loaded = ("psycopg", "ale_robotics.evaluator.store.postgresql")
    for name in [m for m in sys.modules if m.startswith(loaded)]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if not installed
    with pytest.raises(FailedPreconditionError, match=r"pip install 'psycopg\[binary\]'"):
        open_store("postgresql://u@h/db")


def test_the_sqlite_store_never_loads_psycopg(tmp_path: Path) -> None:
    import subprocess

    code = (
        "import sys; from ale_robotics.evaluator.store import open_store; "
        f"open_store({str(tmp_path / 'j.sqlite3')!r}).close(); "
        "print(any(m.startswith('psycopg') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("store", "words"),
    [
        ("mysql://u:hunter2@h/db", "unknown scheme"),
        (
            "postgresql://u:hunter2@/db?host=/nonexistent-ale-dir&connect_timeout=2",
            "cannot connect",
        ),
    ],
    ids=["unknown scheme", "unreachable server"],
)
def test_serve_refuses_a_store_it_cannot_use_in_one_line(
    short_tmp: Path, store: str, words: str
) -> None:
    import subprocess

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ale_robotics",
            "evaluator",
            "serve",
            "--state-dir",
            str(short_tmp / "state"),
            "--agent-listen",
            f"unix://{short_tmp}/a.sock",
            "--harness-listen",
            f"unix://{short_tmp}/h.sock",
            "--store",
            store,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and words in lines[0], lines
    assert "hunter2" not in proc.stderr + proc.stdout and "Traceback" not in proc.stderr
