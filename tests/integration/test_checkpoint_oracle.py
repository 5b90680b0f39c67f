"""A checkpoint is no oracle on the hidden seeds (issue 26, items 3 and 5).

Over real gRPC on real Unix sockets with real MuJoCo episodes: the pendulum task
with a ``training.checkpoints`` block (3 hidden-seed episodes per checkpoint)
takes four checkpoints from the agent: a policy whose actions are NaN, the
shipped TD3 policy (1,000 steps an episode), all-zero weights (the pole falls
within dozens of steps) and a file that breaks the contract. The agent gets the
same answer for each (a receipt, one checkpoint of its quota used, no error),
and nothing is evaluated before it answers. The harness's official result then
has the two measured ones as the learning curve and the two failures, with their
reasons, apart; each is a signed event.

Before: the NaN policy was answered INVALID_ARGUMENT "checkpoint rejected, nothing
was recorded" (no quota used, no event: one free bit per query) and the answer
came only after the rollouts (good policy 160-430 ms, zero policy 20-40 ms, in
order 6 of 6 rounds: ``benchmarks/checkpoint_leak.py``).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from ale_robotics.client import AleClient
from ale_robotics.evaluator import EvaluatorConfig, RunningEvaluator, serve
from ale_robotics.harness.evidence import evaluator_evidence
from ale_robotics.model.result import EvalResult
from ale_robotics.tasks import Registry, default_registry
from ale_robotics.trajectory import SignedEvaluatorEvent
from ale_robotics.v1 import ale_env_pb2 as pb

TASK = "td3-inverted-pendulum-v2"
RUN = "run-oracle-1"
GOOD = (
    Path(__file__).resolve().parents[2]
    / "examples"
    / "agents"
    / "checkpoints"
    / "td3-inverted-pendulum-v1"
    / "policy.safetensors"
)


def _registry() -> Registry:
    """The pendulum task with checkpoints, as the walker repro task has them."""
    data = json.loads(default_registry().entry(TASK).raw)
    data["session"] = {"practice_allowed": True, "training_step_unit": "agent_step"}
    data["training"] = {
        "simulator": "evaluator",
        "checkpoints": {"episodes": 3, "base_seeds": [7301, 7302, 7303], "max_checkpoints": 10},
    }
    return Registry({f"{TASK}.json": json.dumps(data).encode()})


def _write(folder: Path, weights: dict[str, np.ndarray]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(folder / "policy.safetensors"))


@pytest.fixture
def pendulum() -> Iterator[tuple[RunningEvaluator, Path]]:
    with tempfile.TemporaryDirectory(prefix="ale-or-") as d:
        volume = Path(d) / "submission"
        good = load_file(str(GOOD))
        zero = {k: np.zeros_like(v) for k, v in good.items()}
        nan = dict(zero)  # finite weights, NaN actions: inf - inf in the last layer
        nan["l1.bias"] = np.full_like(good["l1.bias"], 3e38)
        nan["l2.weight"] = np.full_like(good["l2.weight"], 3e38)
        nan["l3.weight"] = np.where(np.arange(300) % 2 == 0, 1.0, -1.0).astype(np.float32)[None]
        _write(volume / "good", good)
        _write(volume / "zero", zero)
        _write(volume / "nan", nan)
        _write(volume / "bad", {"l1.weight": np.zeros((3, 3), np.float32)})
        running = serve(
            EvaluatorConfig(Path(d) / "state", volume, task_id=TASK, run_id=RUN, workers=1),
            agent_listen=f"unix://{d}/a.sock",
            harness_listen=f"unix://{d}/h.sock",
            registry=_registry(),
        )
        try:
            yield running, volume
        finally:
            running.stop(grace=0.5)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_a_failing_checkpoint_is_answered_counted_and_signed_like_a_good_one(
    pendulum: tuple[RunningEvaluator, Path],
) -> None:
    ev, volume = pendulum
    agent = AleClient(
        ev.agent_address, ev.agent_token, task_id=TASK, run_id=RUN, submission_dir=volume
    )
    order = ("nan", "good", "zero", "bad")
    answers = []
    for i, name in enumerate(order):
        ack = agent.submit_checkpoint(volume / name, client_token=name)
        answers.append(ack)
        # answered before any rollout: no outcome of this checkpoint is signed yet
        kinds = [e["kind"] for e in ev.evaluator.ledger.events(RUN)]
        assert "checkpoint" not in kinds and "checkpoint_failed" not in kinds, (name, kinds)
        assert (ack.index, ack.checkpoints_left, ack.deduplicated) == (i, 9 - i, False)
    # the same answer whatever the policy does on the hidden episodes
    assert {(a.practice_steps, a.deduplicated) for a in answers} == {(0, False)}

    job = agent.submit(volume / "good")
    assert agent.wait(job, timeout_s=180).state == "SUCCEEDED"
    agent.close()
    with AleClient(ev.harness_address, ev.harness_token, run_id=RUN) as h:
        r = h._call(h.stub.GetEvalResult, pb.GetEvalResultRequest(job_id=job))
    result = EvalResult.model_validate_json(r.eval_result_json)

    # the trusted side sees every outcome: measured (with its return) or failed (why)
    assert [(p.index, p.checkpoint_id) for p in result.learning_curve] == [
        (1, answers[1].checkpoint_id),
        (2, answers[2].checkpoint_id),
    ]
    good, zero = result.learning_curve
    assert good.mean_return == 1000.0 and zero.mean_return < 100.0
    assert [(f.index, f.source, f.rule) for f in result.failed_checkpoints] == [
        (0, "submission", "non_finite_action"),
        (3, "submission", "contract"),
    ]
    assert "non-finite action (nan)" in result.failed_checkpoints[0].reason
    assert "(rule: " in result.failed_checkpoints[1].reason
    # a failure is no point of the gate's curve: it can never raise a score
    assert len(evaluator_evidence(result).curve) == 2

    # one signed event per checkpoint taken, one per outcome, all the evaluator's
    events = [e for e in result.events if str(e["kind"]).startswith("checkpoint")]
    assert [(e["kind"], e["payload"]["index"]) for e in events] == [
        ("checkpoint_received", 0),
        ("checkpoint_received", 1),
        ("checkpoint_received", 2),
        ("checkpoint_received", 3),
        ("checkpoint_failed", 0),
        ("checkpoint", 1),
        ("checkpoint", 2),
        ("checkpoint_failed", 3),
    ]
    public = ev.evaluator.signer.public_key_hex
    for e in events:
        SignedEvaluatorEvent.model_validate(e).verify(public)
