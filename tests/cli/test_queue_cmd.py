"""``ale-robotics evaluator queue``: a real store (SQLite, and PostgreSQL where installed)
holding a queued and a running job, read by the real command in a process of its own.

The view must list both with owner, lease and attempts; print a table that fits 80
columns; and leave the store as it found it: no schema made or migrated, no file
created where a path was mistyped (one line, exit 2).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from cli_helpers import cli
from pg import pg_cluster
from stores import Backend, backend

__all__ = ["backend", "pg_cluster"]

RUNNING_OWNER = "replica-a:4242:beef"


def _fill(b: Backend) -> tuple[str, str]:
    """A job running under a 60 s lease (one attempt) and one queued behind it."""
    store = b.open(owner=RUNNING_OWNER, lease_s=60.0)
    running, _ = store.create(
        run_id="run-a", task_id="td3-inverted-pendulum-v1", client_token="a", episodes_total=10,
        files={},
    )  # fmt: skip
    queued, _ = store.create(
        run_id="run-b", task_id="td3-inverted-pendulum-v1", client_token="b", episodes_total=10,
        files={},
    )  # fmt: skip
    claimed = store.claim_next()
    assert claimed is not None and claimed.job_id == running.job_id
    return running.job_id, queued.job_id


def test_queue_lists_queued_and_running_jobs_as_json(backend: Backend) -> None:
    # The lease and the ages are bounded by the time this test took, not by a guess of how
    # fast the host is (a loaded host took 14 s to start the CLI): 1 s for clock rounding.
    started = time.time()
    running, queued = _fill(backend)
    before = backend.sql("SELECT MAX(version) FROM schema_version")
    proc = cli("evaluator", "queue", "--store", backend.url, "--json")
    took = time.time() - started + 1.0
    assert proc.returncode == 0, proc.stderr
    jobs = json.loads(proc.stdout)["jobs"]
    assert [j["job_id"] for j in jobs] == [running, queued]  # the order they are claimed in
    first, second = jobs
    assert (first["state"], first["owner"], first["attempts"]) == ("RUNNING", RUNNING_OWNER, 1)
    assert 60 - took <= first["lease_left_s"] <= 60
    assert (second["state"], second["owner"], second["attempts"]) == ("QUEUED", "", 0)
    assert second["lease_left_s"] is None
    assert first["run_id"] == "run-a" and first["task_id"] == "td3-inverted-pendulum-v1"
    assert 0 <= second["age_s"] <= took
    assert backend.sql("SELECT MAX(version) FROM schema_version") == before


def test_queue_table_fits_80_columns(tmp_path: Path) -> None:
    b = Backend("sqlite", str(tmp_path / "state" / "jobs.sqlite3"))
    (tmp_path / "state").mkdir()
    running, queued = _fill(b)
    b.close_all()
    proc = cli("evaluator", "queue", "--state-dir", str(tmp_path / "state"), columns=80)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, proc.stdout
    assert any(running in line and "RUNNING" in line for line in lines), proc.stdout
    assert any(queued in line and "QUEUED" in line for line in lines), proc.stdout
    assert lines[-1] == "1 queued, 1 running"


@pytest.mark.parametrize("where", ["--state-dir", "--store"])
def test_a_missing_store_is_one_line_and_nothing_is_made(tmp_path: Path, where: str) -> None:
    target = tmp_path / "nowhere"
    arg = str(target if where == "--state-dir" else target / "jobs.sqlite3")
    proc = cli("evaluator", "queue", where, arg)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().startswith("error: no job store at ")
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not target.exists()


def test_a_database_without_the_evaluators_tables_is_refused(tmp_path: Path) -> None:
    import sqlite3

    other = tmp_path / "other.sqlite3"
    sqlite3.connect(other).close()  # an empty SQLite file
    proc = cli("evaluator", "queue", "--store", str(other))
    assert proc.returncode == 2
    assert "holds no job store" in proc.stderr
    con = sqlite3.connect(other)
    try:
        assert con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone() == (0,)
    finally:
        con.close()
