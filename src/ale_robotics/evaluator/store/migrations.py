"""The job store's schema: one ordered list of migrations, the same for every engine.

:func:`migrate` runs when a store opens, in one write transaction under the schema
lock (:meth:`.dialect.Dialect.lock_schema`), so stores opening together apply each
missing version once, in order; the ``schema_version`` table lists the versions
applied. A newer release's version is never lowered (an older release keeps working
on the additive changes a newer one made).

A new version appends a :class:`Migration` (``ALTER TABLE ... ADD COLUMN``, a new
table or index). The statements are written once for both engines: their types
(``TEXT``, ``INTEGER``, ``BIGINT``, ``DOUBLE PRECISION``) mean the same to SQLite
and PostgreSQL; ``{identity}`` is the dialect's own integer key
(:attr:`.dialect.Dialect.identity`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ale_robotics.evaluator.store.dialect import Dialect, Tx

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "Migration", "migrate"]


@dataclass(frozen=True)
class Migration:
    version: int
    statements: tuple[str, ...]
    """What brings the version before to this one (constants of this module)."""


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        (
            """
            CREATE TABLE jobs (
                seq {identity},
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
            "CREATE INDEX jobs_queued ON jobs (seq) WHERE state = 'QUEUED'",
            "CREATE INDEX jobs_running ON jobs (owner) WHERE state = 'RUNNING'",
            "CREATE INDEX jobs_run ON jobs (run_id, seq)",
            """
            CREATE TABLE events (
                run_id TEXT NOT NULL,
                eval_seq INTEGER NOT NULL CHECK (eval_seq >= 0),
                event_json TEXT NOT NULL,
                PRIMARY KEY (run_id, eval_seq)
            )
            """,
            # the runs opened with OpenRun and their practice step counts
            """
            CREATE TABLE runs (
                run_id TEXT PRIMARY KEY,
                task_id TEXT NOT NULL,
                token_sha256 TEXT NOT NULL,
                submission_dir TEXT NOT NULL DEFAULT '',
                opened_unix DOUBLE PRECISION NOT NULL,
                closed_unix DOUBLE PRECISION NOT NULL DEFAULT 0
            )
            """,
            "CREATE INDEX runs_open_token ON runs (token_sha256) WHERE closed_unix = 0",
            """
            CREATE TABLE practice_steps (
                run_id TEXT PRIMARY KEY,
                agent_steps BIGINT NOT NULL DEFAULT 0 CHECK (agent_steps >= 0)
            )
            """,
        ),
    ),
    Migration(
        2,
        (
            # whose store this is: the first evaluator's fingerprints (.identity)
            """
            CREATE TABLE store_identity (
                id INTEGER PRIMARY KEY CHECK (id = 1),
                secret_fingerprint TEXT NOT NULL,
                key_fingerprint TEXT NOT NULL,
                state_dir TEXT NOT NULL DEFAULT '',
                host TEXT NOT NULL DEFAULT '',
                recorded DOUBLE PRECISION NOT NULL
            )
            """,
        ),
    ),
)
"""Schema versions in order, each with the statements that bring the one before to it."""

SCHEMA_VERSION = MIGRATIONS[-1].version
"""The version this release creates."""


def migrate(tx: Tx, dialect: Dialect) -> list[int]:
    """Apply the versions the store lacks (inside ``tx``, a write transaction); returns them."""
    dialect.lock_schema(tx)
    tx.execute(
        "CREATE TABLE IF NOT EXISTS schema_version ("
        "version INTEGER PRIMARY KEY, applied DOUBLE PRECISION NOT NULL)"
    )
    have = int(tx.scalar("SELECT COALESCE(MAX(version), 0) FROM schema_version"))
    applied = []
    for migration in MIGRATIONS:
        if migration.version <= have:
            continue
        for statement in migration.statements:
            tx.execute(statement.replace("{identity}", dialect.identity))
        tx.execute(
            "INSERT INTO schema_version (version, applied) VALUES (:version, :now)",
            version=migration.version,
        )
        applied.append(migration.version)
    return applied
