"""The planning tasks end to end through `ale-robotics run` with their reference agents, as
smoke runs of a few problems, plus a rejected planner.yaml and the task_config hand-over rules
(the agent cannot submit; a key off the allow-list is rejected by name)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
AGENT = f"{sys.executable} {ROOT / 'examples/agents/planning_agent.py'}"

BAD_PLANNER = """
from ale_robotics.client import AleClient
c = AleClient.from_env()
(c.submission_dir / "planner.yaml").write_text("planner: RRT\\ntime_limit_s: 2\\ngoal_bias: 2\\n")
print("job state:", c.wait(c.submit()).state)
"""

PUSHY_EDMP = """
from ale_robotics.client import AleClient
from ale_robotics.errors import PermissionDeniedError
c = AleClient.from_env()
path = c.submission_dir / "edmp_config.yaml"
assert "Agent-settable keys: guides, samples_per_guide, steps" in path.read_text()
path.write_text(path.read_text().replace("step_size: 0.03", "step_size: 0.5"))
try:
    c.submit()
except PermissionDeniedError as exc:
    print("refused:", exc)
"""


def _run(
    tmp: Path, task_id: str, agent: str, episodes: int, workspace: Path = ROOT
) -> dict[str, Any]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ale_robotics",
            "run",
            task_id,
            "--agent",
            agent,
            "--episodes",
            str(episodes),
            "--run-dir",
            str(tmp / "run"),
            "--state-dir",
            str(tmp / "state"),
            "--workspace",  # what the (sandboxed) agent sees: the repo, or tmp for inline agents
            str(workspace),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc: dict[str, Any] = json.loads((tmp / "run" / "result.json").read_text())
    doc["score_line"] = proc.stdout.strip().splitlines()[-1]
    return doc


def _kinds(tmp: Path) -> list[str]:
    lines = (tmp / "run" / "trajectory.jsonl").read_text().splitlines()
    return [json.loads(line)["kind"] for line in lines]


def _agent_file(tmp: Path, source: str) -> str:
    path = tmp / "agent.py"
    path.write_text(textwrap.dedent(source))
    return f"{sys.executable} {path}"


def test_planner_reference_agent(short_tmp: Path) -> None:
    doc = _run(short_tmp, "panda-planner-config-v1", AGENT, 3)
    result = doc["eval_result"]
    assert doc["job_state"] == "SUCCEEDED", (short_tmp / "run" / "agent.log").read_text()
    m = result["metrics"]
    assert 0 < m["planning_time"] < 7.0  # time limit 5 s + grace 2 s per problem at most
    assert 0 <= m["success_rate"] <= 1 and 0 <= m["collision_rate"] <= 1
    assert m["success_rate"] + m["collision_rate"] <= 1  # a colliding path is never a success
    assert result["submission_files"].keys() == {"planner.yaml"}
    assert result["host"]["cpu_count"] >= 1 and result["simulator_versions"]["pybullet"] == "3.2.7"
    assert len(result["episodes"]) == 3
    assert doc["score"]["status"] == "unscored"
    assert doc["score_line"].startswith("score: unscored: target not synced (planning_time ")
    assert result["simulator_versions"]["ompl"] == "2.0.1"
    # an audit re-plans the same hidden problems: exact metrics match, timing is re-measured
    from ale_robotics.audit import audit_run, read_secret

    report = audit_run(short_tmp / "run", read_secret(short_tmp / "state" / "secret"), workers=1)
    assert report.ok, [(c.name, c.detail) for c in report.checks if not c.ok]
    assert {"metrics", "timed metrics"} <= {c.name for c in report.checks}


def test_a_bad_planner_yaml_is_rejected_naming_the_key(short_tmp: Path) -> None:
    doc = _run(
        short_tmp, "panda-planner-config-v1", _agent_file(short_tmp, BAD_PLANNER), 1, short_tmp
    )
    assert doc["job_state"] == "REJECTED"
    assert doc["eval_result"]["failure_reason"] == (
        "planner.yaml: key 'goal_bias': Input should be less than or equal to 1 "
        "(rule: planner schema)"
    )
    assert "job state: REJECTED" in (short_tmp / "run" / "agent.log").read_text()


def test_edmp_reference_agent(short_tmp: Path) -> None:
    doc = _run(short_tmp, "edmp-v1", AGENT, 2)
    result = doc["eval_result"]
    assert doc["job_state"] == "SUCCEEDED", (short_tmp / "run" / "agent.log").read_text()
    assert set(result["metrics"]) >= {"success_rate", "collision_rate", "planning_time"}
    assert result["submission_files"].keys() == {"edmp_config.yaml"}
    kinds = _kinds(short_tmp)
    assert kinds.index("agent_exited") < kinds.index("task_config_submitted")
    assert kinds.index("task_config_submitted") < kinds.index("submission_received")
    assert doc["score_line"].startswith("score: unscored: target not synced (success_rate ")


def test_edmp_agent_cannot_submit_and_off_list_keys_are_rejected(short_tmp: Path) -> None:
    doc = _run(short_tmp, "edmp-v1", _agent_file(short_tmp, PUSHY_EDMP), 1, short_tmp)
    log = (short_tmp / "run" / "agent.log").read_text()
    assert "refused: this task evaluates your copy of its config when you exit" in log
    assert doc["job_state"] == "REJECTED"
    reason = doc["eval_result"]["failure_reason"]
    assert reason.startswith("edmp_config.yaml: key 'step_size' is not agent-settable in this task")
    assert reason.endswith("(rule: edmp allow-list)")
