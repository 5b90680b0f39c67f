"""Every agent gets a token of its own run, and no token an agent can hold practises for free
(issue 26, point 1).

The attack: an embedded ``ale-robotics run`` used to hand its agent the state dir's shared
``agent.token``, which is also the agent token of an ``evaluator serve`` on that state
dir, and that token opened practice sessions outside any run, never counted. An agent
printed its token; a later agent stepped thousands of uncounted practice steps with it
against the shared evaluator while its own run's count stayed 0.

Before the fix: 200 of 200 practice steps with the leaked token, none counted. After: the
leaked token is UNAUTHENTICATED everywhere (it was minted for its run alone and died with
it), and the shared token's run-less practice is PERMISSION_DENIED unless the operator
turns it on, with a token of its own that no agent is ever given.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ale_robotics.client import AleClient
from ale_robotics.errors import (
    AleError,
    PermissionDeniedError,
    UnauthenticatedError,
)
from ale_robotics.evaluator import EvaluatorConfig, RunningEvaluator, serve
from ale_robotics.harness.run import RunOptions, run_task
from ale_robotics.tasks import Registry
from ale_robotics.tensors import to_tensor
from ale_robotics.v1 import ale_env_pb2 as pb

INTERACTIVE = "td3-inverted-double-pendulum-v1"
REPRO = "td3-walker2d-repro-v2"
"""A task whose training budget the evaluator counts in practice env steps."""
ATTEMPTED_STEPS = 200

LEAKING_AGENT = """
import os
print("TOKEN=" + os.environ["ALE_TOKEN"], flush=True)
"""


def _shared(state: Path, tmp: Path, registry: Registry, **extra: object) -> RunningEvaluator:
    """``evaluator serve`` without --run-id on ``state``, as the CLI starts it."""
    volume = tmp / "vol"
    volume.mkdir(exist_ok=True)
    return serve(
        EvaluatorConfig(state, volume, workers=1, per_run_tokens=True, **extra),  # type: ignore[arg-type]
        agent_listen=f"unix://{tmp}/shared-a/a.sock",
        harness_listen=f"unix://{tmp}/shared-h.sock",
        registry=registry,
    )


def _practice_steps(address: str, token: str, task_id: str, steps: int) -> int:
    """How many practice Steps ``token`` gets outside any run (0 when the session is refused)."""
    with AleClient(address, token, task_id=task_id) as c:
        try:
            r = c._call(
                c.stub.OpenSession,
                pb.OpenSessionRequest(task_id=task_id, kind=pb.SESSION_KIND_PRACTICE, num_envs=1),
            )
        except (PermissionDeniedError, UnauthenticatedError):
            return 0
        sid = r.session_id
        c._call(c.stub.Reset, pb.ResetRequest(session_id=sid, seeds=[0]))
        spec = c.get_spec().raw.action_spec
        action = to_tensor(np.zeros((1, *spec.shape), np.float32))
        done = 0
        for _ in range(steps):
            try:
                c._call(c.stub.Step, pb.StepRequest(session_id=sid, action=action))
            except AleError:
                break
            done += 1
        c._call(c.stub.CloseSession, pb.CloseSessionRequest(session_id=sid))
        return done


@pytest.fixture
def leaked(short_tmp: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The token an embedded run's agent printed (the run is over)."""
    script = short_tmp / "leak.py"
    script.write_text(LEAKING_AGENT)
    monkeypatch.chdir(short_tmp)
    outcome = run_task(
        RunOptions(
            task_id=INTERACTIVE,
            agent_cmd=f"{sys.executable} {script}",
            run_dir=short_tmp / "run",
            state_dir=short_tmp / "state",
            workers=1,
            budget_s=60,
        ),
        registry=registry,
    )
    log = (outcome.run_dir / "agent.log").read_text()
    token = next(line[len("TOKEN=") :] for line in log.splitlines() if line.startswith("TOKEN="))
    yield token.strip()


def test_an_embedded_runs_token_is_its_own_and_practises_nowhere_after_the_run(
    leaked: str, short_tmp: Path, registry: Registry
) -> None:
    state = short_tmp / "state"
    shared_file = state / "agent.token"
    # the embedded evaluator minted a token for the run: never the state dir's shared one
    assert not shared_file.exists() or shared_file.read_text().strip() != leaked
    assert leaked not in "".join(p.read_text(errors="replace") for p in state.glob("*.token"))
    ev = _shared(state, short_tmp, registry)
    try:
        assert ev.agent_token != leaked
        with AleClient(ev.agent_address, leaked) as c, pytest.raises(UnauthenticatedError):
            c.get_spec()
        # before: 200 of 200 uncounted practice steps of a counted-training task
        assert _practice_steps(ev.agent_address, leaked, REPRO, ATTEMPTED_STEPS) == 0
    finally:
        ev.stop(grace=0.5)


