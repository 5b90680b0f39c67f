"""The agent channel's job status carries no per-episode progress; the harness's does (issue 12).

When each hidden episode ended tells how long it lasted, and on a task like the
inverted pendulum (reward 1 per step until it falls) an episode's length is its
return: an agent polling ``episodes_done`` with ``updated_unix`` (or the
heartbeat that accompanies each progress update) could estimate its score and
rank candidates across its submissions. The agent now sees 0 until the job
SUCCEEDED, no heartbeat and no update time while RUNNING; the harness channel
keeps the exact figures.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hardening_helpers import stable_weights, wait, write_policy

from ale_robotics.client import AleClient
from ale_robotics.evaluator import EvaluatorConfig, RunningEvaluator, serve
from ale_robotics.tasks import TaskSpec
from ale_robotics.tensors import to_tensor
from ale_robotics.v1 import ale_env_pb2 as pb

INTERACTIVE = "td3-inverted-double-pendulum-v1"
RUN = "run-coarse-1"


@pytest.fixture(scope="module")
def ievaluator() -> Iterator[RunningEvaluator]:
    """An interactive evaluator bound to one run, as ``ale-robotics run`` starts it."""
    with tempfile.TemporaryDirectory(prefix="ale-cp-") as d:
        running = serve(
            EvaluatorConfig(Path(d) / "state", None, task_id=INTERACTIVE, run_id=RUN, workers=1),
            agent_listen=f"unix://{d}/a/a.sock",
            harness_listen=f"unix://{d}/h.sock",
        )
        try:
            yield running
        finally:
            running.stop(grace=0.5)


def _status(
    address: str, token: str, run_id: str = "", job_id: str = ""
) -> pb.GetBatchEvalStatusResponse:
    with AleClient(address, token) as c:
        req = pb.GetBatchEvalStatusRequest(job_id=job_id, run_id=run_id)
        return c._call(c.stub.GetBatchEvalStatus, req)


def test_eval_session_progress_is_exact_for_the_harness_only(ievaluator: RunningEvaluator) -> None:
    ev = ievaluator
    with AleClient(ev.agent_address, ev.agent_token, task_id=INTERACTIVE, run_id=RUN) as c:
        opened = c._call(
            c.stub.OpenSession,
            pb.OpenSessionRequest(task_id=INTERACTIVE, kind=pb.SESSION_KIND_EVAL, num_envs=2),
        )
        sid, budget = opened.session_id, opened.episode_budget
        c._call(c.stub.Reset, pb.ResetRequest(session_id=sid))
        zeros = to_tensor(np.zeros((2, 1), np.float32))
        done = 0
        while done < 3:  # a few episodes ended (zero actions: the pendulum falls fast)
            r = c._call(c.stub.Step, pb.StepRequest(session_id=sid, action=zeros))
            done = r.episodes_completed
        assert done < budget
        time.sleep(0.01)  # a heartbeat, if there were one, would be in the past
        seen_by_agent = _status(ev.agent_address, ev.agent_token, RUN)
        seen_by_harness = _status(ev.harness_address, ev.harness_token, RUN)
        assert seen_by_harness.state == seen_by_agent.state == pb.JOB_STATE_RUNNING
        # the harness: exact count, heartbeat and update time
        assert seen_by_harness.progress.episodes_done == done
        assert seen_by_harness.heartbeat_unix > 0 and seen_by_harness.updated_unix > 0
        # the agent: nothing that moves with each episode
        assert seen_by_agent.progress.episodes_done == 0
        assert seen_by_agent.progress.episodes_total == budget
        assert seen_by_agent.heartbeat_unix == 0 and seen_by_agent.updated_unix == 0
        assert seen_by_agent.progress.coarse and not seen_by_harness.progress.coarse
        while not r.eval_complete:
            r = c._call(c.stub.Step, pb.StepRequest(session_id=sid, action=zeros))
    final_agent = _status(ev.agent_address, ev.agent_token, RUN)
    final_harness = _status(ev.harness_address, ev.harness_token, RUN)
    assert final_agent.state == pb.JOB_STATE_SUCCEEDED
    assert final_agent.progress.episodes_done == budget  # done: the total, nothing finer
    assert final_agent.updated_unix == final_harness.updated_unix > 0  # a state change
    assert final_agent.heartbeat_unix == 0


def test_batch_job_progress_is_coarse_on_the_agent_channel(
    evaluator: RunningEvaluator, task: TaskSpec
) -> None:
    """A job whose episodes last 1000 steps each: polled on both channels until it ends."""
    volume = evaluator.evaluator.config.submission_volume
    assert volume is not None
    write_policy(volume / "stable", stable_weights(task))
    run = evaluator.evaluator.config.run_id
    assert run is not None
    with AleClient(
        evaluator.agent_address, evaluator.agent_token, task_id=task.id, run_id=run
    ) as c:
        job = c.submit("stable", client_token="coarse-1")
        agent_done: set[int] = set()
        harness_done: set[int] = set()
        agent_times: set[float] = set()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            a = _status(evaluator.agent_address, evaluator.agent_token, job_id=job)
            h = _status(evaluator.harness_address, evaluator.harness_token, job_id=job)
            agent_done.add(a.progress.episodes_done)
            harness_done.add(h.progress.episodes_done)
            agent_times.update(
                (a.heartbeat_unix, a.updated_unix if a.state == pb.JOB_STATE_RUNNING else 0.0)
            )
            if a.state not in (pb.JOB_STATE_QUEUED, pb.JOB_STATE_RUNNING):
                break
            time.sleep(0.01)
        final = wait(c, job)
    total = task.eval.evaluated_episodes
    assert agent_done <= {0, total}  # never a count in between
    assert agent_times == {0.0}  # no heartbeat, no update time while RUNNING
    assert total in harness_done
    assert final.state == "SUCCEEDED" and final.progress_coarse
