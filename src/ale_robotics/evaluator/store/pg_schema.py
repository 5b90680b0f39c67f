"""The PostgreSQL job store's schema: its versions and the statements between them.

:func:`migrate` runs when a :class:`.postgresql.PostgresJobStore` opens, in one
transaction under an advisory lock of its own, so replicas starting together
apply each missing version once, in order; ``schema_version`` lists those applied.
A newer release's version is never lowered (an older release keeps working on
the additive changes a newer one made).
"""

from __future__ import annotations

from typing import Any

import psycopg

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "migrate"]

MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (
        1,
        (
            """
            CREATE TABLE IF NOT EXISTS jobs (
                seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                job_id TEXT NOT NULL UNIQUE,
                run_id TEXT NOT NULL,
                task_id TEXT NOT NULL,
                client_token TEXT NOT NULL,
                state TEXT NOT NULL,
                episodes_done INTEGER NOT NULL DEFAULT 0,
                episodes_total INTEGER NOT NULL DEFAULT 0,
                failure_source TEXT NOT NULL DEFAULT '',
                failure_reason TEXT NOT NULL DEFAULT '',
                heartbeat DOUBLE PRECISION NOT NULL DEFAULT 0,
                created DOUBLE PRECISION NOT NULL,
                updated DOUBLE PRECISION NOT NULL,
                attempts INTEGER NOT NULL DEFAULT 0,
                files_json TEXT NOT NULL DEFAULT '{}',
                result_json TEXT,
                owner TEXT NOT NULL DEFAULT '',
                lease_until DOUBLE PRECISION NOT NULL DEFAULT 0,
                UNIQUE (run_id, client_token)
            )
            """,
            "CREATE INDEX IF NOT EXISTS jobs_queued ON jobs (seq) WHERE state = 'QUEUED'",
            "CREATE INDEX IF NOT EXISTS jobs_running ON jobs (owner) WHERE state = 'RUNNING'",
            "CREATE INDEX IF NOT EXISTS jobs_run ON jobs (run_id, seq)",
            """
            CREATE TABLE IF NOT EXISTS events (
                run_id TEXT NOT NULL,
                eval_seq INTEGER NOT NULL CHECK (eval_seq >= 0),
                event_json TEXT NOT NULL,
                PRIMARY KEY (run_id, eval_seq)
            )
            """,
        ),
    ),
    (
        2,
        (
            # the runs opened with OpenRun and their practice step counts: before,
            # each replica kept them in files of its own state dir
            """
            CREATE TABLE IF NOT EXISTS runs (
                run_id TEXT PRIMARY KEY,
                task_id TEXT NOT NULL,
                token_sha256 TEXT NOT NULL,
                submission_dir TEXT NOT NULL DEFAULT '',
                opened_unix DOUBLE PRECISION NOT NULL,
                closed_unix DOUBLE PRECISION NOT NULL DEFAULT 0
            )
            """,
            "CREATE INDEX IF NOT EXISTS runs_open_token ON runs (token_sha256) "
            "WHERE closed_unix = 0",
            """
            CREATE TABLE IF NOT EXISTS practice_steps (
                run_id TEXT PRIMARY KEY,
                agent_steps BIGINT NOT NULL DEFAULT 0 CHECK (agent_steps >= 0)
            )
            """,
        ),
    ),
)
"""Schema versions in order, each with the statements that bring the one before to
it. A new version appends an entry (``ALTER TABLE ... ADD COLUMN IF NOT EXISTS``);
a store opening an older database applies the missing ones."""

SCHEMA_VERSION = MIGRATIONS[-1][0]
"""The version this release writes."""
MIGRATION_LOCK = 0x414C45_53434845
"""Advisory lock key (one bigint) of schema changes."""


def migrate(cur: psycopg.Cursor[tuple[Any, ...]], now_sql: str) -> list[int]:
    """Apply the versions the database lacks (inside the caller's transaction); returns them.

    ``now_sql``: the SQL expression of now, recorded with each version applied.
    """
    cur.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
    cur.execute(
        "CREATE TABLE IF NOT EXISTS schema_version ("
        "version INTEGER PRIMARY KEY, applied DOUBLE PRECISION NOT NULL)"
    )
    cur.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version")
    row = cur.fetchone()
    have = int(row[0]) if row is not None else 0
    applied = []
    for version, statements in MIGRATIONS:
        if version <= have:
            continue
        for statement in statements:
            cur.execute(statement)  # constants of this module
        cur.execute(
            f"INSERT INTO schema_version (version, applied) VALUES (%s, {now_sql})",
            (version,),
        )
        applied.append(version)
    return applied
