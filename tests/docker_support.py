"""Docker for the tests (importable as ``docker_support``): can the container sandbox run here?

The container tests need the docker CLI, a running daemon and the images of
``make images``. Where any is missing they are skipped with the reason, unless
``ALE_REQUIRE_DOCKER=1`` (``.ci/run`` sets it): then they fail with it, so CI can
never pass by skipping them.
"""

from __future__ import annotations

import functools
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ale_robotics.sandboxes.docker.cli import (
    DEFAULT_AGENT_IMAGE,
    DEFAULT_EVALUATOR_IMAGE,
    DockerError,
    docker_available,
    require_docker,
)
from ale_robotics.sandboxes.docker.images import require_image

REQUIRED = os.environ.get("ALE_REQUIRE_DOCKER") == "1"
AGENT_IMAGE = os.environ.get("ALE_TEST_AGENT_IMAGE", DEFAULT_AGENT_IMAGE)
EVALUATOR_IMAGE = os.environ.get("ALE_TEST_EVALUATOR_IMAGE", DEFAULT_EVALUATOR_IMAGE)


@functools.cache
def docker_problem() -> str | None:
    """Why the container tests cannot run here (None: they can)."""
    try:
        require_docker()
        require_image(AGENT_IMAGE, "agent")
        require_image(EVALUATOR_IMAGE, "evaluator")
    except DockerError as exc:
        return exc.message
    return None


def need_docker() -> None:
    """Skip the calling test where Docker or the images are missing (fail under CI)."""
    problem = docker_problem()
    if problem is None:
        return
    if REQUIRED:
        pytest.fail(f"ALE_REQUIRE_DOCKER=1, but the container tests cannot run: {problem}")
    pytest.skip(f"no Docker sandbox here ({problem}); ALE_REQUIRE_DOCKER=1 makes this a failure")


needs_docker = pytest.mark.skipif(
    not REQUIRED and docker_problem() is not None,
    reason=f"no Docker sandbox here ({docker_problem()}); 'make docker-deps images' sets it up",
)
"""For a whole test or a ``pytest.param``: skipped without Docker unless it is required
(the test then calls :func:`need_docker`, which fails with the reason)."""

DOCKER = pytest.param("docker", marks=needs_docker)
"""The docker sandbox as a value of a ``sandbox`` parameter."""


def agent_cmd(sandbox: str, script: Path) -> str:
    """The ``--agent`` command running ``script``: the host's Python on the host file, or,
    in a container (which mounts no host file), the image's Python on its text."""
    if sandbox == "docker":
        need_docker()
        return shlex.join(["python", "-c", script.read_text()])
    return f"{sys.executable} {script}"


def sandbox_args(sandbox: str) -> list[str]:
    """``--sandbox`` (and the agent image for docker) for ``ale-robotics run``."""
    if sandbox == "docker":
        return ["--sandbox", "docker", "--agent-image", AGENT_IMAGE]
    return ["--sandbox", sandbox]


def run_containers(run_id: str) -> list[str]:
    """Every container (running or not) labelled with ``run_id``."""
    if not docker_available():
        return []
    proc = subprocess.run(
        ["docker", "ps", "-a", "-q", "--filter", f"label=ale-robotics.run={run_id}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout.split()


def wait_until_gone(run_id: str, timeout_s: float = 20.0) -> list[str]:
    """The run's containers left after up to ``timeout_s`` (empty: all gone)."""
    deadline = time.monotonic() + timeout_s
    while (left := run_containers(run_id)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left
