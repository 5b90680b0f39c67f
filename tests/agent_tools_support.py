"""Real agent software for the tests (importable as ``agent_tools_support``): is it here?

The real-client tests (``tests/gateway/test_real_clients.py``) run Claude Code and the
Codex CLI, installed as their users install them: ``make agent-tools`` puts the pinned npm
packages in ``~/.cache/ale-robotics/agent-tools`` (or ``$ALE_AGENT_TOOLS``). Where they are
missing those tests are skipped with the reason, unless ``ALE_REQUIRE_AGENT_TOOLS=1``
(``.ci/run`` sets it): then they fail, so CI can never pass by skipping them.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REQUIRED = os.environ.get("ALE_REQUIRE_AGENT_TOOLS") == "1"
TOOLS = Path(
    os.environ.get("ALE_AGENT_TOOLS") or Path.home() / ".cache" / "ale-robotics" / "agent-tools"
)
VERSIONS = {"claude": "2.1.337", "codex": "0.171.0"}
"""What the Makefile's agent-tools target installs (CLAUDE_CODE_VERSION, CODEX_VERSION)."""


def _problem(program: str) -> str | None:
    exe = TOOLS / "bin" / program
    try:
        out = subprocess.run(
            [str(exe), "--version"], capture_output=True, text=True, timeout=60, check=False
        ).stdout
    except OSError as exc:
        return f"{exe}: {exc.strerror}"
    except subprocess.TimeoutExpired:
        return f"{exe} --version did not answer in 60 s"
    if VERSIONS[program] not in out:
        return f"{exe} is not version {VERSIONS[program]} ({out.strip()!r})"
    return None


def need_agent_tool(program: str) -> Path:
    """The tools directory with ``program`` in its ``bin/``; skipped where it is missing
    (failed under ``ALE_REQUIRE_AGENT_TOOLS=1``)."""
    problem = _problem(program)
    if problem is None:
        return TOOLS
    if REQUIRED:
        pytest.fail(f"ALE_REQUIRE_AGENT_TOOLS=1, but {problem}: run 'make agent-tools'")
    pytest.skip(f"no {program} here ({problem}); 'make agent-tools' installs it")
