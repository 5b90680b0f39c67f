"""Runs cannot reach each other's data on an evaluator they share (issue 12, points 5 and 6).

* ``evaluator serve`` without ``--run-id``, a real process: the state dir's
  ``agent.token`` (what every run's agent used to get) reaches no run: it cannot
  submit for a run, snapshot another run's files out of the volume, open an eval
  session or read a job; a run opened with OpenRun gets a token of its own,
  which keeps working across an evaluator restart and stops at CloseRun.
* An evaluator bound to one run on the state dir of an earlier run (what
  ``ale-robotics run`` does with its default state dir) does not answer for the
  earlier run's job on the agent channel.
* ``ale-robotics run --evaluator`` against a shared evaluator: each run's agent,
  in its sandbox, sees only its own submission directory and its own jobs.
"""

from __future__ import annotations

import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest
from hardening_helpers import (
    TASK_ID,
    reap,
    serve_command,
    start_evaluator,
    wait,
    wait_ready,
    write_policy,
)
from helpers import random_weights

from ale_robotics.client import AleClient
from ale_robotics.errors import NotFoundError, PermissionDeniedError, UnauthenticatedError
from ale_robotics.evaluator import EvaluatorConfig, serve
from ale_robotics.tasks import Registry, TaskSpec
from ale_robotics.v1 import ale_env_pb2 as pb


def test_shared_agent_token_of_evaluator_serve_reaches_no_run(
    module_tmp: Path, task: TaskSpec
) -> None:
    tmp, state, volume = module_tmp / "cli", module_tmp / "cli" / "state", module_tmp / "cli" / "v"
    volume.mkdir(parents=True)
    agent_addr, harness_addr = f"unix://{tmp}/agent/a.sock", f"unix://{tmp}/h.sock"
    # what run B's agent left in the volume, where run A's agent used to see it too
    write_policy(volume / "run-iso-b", random_weights(task, seed=3, scale=0.3))
    proc = start_evaluator(serve_command(tmp, state, volume, None), tmp / "ev.log")
    try:
        legacy = wait_ready(agent_addr, state / "agent.token", proc)
        harness_token = (state / "harness.token").read_text().strip()
        with AleClient(agent_addr, legacy, task_id=TASK_ID) as c:
            assert c.get_spec().task.id == TASK_ID
            # acting for a run, with another run's files from the shared volume
            req = pb.SubmitBatchEvalRequest(
                task_id=TASK_ID, run_id="run-iso-a", submission_path="run-iso-b", client_token="t"
            )
            with pytest.raises(PermissionDeniedError, match="OpenRun"):
                c._call(c.stub.SubmitBatchEval, req)
            with pytest.raises(PermissionDeniedError, match="OpenRun"):
                c._call(
                    c.stub.OpenSession,
                    pb.OpenSessionRequest(kind=pb.SESSION_KIND_EVAL, run_id="run-iso-a"),
                )
            with pytest.raises(PermissionDeniedError, match="OpenRun"):
                c._call(c.stub.GetBatchEvalStatus, pb.GetBatchEvalStatusRequest(run_id="run-iso-a"))
        # the run's own token works, and survives a restart of the evaluator
        with AleClient(harness_addr, harness_token) as h:
            r = h._call(h.stub.OpenRun, pb.OpenRunRequest(run_id="run-iso-c"))
        assert Path(r.submission_dir) == volume / "run-iso-c"
        write_policy(Path(r.submission_dir), random_weights(task, seed=4, scale=0.3))
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
        proc = start_evaluator(serve_command(tmp, state, volume, None), tmp / "ev.log")
        wait_ready(agent_addr, state / "agent.token", proc)
        with AleClient(agent_addr, r.agent_token, submission_dir=r.submission_dir) as c:
            job = c.submit(client_token="c-1")
            assert wait(c, job).state == "SUCCEEDED"
        with AleClient(harness_addr, harness_token) as h:
            h._call(h.stub.CloseRun, pb.CloseRunRequest(run_id="run-iso-c"))
        with AleClient(agent_addr, r.agent_token) as c, pytest.raises(UnauthenticatedError):
            c.status(job)
    finally:
        reap(proc.pid)


