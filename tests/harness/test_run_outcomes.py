"""result.json's `official` flag and per-episode outcomes, through real `ale-robotics run`s
(issue 13, point 4).

A smoke run (`--episodes N`) is never `official: true` anywhere in result.json; planning and
replay runs carry their per-problem / per-instance outcomes, which agree with the metrics, are
signed in the `result` event and are checked by the audit (a forged outcome fails it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ale_robotics.audit import audit_run, read_secret
from ale_robotics.tasks import default_registry

ROOT = Path(__file__).resolve().parents[2]
PLANNING_AGENT = f"{sys.executable} {ROOT / 'examples/agents/planning_agent.py'}"
REPLAY_AGENT = f"{sys.executable} {ROOT / 'examples/agents/fetch_scripted.py'}"
CHECKPOINT_AGENT = f"{sys.executable} {ROOT / 'examples/agents/submit_checkpoint.py'}"


def _run(tmp: Path, task_id: str, agent: str, *extra: str) -> dict[str, Any]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ale_robotics",
            "run",
            task_id,
            "--agent",
            agent,
            "--run-dir",
            str(tmp / "run"),
            "--state-dir",
            str(tmp / "state"),
            "--sandbox",
            "none",
            "--workspace",
            str(ROOT),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc: dict[str, Any] = json.loads((tmp / "run" / "result.json").read_text())
    assert doc["job_state"] == "SUCCEEDED", (tmp / "run" / "agent.log").read_text()
    return doc


def _walk(node: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """Every (path, key, value) of a JSON document."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield f"{path}.{k}", k, v
            yield from _walk(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, f"{path}[{i}]")


def _signed_result(tmp: Path) -> dict[str, Any]:
    lines = (tmp / "run" / "trajectory.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    payload: dict[str, Any] = [e for e in events if e["kind"] == "result"][-1]["payload"]
    return payload


def _failed(tmp: Path) -> dict[str, str]:
    report = audit_run(tmp / "run", read_secret(tmp / "state" / "secret"), workers=1)
    return {c.name: c.detail for c in report.checks if not c.ok}


def test_a_smoke_run_is_never_official_anywhere_in_result_json(short_tmp: Path) -> None:
    doc = _run(short_tmp, "td3-inverted-pendulum-v2", CHECKPOINT_AGENT, "--episodes", "2")
    assert doc["smoke_run"] == {"episodes": 2, "of": 10}
    claims = [(p, v) for p, k, v in _walk(doc) if k == "official"]
    assert claims, "result.json says nothing about officialness"
    assert all(v is not True for _, v in claims), claims
    assert doc["eval_result"]["read_on_harness_channel"] is True
    assert "schema_version" not in doc["eval_result"]  # result.json's own version covers it
    # the rollout backends have typed outcomes too: the episodes' returns and lengths
    outcomes = doc["eval_result"]["outcomes"]
    assert outcomes["backend"] == "mujoco_rollout"
    assert [e["episode_return"] for e in outcomes["episodes"]] == [
        e["episode_return"] for e in doc["eval_result"]["episodes"]
    ]
    assert _signed_result(short_tmp)["outcomes"] == outcomes
    assert _failed(short_tmp) == {}


@pytest.mark.slow  # a planning run and its audit's re-run: about 35 s on two cores
def test_planning_run_has_per_problem_outcomes_that_agree_with_the_metrics(
    short_tmp: Path,
) -> None:
    doc = _run(short_tmp, "panda-planner-config-v1", PLANNING_AGENT, "--episodes", "3")
    result = doc["eval_result"]
    assert result["outcomes"] is not None and result["outcomes"]["backend"] == "planner"
    problems = result["outcomes"]["problems"]
    assert [p["index"] for p in problems] == [e["index"] for e in result["episodes"]] == [0, 1, 2]
    m = result["metrics"]
    assert sum(p["success"] for p in problems) / 3 == m["success_rate"]
    assert sum(p["collided"] for p in problems) / 3 == m["collision_rate"]
    times = [p["planning_time_s"] for p in problems]
    assert sum(times) / 3 == pytest.approx(m["planning_time"]) and min(times) > 0
    assert all((p["reason"] == "") == p["success"] for p in problems)
    assert not any(p["success"] and p["collided"] for p in problems)
    signed = _signed_result(short_tmp)
    assert signed["outcomes"] == doc["eval_result"]["outcomes"]

    # the audit checks them against the signed event and re-plans, re-measuring the times
    report = audit_run(short_tmp / "run", read_secret(short_tmp / "state" / "secret"), workers=1)
    assert report.ok, [(c.name, c.detail) for c in report.checks if not c.ok]
    checks = {c.name: c.detail for c in report.checks}
    assert "reproduce its metrics" in checks["outcomes"]
    assert "planning_time_s mean" in checks["re-run outcomes"]
    assert "not compared" in checks["re-run outcomes"]

    # a forged per-problem outcome fails the audit, naming the signed result event
    flipped = not problems[0]["collided"]
    doc["eval_result"]["outcomes"]["problems"][0]["collided"] = flipped
    (short_tmp / "run" / "result.json").write_text(json.dumps(doc))
    failed = _failed(short_tmp)
    assert set(failed) == {"signed result"}, failed
    assert "outcomes differ from the signed `result` event" in failed["signed result"]
    assert f"problems[0].collided: {flipped!r} vs {not flipped!r}" in failed["signed result"]


def test_replay_run_has_per_instance_outcomes_that_agree_with_the_metrics(
    short_tmp: Path,
) -> None:
    doc = _run(short_tmp, "fetch-pickplace-trajset-v1", REPLAY_AGENT, "--episodes", "4")
    result = doc["eval_result"]
    assert result["official"] is False and result["smoke_run"] == {"episodes": 4, "of": 20}
    assert result["outcomes"] is not None and result["outcomes"]["backend"] == "replay"
    instances = result["outcomes"]["instances"]
    assert [i["index"] for i in instances] == [e["index"] for e in result["episodes"]]
    assert len(instances) == 4
    m = result["metrics"]
    assert sum(i["success"] for i in instances) / 4 == m["success_rate"] == 1.0
    distances = [i["final_distance"] for i in instances]
    assert sum(distances) / 4 == pytest.approx(m["mean_final_distance"])
    returns = [i["episode_return"] for i in instances]
    assert sum(returns) / 4 == pytest.approx(m["mean_return"])
    base = default_registry().get("fetch-pickplace-trajset-v1").eval.base_seeds
    assert [i["instance"] for i in instances] == [base[i["index"]] for i in instances]
    assert _signed_result(short_tmp)["outcomes"] == doc["eval_result"]["outcomes"]
    assert _failed(short_tmp) == {}

    # claiming a smoke run official fails the audit
    doc["eval_result"]["official"] = True
    (short_tmp / "run" / "result.json").write_text(json.dumps(doc))
    failed = _failed(short_tmp)
    assert "a smoke run is never official" in failed["signed result"], failed
