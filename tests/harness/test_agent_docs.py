"""What the agent docs tell an agent author holds for a real run (issue 48.8).

* docs/agents.md's complete eval loop, extracted from the page as written, is the agent of a
  real interactive run: it plays exactly the task's episode budget (no ``OutOfRangeError`` on
  an extra reset, no episode left to the evaluator's null action).
* docs/running.md's variable table names every ``ALE_*`` variable an agent is given (a real
  run's agent reports its environment; the model gateway's are read from the gateway), and
  names none that no agent gets.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from ale_robotics.gateway.server import ModelGateway
from ale_robotics.gateway.usage import GatewayPolicy
from ale_robotics.harness.report import RunReport, load_run_report

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "ale_robotics"]


def _run(
    tmp: Path, task: str, agent: Path, *args: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    run_dir = tmp / "run"
    base = ["--sandbox", "none", "--workers", "1", "--state-dir", str(tmp / "state")]
    proc = subprocess.run(
        [
            *CLI,
            "run",
            task,
            "--agent",
            f"{sys.executable} {agent}",
            *base,
            "--run-dir",
            str(run_dir),
            *args,
        ],
        cwd=tmp,
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return proc, run_dir


def documented_eval_loop() -> str:
    """The first Python block under docs/agents.md's "A complete eval loop"."""
    page = (ROOT / "docs" / "agents.md").read_text()
    section = page.split("### A complete eval loop", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None, "docs/agents.md: no code block under 'A complete eval loop'"
    return match.group(1)


def test_the_documented_eval_loop_plays_exactly_the_budget(tmp_path: Path) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(documented_eval_loop())
    proc, run_dir = _run(tmp_path, "td3-hopper-v1", agent)
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = (run_dir / "agent.log").read_text()
    assert "Traceback" not in log and "OutOfRangeError" not in log, log[-3000:]
    assert "eval: 10 episodes of at most 1000 steps" in log
    played = re.findall(r"^episode (\d+): return ", log, re.M)
    assert played == [str(i) for i in range(1, 11)], log[-3000:]
    report = load_run_report(run_dir / "result.json")
    assert isinstance(report, RunReport) and report.eval_result is not None
    assert report.eval_result.state == "SUCCEEDED"
    assert len(report.eval_result.episodes) == 10
    assert report.score.abandoned_episodes == 0  # every episode played by the agent
    assert "abandoned" not in proc.stdout.strip().splitlines()[-1]


_DUMP_ENV = """
import json, os
names = sorted(k for k in os.environ if k.startswith("ALE_"))
open("ale-vars.json", "w").write(json.dumps(names))
"""


def documented_variables() -> set[str]:
    """The ``ALE_*`` names in the first column of docs/running.md's variable table."""
    names: set[str] = set()
    for line in (ROOT / "docs" / "running.md").read_text().splitlines():
        if line.startswith("| `ALE_"):
            names.update(re.findall(r"`(ALE_[A-Z_]+)`", line.split("|")[1]))
    return names


def test_the_variable_table_names_every_variable_an_agent_is_given(tmp_path: Path) -> None:
    agent = tmp_path / "dump_env.py"
    agent.write_text(_DUMP_ENV)
    extra = ["--episodes", "1", "--agent-seed", "7", "--repetition", "2"]
    proc, run_dir = _run(tmp_path, "td3-inverted-pendulum-v2", agent, *extra)
    assert proc.returncode == 0, proc.stderr[-3000:]
    given = set(json.loads((run_dir / "scratch" / "ale-vars.json").read_text()))
    assert {"ALE_WORKSPACE", "ALE_TASK_DIR", "ALE_SCRATCH_DIR", "ALE_SEED"} <= given  # sanity
    gateway = ModelGateway(
        upstream="http://127.0.0.1:9",
        upstream_key=None,
        policy=GatewayPolicy.of(["model-a", "model-b"], 1000),
        socket_path=tmp_path / "gw.sock",
        transcript=tmp_path / "model_calls.jsonl",
    )
    given |= {k for k in gateway.agent_env("http://127.0.0.1:1") if k.startswith("ALE_")}
    documented = documented_variables()
    assert not given - documented, (
        f"given to the agent, not in docs/running.md: {given - documented}"
    )
    assert not documented - given, f"in docs/running.md, given to no agent: {documented - given}"
