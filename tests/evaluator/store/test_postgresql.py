"""What only the PostgreSQL store has: the server's clock, its SQL, lost connections.

The rules every store keeps are in ``test_contract.py``; these run on the session's
throwaway cluster (:mod:`pg`), skipped where PostgreSQL is not installed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from pg import PgCluster

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.evaluator.store import StoreUnavailable, open_store
from ale_robotics.evaluator.store.postgresql import PostgresJobStore, _pg_sql
from ale_robotics.model.states import JobState


@pytest.fixture
def url(pg_cluster: PgCluster) -> str:
    return pg_cluster.create_database()


@pytest.fixture
def opened() -> Iterator[list[PostgresJobStore]]:
    stores: list[PostgresJobStore] = []
    yield stores
    for s in stores:
        s.close()


def _open(opened: list[PostgresJobStore], url: str, **kw: object) -> PostgresJobStore:
    store = open_store(url, **kw)  # type: ignore[arg-type]
    assert isinstance(store, PostgresJobStore)
    opened.append(store)
    return store


def _server_now(cluster: PgCluster, url: str) -> float:
    dbname = url.split("///", 1)[1].split("?", 1)[0]
    (row,) = cluster.sql("SELECT date_part('epoch', clock_timestamp())", dbname)
    return float(row[0])  # type: ignore[arg-type]


def test_leases_run_on_the_servers_clock_not_the_replicas(
    pg_cluster: PgCluster, url: str, opened: list[PostgresJobStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replicas on hosts whose clocks disagree: one an hour ahead, one an hour behind.
    Neither takes the other's live job, and the lease is the server's now + lease_s."""
    ahead = _open(opened, url, owner="ahead", lease_s=30.0)
    behind = _open(opened, url, owner="behind", lease_s=30.0)
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 3600)
    ahead.create(run_id="r1", task_id="t", client_token="a", episodes_total=1, files={})
    job = ahead.claim_next()
    assert job is not None
    now = _server_now(pg_cluster, url)
    assert now + 25 < job.lease_until <= now + 30.5  # not an hour off
    assert job.created <= now + 0.5 and job.heartbeat <= now + 0.5
    assert behind.requeue_expired().requeued == []
    monkeypatch.setattr(time, "time", lambda: real() - 3600)
    assert ahead.requeue_expired().requeued == []
    held = behind.get(job.job_id)
    assert held is not None and held.owner == "ahead" and held.state is JobState.RUNNING


def test_an_unreachable_server_is_store_unavailable_without_the_password() -> None:
    url = "postgresql://ale:hunter2@/jobs?host=/nonexistent-ale-socket-dir&connect_timeout=2"
    with pytest.raises(StoreUnavailable) as info:
        open_store(url)
    assert "cannot connect to the job store" in info.value.message
    assert "hunter2" not in info.value.message and "ale:***@" in info.value.message


def test_a_malformed_url_is_invalid_argument() -> None:
    with pytest.raises(InvalidArgumentError, match="not a PostgreSQL connection URI"):
        open_store("postgresql:///db?no_such_option=1")


def test_a_lost_connection_fails_one_call_and_the_next_reconnects(
    pg_cluster: PgCluster, url: str, opened: list[PostgresJobStore]
) -> None:
    store = _open(opened, url, owner="victim")
    job, _ = store.create(run_id="r1", task_id="t", client_token="a", episodes_total=1, files={})
    dbname = url.split("///", 1)[1].split("?", 1)[0]
    killed = pg_cluster.sql(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE application_name LIKE 'ale-robotics evaluator victim%'",
        dbname,
    )
    assert killed == [(True,)]
    with pytest.raises(StoreUnavailable):
        store.get(job.job_id)
    again = store.get(job.job_id)  # reconnected
    assert again is not None and again.job_id == job.job_id
    assert store.claim_next() is not None


def test_a_closed_store_refuses_calls(url: str) -> None:
    store = open_store(url)
    store.close()
    with pytest.raises(StoreUnavailable, match="closed"):
        store.get("job-x")
    store.close()  # twice is fine


def test_the_queries_named_parameters_become_psycopgs_and_now_the_servers_clock() -> None:
    assert _pg_sql("UPDATE t SET a = :now + :lease_s WHERE b LIKE '5%' AND c = :c") == (
        "UPDATE t SET a = date_part('epoch', statement_timestamp()) + %(lease_s)s "
        "WHERE b LIKE '5%%' AND c = %(c)s"
    )
    assert _pg_sql("SELECT x::text, :nowhere") == "SELECT x::text, %(nowhere)s"