@pytest.mark.slow  # two runs of an eval set: about 25 s on two cores
def test_each_run_of_an_eval_set_gets_a_token_of_its_own(
    tmp_path: Path, short_tmp: Path, registry: Registry
) -> None:
    """``eval-set`` (two runs at once on one state dir): two tokens, neither the state dir's,
    neither accepted by a shared evaluator on that state dir once the set is over."""
    agent = tmp_path / "leak.py"
    agent.write_text(LEAKING_AGENT)
    state = short_tmp / "state"
    spec = {
        "schema_version": 1,
        "tasks": [INTERACTIVE],
        "agents": [{"label": "leak", "cmd": f"{sys.executable} {agent}"}],
        "repetitions": 2,
        "episodes": 2,
        "run_args": ["--workers", "1", "--state-dir", str(state)],
    }
    (tmp_path / "set.yaml").write_text(json.dumps(spec))
    root = tmp_path / "runs"
    proc = subprocess.run(
        [sys.executable, "-m", "ale_robotics", "eval-set", str(tmp_path / "set.yaml"),
         "--runs-root", str(root), "--jobs", "2"],
        capture_output=True, text=True, timeout=240, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    tokens = set()
    for log in root.rglob("agent.log"):
        tokens |= {ln[len("TOKEN=") :] for ln in log.read_text().splitlines() if "TOKEN=" in ln}
    assert len(tokens) == 2, tokens
    held = "".join(p.read_text() for p in state.glob("*.token"))
    assert not any(t in held for t in tokens)
    ev = _shared(state, short_tmp, registry)
    try:
        for token in tokens:
            assert _practice_steps(ev.agent_address, token, REPRO, 3) == 0
    finally:
        ev.stop(grace=0.5)


def test_the_shared_tokens_practice_outside_runs_is_off_by_default(
    short_tmp: Path, registry: Registry
) -> None:
    ev = _shared(short_tmp / "state", short_tmp, registry)
    try:
        assert ev.practice_token is None
        with AleClient(ev.agent_address, ev.agent_token, task_id=REPRO) as c:
            assert c.get_spec().task.id == REPRO  # it still reads specs
            with pytest.raises(PermissionDeniedError, match="--allow-practice-without-run"):
                c._call(
                    c.stub.OpenSession,
                    pb.OpenSessionRequest(task_id=REPRO, kind=pb.SESSION_KIND_PRACTICE),
                )
        assert _practice_steps(ev.agent_address, ev.agent_token, REPRO, 5) == 0
        assert not (short_tmp / "state" / "practice.token").exists()
    finally:
        ev.stop(grace=0.5)


def test_the_operators_practice_token_is_a_secret_no_run_is_given(
    short_tmp: Path, registry: Registry
) -> None:
    ev = _shared(short_tmp / "state", short_tmp, registry, practice_without_run=True)
    try:
        practice = ev.practice_token
        assert practice is not None
        assert (short_tmp / "state" / "practice.token").read_text().strip() == practice
        assert practice not in (ev.agent_token, ev.harness_token)
        # the shared agent.token still practises nowhere; the operator's token does
        assert _practice_steps(ev.agent_address, ev.agent_token, REPRO, 3) == 0
        assert _practice_steps(ev.agent_address, practice, REPRO, 3) == 3
        with AleClient(ev.harness_address, ev.harness_token) as h:
            grant = h._call(h.stub.OpenRun, pb.OpenRunRequest(run_id="run-pt-1", task_id=REPRO))
        assert grant.agent_token != practice  # what a run's agent gets is another secret
        with AleClient(ev.agent_address, practice, task_id=REPRO) as c:
            for request in (
                pb.OpenSessionRequest(task_id=REPRO, kind=pb.SESSION_KIND_EVAL),
                pb.OpenSessionRequest(
                    task_id=REPRO, kind=pb.SESSION_KIND_PRACTICE, run_id="run-pt-1"
                ),
            ):
                with pytest.raises(PermissionDeniedError):
                    c._call(c.stub.OpenSession, request)
            with pytest.raises(PermissionDeniedError):
                c._call(
                    c.stub.SubmitBatchEval,
                    pb.SubmitBatchEvalRequest(task_id=REPRO, client_token="x"),
                )
    finally:
        ev.stop(grace=0.5)


def test_a_bound_evaluators_token_is_minted_for_the_run_and_dies_with_close_run(
    short_tmp: Path, registry: Registry
) -> None:
    """``evaluator serve --run-id`` (and the embedded evaluator): a token of the run alone,
    never the state dir's agent.token, refused from the moment the run is closed."""
    state = short_tmp / "state"
    ev = serve(
        EvaluatorConfig(state, short_tmp / "vol", task_id=INTERACTIVE, run_id="run-b-1"),
        agent_listen=f"unix://{short_tmp}/b/a.sock",
        harness_listen=f"unix://{short_tmp}/b-h.sock",
        registry=registry,
    )
    try:
        assert not (state / "agent.token").exists()
        assert ev.agent_token not in "".join(p.read_text() for p in state.glob("*.token"))
        with AleClient(ev.agent_address, ev.agent_token, task_id=INTERACTIVE) as c:
            c.get_spec()
        with AleClient(ev.harness_address, ev.harness_token) as h:
            h._call(h.stub.CloseRun, pb.CloseRunRequest(run_id="run-b-1"))
        with (
            AleClient(ev.agent_address, ev.agent_token, task_id=INTERACTIVE) as c,
            pytest.raises(UnauthenticatedError),
        ):
            c.get_spec()
    finally:
        ev.stop(grace=0.5)
