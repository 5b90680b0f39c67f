"""Engine environments for the tests (importable as ``engine_support``): is one built here?

The tests that run an engine's workers need the engine built (``make engines``, or
``ale-robotics engines install NAME``: minutes, and gigabytes for some). Where it is not,
they are skipped saying so and how to run them, and ``make test`` stays green on a fresh
machine; with ``ALE_REQUIRE_ENGINES=1`` (``.ci/run`` sets it, after ``make engines``) a
missing engine fails them instead, so CI can never pass by skipping them.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ale_robotics.engines import get_engine, installed
from ale_robotics.engines.errors import EngineUnavailable
from ale_robotics.engines.record import InstalledEngine

REQUIRED = os.environ.get("ALE_REQUIRE_ENGINES") == "1"

HOW = (
    "left to CI (.ci/run builds the engines and sets ALE_REQUIRE_ENGINES=1); to run them "
    "here: make engines && ALE_REQUIRE_ENGINES=1 .venv/bin/pytest tests/engines "
    "tests/rollouts/mujoco_warp (and -m slow for the whole episodes)"
)


@functools.cache
def engine_problem(name: str) -> str | None:
    """Why the engine ``name`` cannot run here (None: it is built)."""
    try:
        record = installed(get_engine(name))
    except EngineUnavailable as exc:
        return exc.message
    return None if record is not None else f"the engine {name!r} is not installed here"


def need_engine(name: str) -> InstalledEngine:
    """The engine's build; skips the calling test where it is missing (fails under CI)."""
    problem = engine_problem(name)
    if problem is not None:
        if REQUIRED:
            pytest.fail(f"ALE_REQUIRE_ENGINES=1, but {problem} (run: make engines)")
        pytest.skip(f"{problem}: {HOW}")
    record = installed(get_engine(name))
    assert record is not None
    return record


def audit_ok(run_dir: Path, secret: Path, env: dict[str, str], cwd: Path) -> dict[str, Any]:
    """``ale-robotics audit RUN_DIR --secret SECRET --json`` of a run in an engine kind, which
    re-runs its job there (minutes on a busy host): its stdout is one JSON document and says
    ok; that document, for the test's own checks."""
    audit = subprocess.run(
        [sys.executable, "-m", "ale_robotics", "audit", str(run_dir), "--secret", str(secret),
         "--json"],
        env=env, capture_output=True, text=True, timeout=1200, cwd=cwd, check=False,
    )  # fmt: skip
    assert audit.returncode == 0, audit.stdout[-3000:] + audit.stderr[-3000:]
    doc: dict[str, Any] = json.loads(audit.stdout)
    assert doc["ok"] is True, doc["failed_checks"]
    return doc
