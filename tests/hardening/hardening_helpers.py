"""Helpers shared by the hardening tests (importable as ``hardening_helpers``)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from ale_robotics.client import AleClient, JobStatus
from ale_robotics.errors import AleError
from ale_robotics.evaluator import RunningEvaluator
from ale_robotics.model.result import EvalResult
from ale_robotics.seeds import derive_seeds
from ale_robotics.tasks import TaskSpec
from ale_robotics.v1 import ale_env_pb2 as pb

TASK_ID = "td3-inverted-pendulum-v1"
RUN = "run-hard-1"

STABLE_GAINS = (0.0, 5.0, 1.0, 1.0)
"""u = 3 tanh(K . obs) balances InvertedPendulum-v5 for all 1000 steps (found by search)."""


def stable_weights(task: TaskSpec) -> dict[str, np.ndarray]:
    """A contract-valid MLP that computes the linear controller above.

    ReLU(k.x) - ReLU(-k.x) = k.x, so two hidden units per layer carry it through;
    every episode lasts the full 1000 steps, which makes a job take a while.
    """
    assert task.contract is not None
    w = {r.key: np.zeros(r.shape, np.float32) for r in task.contract.tensors}
    k = np.array(STABLE_GAINS, np.float32)
    w["l1.weight"][0] = k
    w["l1.weight"][1] = -k
    w["l2.weight"][0, 0] = 1.0
    w["l2.weight"][1, 1] = 1.0
    w["l3.weight"][0, 0] = 1.0
    w["l3.weight"][0, 1] = -1.0
    return w


def write_policy(directory: Path, weights: dict[str, np.ndarray]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "policy.safetensors"
    if path.exists():
        path.unlink()
    save_file(weights, str(path))
    return path


def agent(ev: RunningEvaluator, token: str | None = None) -> AleClient:
    return AleClient(
        ev.agent_address,
        ev.agent_token if token is None else token,
        task_id=TASK_ID,
        run_id=ev.evaluator.config.run_id or RUN,
        submission_dir=ev.evaluator.config.submission_volume,
    )


def harness(ev: RunningEvaluator) -> AleClient:
    return AleClient(ev.harness_address, ev.harness_token, run_id=ev.evaluator.config.run_id or RUN)


def official(address: str, token: str, job_id: str) -> EvalResult:
    with AleClient(address, token) as h:
        r = h._call(h.stub.GetEvalResult, pb.GetEvalResultRequest(job_id=job_id))
    result = EvalResult.model_validate_json(r.eval_result_json)
    # read on the harness channel; official only for the task's full protocol (no smoke run)
    assert result.read_on_harness_channel
    assert r.official is (result.smoke_run is None)
    return result


def submit_path(client: AleClient, rel: str, token: str) -> str:
    """SubmitBatchEval with a raw submission_path (the SDK would normalize it)."""
    req = pb.SubmitBatchEvalRequest(
        task_id=TASK_ID, run_id=client.run_id, submission_path=rel, client_token=token
    )
    return str(client._call(client.stub.SubmitBatchEval, req).job_id)


def wait(client: AleClient, job_id: str, timeout_s: float = 90) -> JobStatus:
    return client.wait(job_id, timeout_s=timeout_s, poll_s=0.05)


def raw_seeds(task: TaskSpec, run_id: str, secret: bytes) -> list[int]:
    return [s.value for s in derive_seeds(task.eval.base_seeds, run_id, secret)]


def forbidden_strings(task: TaskSpec, run_id: str, secret: bytes) -> list[str]:
    """What must never appear where the agent (or a log) can read it: secret and raw seeds."""
    out = [secret.hex(), secret.hex().upper(), secret.decode("latin-1")]
    for value in raw_seeds(task, run_id, secret):
        out += [str(value), f"{value:x}", f"{value:#x}"]
    return out


# ------------------------------------------------------ evaluator processes --


def serve_command(tmp: Path, state: Path, volume: Path, run_id: str | None) -> list[str]:
    """``evaluator serve`` for one run, or (``run_id`` None) a shared evaluator."""
    return [
        sys.executable,
        "-m",
        "ale_robotics",
        "evaluator",
        "serve",
        "--state-dir",
        str(state),
        "--submission-dir",
        str(volume),
        "--agent-listen",
        f"unix://{tmp}/agent/a.sock",
        "--harness-listen",
        f"unix://{tmp}/h.sock",
        "--task",
        TASK_ID,
        *([] if run_id is None else ["--run-id", run_id]),
        "--workers",
        "1",
    ]


def start_evaluator(cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
    """Start an evaluator process in its own session (so its workers can be reaped)."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    with open(log, "ab") as fh:
        return subprocess.Popen(
            cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )


def wait_ready(address: str, token_file: Path, proc: subprocess.Popen[bytes]) -> str:
    """Wait until the process answers GetSpec; returns the agent token."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the evaluator process exited during startup"
        if token_file.exists():
            token = token_file.read_text().strip()
            try:
                with AleClient(address, token, timeout_s=5) as c:
                    c.get_spec()
                return token
            except AleError:
                pass
        time.sleep(0.1)
    raise TimeoutError("the evaluator did not become ready")


def reap(pgid: int) -> None:
    """SIGKILL a process group this test started (the evaluator and its workers)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def children_of(pid: int) -> list[int]:
    """Direct children of ``pid`` (from /proc; no psutil)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid:
            out.append(int(entry))
    return out
