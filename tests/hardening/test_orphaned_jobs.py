"""kill -9 of a process embedding an evaluator (a harness, issue 31): its rollout workers
die with it, and its RUNNING job is recovered by the next evaluator to start.

Nobody can take such a job over (only the embedded evaluator serves its run), so it used
to stay RUNNING for good. The next evaluator on the state dir, whatever run it serves,
ends it FAILED (infrastructure) saying whose process died; what the lease model can
still re-run it leaves alone: a run open in the store, a run of ``evaluator serve
--run-id``, and any job whose owner's process is alive.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from hardening_helpers import TASK_ID, stable_weights, write_policy

from ale_robotics.evaluator import Evaluator, EvaluatorConfig
from ale_robotics.evaluator.batch.orphans import OrphanPolicy
from ale_robotics.evaluator.store import ExpiredJob
from ale_robotics.model.states import FailureSource, JobState
from ale_robotics.tasks import Registry, TaskSpec

RUN = "run-orphan-1"

EMBEDDED = textwrap.dedent(
    f"""
    import sys, threading, time
    from pathlib import Path
    from ale_robotics.client import AleClient
    from ale_robotics.evaluator import EvaluatorConfig, serve

    tmp = Path(sys.argv[1])
    config = EvaluatorConfig(tmp / "state", tmp / "vol", task_id={TASK_ID!r}, run_id={RUN!r},
                             workers=1, job_lease_s=1.0)
    ev = serve(config, agent_listen=f"unix://{{tmp}}/a.sock",
               harness_listen=f"unix://{{tmp}}/h.sock")
    with AleClient(ev.agent_address, ev.agent_token, run_id={RUN!r},
                   submission_dir=tmp / "vol") as c:
        job = c.submit(client_token="t")
        while not (c.status(job).state == "RUNNING" and ev.evaluator.pool.worker_pids()):
            time.sleep(0.01)
    print(job, *ev.evaluator.pool.worker_pids(), flush=True)
    threading.Event().wait()
    """
)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_killed_embedded_evaluators_job_fails_on_the_next_start(
    short_tmp: Path, registry: Registry, task: TaskSpec
) -> None:
    write_policy(short_tmp / "vol", stable_weights(task))  # 1000-step episodes: a long job
    proc = subprocess.Popen(
        [sys.executable, "-c", EMBEDDED, str(short_tmp)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    job, *workers = proc.stdout.readline().split()
    assert workers and all(_alive(int(w)) for w in workers)
    proc.send_signal(signal.SIGKILL)  # as a harness is killed -9, its evaluator inside
    proc.wait()
    deadline = time.monotonic() + 10
    while any(_alive(int(w)) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [int(w) for w in workers if _alive(int(w))]
    for w in left:
        os.kill(w, signal.SIGKILL)
    assert not left, "the rollout workers outlived the process embedding their evaluator"
    time.sleep(1.5)  # its 1 s lease runs out

    # the next evaluator on the state dir, embedded in another run
    config = EvaluatorConfig(short_tmp / "state", None, task_id=TASK_ID, run_id="run-next")
    ev = Evaluator(config, registry)
    try:
        row = ev.store.get(job)
    finally:
        ev.stop()
    assert row is not None and row.state is JobState.FAILED, row
    assert row.failure_source is FailureSource.INFRASTRUCTURE
    assert row.failure_reason == (
        f"its evaluator died (process {proc.pid} on host {socket.gethostname()}) and no "
        "evaluator can take the run over"
    )


def _expired(owner: str, *, run: str = RUN, run_open: bool = False) -> ExpiredJob:
    return ExpiredJob("job-0123456789abcdef", run, "t", owner, run_open)


def test_only_a_run_nobody_can_serve_whose_owner_is_gone_is_failed() -> None:
    host = socket.gethostname()
    gone = subprocess.Popen(["true"])
    gone.wait()  # a real process, dead and reaped
    dead, alive = f"{host}:{gone.pid}:ab12", f"{host}:{os.getpid()}:ab12"
    policy = OrphanPolicy(bound_run="run-mine", resumable=lambda run: run == "run-served")
    assert policy(_expired(dead)) is not None
    assert policy(_expired(alive)) is None  # a live process's job is never touched
    assert policy(_expired(f"elsewhere:{gone.pid}:ab12")) is None  # another host: unknown
    assert policy(_expired(dead, run_open=True)) is None  # shared: requeued for a replica
    assert policy(_expired(dead, run="run-served")) is None  # serve --run-id takes it over
    assert policy(_expired(dead, run="run-mine")) is None  # this evaluator re-runs it
    assert policy(_expired("not an owner id")) is None
