"""A policy that outputs NaN fails its own submission; it can no longer void the run.

Issue 12, point 4: finite float32 weights that overflow give NaN actions. The old
evaluator passed them to the simulator: on InvertedPendulum MuJoCo zeroed the
control and the job SUCCEEDED as if nothing had happened; on HalfCheetah the
return turned NaN, the job was retried three times as an infrastructure failure
and ``ale-robotics run`` exited 1 with no result, so a policy could void any run
it was about to lose. Now the worker checks every action before it is stepped:
the job ends FAILED with failure source ``submission`` after one attempt, the
official result and the signed ``result`` event say which episode and step, the
agent's status does not (when a hidden episode fails is information about it),
and the harness scores the run 0 with that reason.

Real evaluators, real MuJoCo episodes; the NaN comes from real weights.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from hardening_helpers import official, wait, write_policy
from nonfinite_helpers import (
    FALL_RUN,
    FALL_SECRET,
    controller_weights,
    fall_detector_weights,
    overflow_weights,
)

from ale_robotics.client import AleClient
from ale_robotics.evaluator import EvaluatorConfig, RunningEvaluator, serve
from ale_robotics.evaluator.batch.pipeline import rollout_episodes
from ale_robotics.evaluator.state.directory import write_private
from ale_robotics.model.result import EvalResult
from ale_robotics.seeds import derive_seeds
from ale_robotics.tasks import Registry, TaskSpec

PENDULUM = "td3-inverted-pendulum-v1"
PENDULUM_NATIVE = "td3-inverted-pendulum-v2"
CHEETAH_VEC = "td3-halfcheetah-vec-v1"


@contextlib.contextmanager
def _evaluator(
    tmp: Path,
    registry: Registry,
    task_id: str,
    run_id: str = "run-nan-1",
    secret: bytes | None = None,
    **config: object,
) -> Iterator[RunningEvaluator]:
    volume = tmp / "vol"
    volume.mkdir(exist_ok=True)
    if secret is not None:
        write_private(tmp / "state" / "secret", secret)
    ev = serve(
        EvaluatorConfig(
            tmp / "state",
            volume,
            task_id=task_id,
            run_id=run_id,
            workers=1,
            max_submissions_per_run=20,
            **config,  # type: ignore[arg-type]
        ),
        agent_listen=f"unix://{tmp}/a.sock",
        harness_listen=f"unix://{tmp}/h.sock",
        registry=registry,
    )
    try:
        yield ev
    finally:
        ev.stop(grace=0.5)


def _client(ev: RunningEvaluator) -> AleClient:
    cfg = ev.evaluator.config
    return AleClient(
        ev.agent_address,
        ev.agent_token,
        task_id=cfg.task_id,
        run_id=cfg.run_id,
        submission_dir=cfg.submission_volume,
    )


def _result_event(res: EvalResult, job_id: str) -> dict[str, object]:
    (event,) = [e for e in res.events if e["kind"] == "result" and e["payload"]["job_id"] == job_id]
    payload: dict[str, object] = event["payload"]
    return payload


def _assert_submission_failure(ev: RunningEvaluator, job_id: str, where: str) -> EvalResult:
    """FAILED by the submission, one attempt, the reason precise for the harness only."""
    with _client(ev) as c:
        st = c.status(job_id)
    assert (st.state, st.failure_source) == ("FAILED", "submission"), st
    assert "non-finite action (nan)" in st.failure_reason
    assert where not in st.failure_reason and " at step " not in st.failure_reason  # not for it
    res = official(ev.harness_address, ev.harness_token, job_id)
    assert (res.state, res.failure_source, res.attempts) == ("FAILED", "submission", 1)
    assert res.failure_reason.startswith("the policy produced a non-finite action (nan)")
    assert where in res.failure_reason
    assert res.metrics == {}
    payload = _result_event(res, job_id)
    assert payload["state"] == "FAILED" and payload["failure_source"] == "submission"
    assert payload["reason"] == res.failure_reason
    starts = [e for e in res.events if e["kind"] == "evaluation_started"]
    assert len(starts) == 1  # never retried
    return res


def test_overflowing_weights_fail_the_submission_once_then_service_goes_on(
    short_tmp: Path, registry: Registry, task: TaskSpec
) -> None:
    with _evaluator(short_tmp, registry, PENDULUM) as ev:
        write_policy(short_tmp / "vol", overflow_weights(task))
        with _client(ev) as c:
            job = c.submit(client_token="nan")
            wait(c, job)
            _assert_submission_failure(ev, job, "in episode 0 at step 1:")
            # the snapshot of a terminal job is reclaimed
            assert not (ev.evaluator.state.snapshots / job).exists()
            # it counts against the quota like any evaluated submission
            assert ev.evaluator.store.quota_used(ev.evaluator.config.run_id or "", 1) == 1
            write_policy(short_tmp / "vol", controller_weights(task))
            good = c.submit(client_token="good")
            assert wait(c, good).state == "SUCCEEDED"


def test_vectorized_backend_nan_fails_the_submission(short_tmp: Path, registry: Registry) -> None:
    """td3-halfcheetah-vec-v1 (mujoco.rollout): on the old code a NaN return, 3 attempts, FAILED
    as infrastructure."""
    cheetah = registry.get(CHEETAH_VEC)
    with _evaluator(short_tmp, registry, CHEETAH_VEC, smoke_episodes=2) as ev:
        write_policy(short_tmp / "vol", overflow_weights(cheetah))
        with _client(ev) as c:
            job = c.submit(client_token="nan-vec")
            wait(c, job, timeout_s=120)
        _assert_submission_failure(ev, job, "in episode 0 at step 1:")


def test_fall_detector_fails_the_submission_at_the_first_fall(
    short_tmp: Path, registry: Registry, task: TaskSpec
) -> None:
    """NaN only when about to fall: the falling episodes are named, never dropped or voided."""
    seeds = [(s.index, s.value) for s in derive_seeds(task.eval.base_seeds, FALL_RUN, FALL_SECRET)]
    plain = {o.index: o.length for o in rollout_episodes(task, controller_weights(task), seeds)}
    upright = [i for i, n in plain.items() if n == task.env.max_episode_steps]
    assert 0 < len(upright) < len(seeds)  # some episodes fall and some do not
    # the detector is silent in the episodes that do not fall: they run exactly as before
    kept = rollout_episodes(task, fall_detector_weights(task), [seeds[i] for i in upright])
    assert {o.index: o.length for o in kept} == {i: plain[i] for i in upright}

    with _evaluator(short_tmp, registry, PENDULUM, run_id=FALL_RUN, secret=FALL_SECRET) as ev:
        write_policy(short_tmp / "vol", fall_detector_weights(task))
        with _client(ev) as c:
            job = c.submit(client_token="fall")
            wait(c, job)
        res = _assert_submission_failure(ev, job, " at step ")
    named = re.search(r"in episode (\d+) at step (\d+):", res.failure_reason)
    assert named is not None
    episode, step = int(named[1]), int(named[2])
    assert episode not in upright and step <= plain[episode]  # a falling one, before it fell

    # exactly the first fault in index order, shard by shard as the pool runs them
    # (imported here, so that the part above also runs against an evaluator without it)
    from ale_robotics.model.episode import PolicyFault

    size = task.eval.envs_per_shard
    for start in range(0, len(seeds), size):
        try:
            rollout_episodes(task, fall_detector_weights(task), seeds[start : start + size])
        except PolicyFault as exc:
            assert res.failure_reason == exc.reason
            break
    else:
        raise AssertionError("the detector never fired in-process")


AGENT = """
import numpy as np
from safetensors.numpy import save_file
from ale_robotics.client import AleClient
c = AleClient.from_env()
spec = c.get_spec()
w = {r.key: np.zeros(r.shape, np.float32) for r in spec.contract.tensors}
w["l1.bias"][0] = 3e38  # finite, but 3e38 * 3e38 overflows: inf - inf = NaN
w["l2.weight"][0, 0] = 3e38
w["l2.weight"][1, 0] = 3e38
w["l3.weight"][0, 0] = 1.0
w["l3.weight"][0, 1] = -1.0
save_file(w, str(c.submission_dir / "policy.safetensors"))
st = c.wait(c.submit())
print("job state:", st.state, st.failure_source)
"""


@pytest.mark.parametrize(
    ("task_id", "extra"),
    [(PENDULUM, []), (PENDULUM_NATIVE, []), (CHEETAH_VEC, ["--episodes", "2"])],
    ids=["gymnasium", "mujoco_rollout", "vectorized"],
)
def test_harness_scores_a_nan_policy_zero_with_the_reason(
    short_tmp: Path, task_id: str, extra: list[str]
) -> None:
    """Exit 0 and a result.json (the old code: SUCCEEDED, or exit 1 with no result)."""
    agent = short_tmp / "agent.py"
    agent.write_text(textwrap.dedent(AGENT))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ale_robotics",
            "run",
            task_id,
            "--agent",
            f"{sys.executable} {agent}",
            "--sandbox",
            "none",
            "--run-dir",
            str(short_tmp / "run"),
            "--state-dir",
            str(short_tmp / "state"),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=short_tmp,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1].startswith("score: 0.000")
    result = json.loads((short_tmp / "run" / "result.json").read_text())
    assert result["job_state"] == "FAILED"
    ev = result["eval_result"]
    assert (ev["failure_source"], ev["attempts"]) == ("submission", 1)
    assert "non-finite action (nan) in episode 0 at step 1" in ev["failure_reason"]
    assert result["score"]["score"] == 0.0
    assert "non-finite action (nan) in episode 0 at step 1" in result["score"]["explanation"]
    assert "job state: FAILED submission" in (short_tmp / "run" / "agent.log").read_text()
    assert list((short_tmp / "state" / "snapshots").iterdir()) == []  # nothing kept forever
