"""The Inspect recipes as a user runs them, offline: ``examples/agents/inspect_react.sh``
(Inspect's ReAct agent, the ``inspect eval`` command line) against a scripted
OpenAI-compatible upstream on loopback, and docs/inspect.md's offline example (a scripted
``mockllm``), each pasted unchanged into a fresh workspace holding the shipped checkpoint,
each scoring it 1.018 on the evaluator's hidden seeds."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from gateway.scripted_upstream import UPSTREAM_KEY, ScriptedUpstream, ToolCall, Turn

from ale_robotics.harness.report import RunReport, load_run_report

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "examples" / "agents" / "inspect_react.sh"
CHECKPOINT = Path("examples/agents/checkpoints/td3-inverted-pendulum-v1/policy.safetensors")
SUBMIT = "python $ALE_WORKSPACE/examples/agents/submit_checkpoint.py"


def _workspace(tmp: Path) -> Path:
    """A user's directory: the checkpoint and its submitting script, nothing else."""
    ws = tmp / "ws"
    for rel in (Path("examples/agents/submit_checkpoint.py"), CHECKPOINT):
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, ws / rel)
    return ws


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    """The environment, with the embedded evaluator's state under ``tmp`` and no
    OPENAI_*/ANTHROPIC_* but what the test sets."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    bin_dir = str(Path(sys.executable).parent)  # `inspect` and `ale-robotics`, as installed
    return {**env, "PATH": f"{bin_dir}:{env['PATH']}", "XDG_STATE_HOME": str(tmp / "xdg"), **extra}


def _the_run(ws: Path) -> RunReport:
    [path] = (ws / "runs").glob("*/result.json")
    report = load_run_report(path)
    assert isinstance(report, RunReport)
    assert report.score.score is not None and round(report.score.score, 3) == 1.018
    assert report.official and report.sandbox == "bwrap"
    return report


@needs_bwrap
@pytest.mark.slow
def test_the_react_recipe_against_a_scripted_openai_upstream_scores_1018(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    turns = [
        # Inspect first checks, once, that the account may have reasoning summaries (a
        # reasoning model on the Responses API); any answer will do.
        Turn(text="hello, world"),
        Turn(tool_calls=(ToolCall("bash", {"command": SUBMIT}),), tokens_in=1000, tokens_out=50),
        Turn(tool_calls=(ToolCall("submit", {"answer": "done"}),), tokens_in=1200, tokens_out=30),
    ]
    with ScriptedUpstream(turns) as upstream:
        done = subprocess.run(
            ["sh", str(RECIPE)],
            cwd=ws,
            env=_env(tmp_path, OPENAI_BASE_URL=f"{upstream.url}/v1", OPENAI_API_KEY=UPSTREAM_KEY),
            capture_output=True,
            text=True,
            timeout=900,
        )
        received = upstream.received
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert [r.path for r in received] == ["/v1/responses"] * 3
    assert all(r.body["model"] == "gpt-5" for r in received)
    tools = {t["name"] for t in received[1].body["tools"]}
    assert {"bash", "text_editor", "submit"} <= tools  # ReAct's and ale_agent's tools
    report = _the_run(ws)
    assert report.inspect is not None and report.inspect.model == "openai/gpt-5"
    assert report.label == "openai-gpt-5"
    usage = report.model_usage
    assert usage is not None and (usage.calls, usage.tokens_in, usage.tokens_out) == (2, 2200, 80)
    # `ale-robotics runs list` shows the run, scored
    listed = subprocess.run(
        ["ale-robotics", "runs", "list", "runs", "--json"],
        cwd=ws,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    [run] = json.loads(listed.stdout)["runs"]
    assert run["run_id"] == report.run_id and round(run["score"], 3) == 1.018
    assert (run["model_calls"], run["model_tokens"]) == (2, 2280)  # Inspect's count, listed


def test_the_recipe_is_the_command_the_readme_gives() -> None:
    readme = (REPO / "examples" / "agents" / "README.md").read_text()
    assert "sh examples/agents/inspect_react.sh" in readme
    assert "inspect eval ale_robotics/ale_task -T task_id=" in RECIPE.read_text()
    assert "inspect-ai 0.3.285" in readme and "inspect-ai 0.3.285" in RECIPE.read_text()
    pinned = (REPO / "pyproject.toml").read_text()
    assert 'inspect = ["inspect-ai==0.3.285"]' in pinned


def _offline_example() -> str:
    """The one Python block of docs/inspect.md's "Offline, with a scripted model"."""
    doc = (REPO / "docs" / "inspect.md").read_text()
    section = doc.split("## Offline, with a scripted model", 1)[1].split("\n## ", 1)[0]
    [code] = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    return code


@needs_bwrap
@pytest.mark.slow
def test_the_offline_example_in_the_docs_scores_1018(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", _offline_example()],
        cwd=ws,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "1.018"
    report = _the_run(ws)
    usage = report.model_usage
    assert usage is not None and (usage.calls, usage.tokens_in, usage.tokens_out) == (2, 200, 20)