def test_an_earlier_runs_job_is_not_found_on_a_later_runs_evaluator(
    module_tmp: Path, registry: Registry, task: TaskSpec
) -> None:
    """``ale-robotics run`` reuses its state dir: run 2's agent must not read run 1's job."""
    state, volume = module_tmp / "seq-state", module_tmp / "seq-vol"
    write_policy(volume, random_weights(task, seed=5, scale=0.3))
    jobs = {}
    for n, run in enumerate(("run-seq-1", "run-seq-2")):
        ev = serve(
            EvaluatorConfig(state, volume, task_id=TASK_ID, run_id=run, workers=1),
            agent_listen=f"unix://{module_tmp}/seq/a{n}.sock",
            harness_listen=f"unix://{module_tmp}/seq-h{n}.sock",
            registry=registry,
        )
        try:
            with AleClient(ev.agent_address, ev.agent_token, run_id=run) as c:
                jobs[run] = c.submit(client_token="k")
                assert wait(c, jobs[run]).state == "SUCCEEDED"
                if n == 1:
                    with pytest.raises(NotFoundError) as info:
                        c.status(jobs["run-seq-1"])
                    assert info.value.message == f"no job {jobs['run-seq-1']!r}"
            if n == 1:
                with AleClient(ev.harness_address, ev.harness_token) as h:
                    assert h.status(jobs["run-seq-1"]).state == "SUCCEEDED"  # trusted
        finally:
            ev.stop(grace=0.5)


PROBE_AGENT = """
import os, sys
from pathlib import Path
import numpy as np
from safetensors.numpy import save_file
from ale_robotics.client import AleClient
from ale_robotics.errors import AleError
c = AleClient.from_env()
sub = Path(os.environ["ALE_SUBMISSION_DIR"])
print("submission dir:", sub.name, sorted(p.name for p in sub.iterdir()))
for other in sys.argv[1:]:
    if other.startswith("job-"):
        try:
            c.status(other)
            print("probe", other, "visible")
        except AleError as exc:
            print("probe", other, exc.code.name)
    else:
        print("probe", other, "exists" if Path(other).exists() else "absent")
spec = c.get_spec()
rng = np.random.default_rng(0)
w = {r.key: (rng.standard_normal(r.shape) * 0.1).astype(r.dtype) for r in spec.contract.tensors}
save_file(w, str(sub / "policy.safetensors"))
print("job state:", c.wait(c.submit()).state)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap sandbox")
def test_harness_runs_on_a_shared_evaluator_are_isolated(
    module_tmp: Path, registry: Registry, task: TaskSpec
) -> None:
    from ale_robotics.harness.run import RunOptions, run_task
    from ale_robotics.sandboxes.bwrap.command import sandbox_available

    mode = "bwrap" if sandbox_available() else "none"
    root = module_tmp / "hr"
    volume = root / "vol"
    volume.mkdir(parents=True)
    ev = serve(
        EvaluatorConfig(root / "state", volume, task_id=TASK_ID, workers=1, per_run_tokens=True),
        agent_listen=f"unix://{root}/agent/a.sock",
        harness_listen=f"unix://{root}/h.sock",
        registry=registry,
    )
    agent = root / "ws" / "agent.py"
    agent.parent.mkdir()
    agent.write_text(textwrap.dedent(PROBE_AGENT))
    try:
        outcomes = []
        for n in range(2):
            probes = []
            if outcomes:
                first = outcomes[0]
                assert first.report.eval_result is not None
                probes = [first.report.eval_result.job_id, str(volume / first.run_id)]
            opts = RunOptions(
                task_id=TASK_ID,
                agent_cmd=f"{sys.executable} {agent} {' '.join(probes)}",
                run_id=f"run-hr-{n}",
                run_dir=root / "runs" / f"run-hr-{n}",
                evaluator=ev.agent_address,
                evaluator_harness=ev.harness_address,
                harness_token_file=ev.evaluator.state.root / "harness.token",
                sandbox=mode,  # type: ignore[arg-type]
                workspace=agent.parent,
            )
            outcomes.append(run_task(opts, registry=registry))
        for out in outcomes:
            assert out.report.job_state == "SUCCEEDED", out.report
            log = (out.run_dir / "agent.log").read_text()
            assert f"submission dir: {out.run_id} []" in log  # its own, new and empty
            run = ev.evaluator.runs.get(out.run_id)
            assert run is not None and not run.open  # the harness closed it: token revoked
        second = (outcomes[1].run_dir / "agent.log").read_text()
        first_job = outcomes[0].report.eval_result.job_id  # type: ignore[union-attr]
        assert f"probe {first_job} NOT_FOUND" in second
        if mode == "bwrap":
            assert f"probe {volume / outcomes[0].run_id} absent" in second
    finally:
        ev.stop(grace=0.5)
