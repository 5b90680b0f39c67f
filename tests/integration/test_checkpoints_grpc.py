"""SubmitCheckpoint over real gRPC on real Unix sockets, with real MuJoCo episodes.

td3-walker2d-repro-v1 (training.checkpoints: 3 hidden-seed episodes per checkpoint)
trains through practice sessions in the evaluator; each checkpoint the agent
commits is snapshotted, stamped with the evaluator's own practice-step count and
evaluated on hidden seeds, and the signed ``checkpoint`` events become the final
result's learning curve. Random (quickly falling) policies keep the episodes short.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest
from helpers import random_weights
from safetensors.numpy import save_file

from ale_robotics.client import AleClient, RemoteVectorEnv
from ale_robotics.client.sdk import CheckpointAck
from ale_robotics.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
)
from ale_robotics.evaluator import EvaluatorConfig, RunningEvaluator, serve
from ale_robotics.evaluator.runs.checkpoints import checkpoint_task, run_checkpoint
from ale_robotics.model.result import EvalResult
from ale_robotics.seeds import derive_seeds
from ale_robotics.tasks import Registry, TaskSpec, default_registry
from ale_robotics.trajectory import SignedEvaluatorEvent
from ale_robotics.v1 import ale_env_pb2 as pb

REPRO = "td3-walker2d-repro-v1"
RUN = "run-ckpt-1"


@contextlib.contextmanager
def _walker(registry: Registry) -> Iterator[tuple[RunningEvaluator, Path]]:
    """A real evaluator bound to one run of the walker task, with a submission volume."""
    with tempfile.TemporaryDirectory(prefix="ale-ck-") as d:
        volume = Path(d) / "submission"
        volume.mkdir()
        running = serve(
            EvaluatorConfig(Path(d) / "state", volume, task_id=REPRO, run_id=RUN, workers=1),
            agent_listen=f"unix://{d}/a.sock",
            harness_listen=f"unix://{d}/h.sock",
            registry=registry,
        )
        try:
            yield running, volume
        finally:
            running.stop(grace=0.5)


def _agent(ev: RunningEvaluator, volume: Path) -> AleClient:
    return AleClient(
        ev.agent_address, ev.agent_token, task_id=REPRO, run_id=RUN, submission_dir=volume
    )


def _write_policy(task: TaskSpec, folder: Path, seed: int) -> str:
    """A random policy as the contract's policy.safetensors; returns its sha256."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "policy.safetensors"
    path.unlink(missing_ok=True)
    save_file(random_weights(task, seed=seed, scale=0.3), str(path))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _practice(ev: RunningEvaluator, steps: int, num_envs: int = 2) -> None:
    """Practice-session Steps in the evaluator: each charges ``num_envs`` agent steps."""
    env = RemoteVectorEnv(
        AleClient(ev.agent_address, ev.agent_token, task_id=REPRO, run_id=RUN),
        num_envs=num_envs,
        own_client=True,
    )
    try:
        env.reset(seed=5)
        for _ in range(steps):
            env.step(np.zeros((num_envs, 6), np.float32))
    finally:
        env.close()


def _official(ev: RunningEvaluator, job_id: str, run_id: str = RUN) -> EvalResult:
    with AleClient(ev.harness_address, ev.harness_token, run_id=run_id) as h:
        r = h._call(h.stub.GetEvalResult, pb.GetEvalResultRequest(job_id=job_id))
    return EvalResult.model_validate_json(r.eval_result_json)


def _small_limit_registry(max_checkpoints: int) -> Registry:
    data = json.loads(default_registry().entry(REPRO).raw)
    data["training"]["checkpoints"]["max_checkpoints"] = max_checkpoints
    return Registry({"walker.json": json.dumps(data).encode()})


@pytest.fixture(scope="module")
def walker() -> Iterator[tuple[RunningEvaluator, Path]]:
    with _walker(default_registry()) as pair:
        yield pair


def test_checkpoints_are_measured_by_the_evaluator_and_become_the_learning_curve(
    walker: tuple[RunningEvaluator, Path],
) -> None:
    ev, volume = walker
    task = default_registry().get(REPRO)
    client = _agent(ev, volume)
    shas = [_write_policy(task, volume, seed=1)]
    acks = [client.submit_checkpoint()]  # before any practice: 0 steps
    _practice(ev, 30)  # 60 agent steps
    shas.append(_write_policy(task, volume, seed=2))
    acks.append(client.submit_checkpoint(client_token="second"))
    _practice(ev, 25)  # 50 more
    final = volume / "final"
    shas.append(_write_policy(task, final, seed=3))
    (final / "meta.json").write_text(json.dumps({"algorithm": "TD3", "training_steps": 110}))
    (final / "curve.csv").write_text("step,eval_return\n0,1.0\n110,2.0\n")
    acks.append(client.submit_checkpoint(final))

    assert [a.index for a in acks] == [0, 1, 2]
    assert [a.practice_steps for a in acks] == [0, 60, 110]  # the evaluator's own count
    assert [a.checkpoints_left for a in acks] == [49, 48, 47]
    assert not any(a.deduplicated for a in acks)
    assert len({a.checkpoint_id for a in acks}) == 3
    assert ev.evaluator.training.used(RUN) == 110
    # the answer is no evaluation oracle: it carries no return of any kind
    assert set(pb.SubmitCheckpointResponse.DESCRIPTOR.fields_by_name) == {
        "checkpoint_id",
        "index",
        "practice_steps",
        "deduplicated",
        "checkpoints_left",
    }

    job = client.submit(final)
    assert client.wait(job, timeout_s=180).state == "SUCCEEDED"
    result = _official(ev, job)

    curve = result.learning_curve
    assert [p.index for p in curve] == [0, 1, 2]
    assert [p.checkpoint_id for p in curve] == [a.checkpoint_id for a in acks]
    assert [p.practice_steps for p in curve] == [0, 60, 110]
    assert [p.policy_sha256 for p in curve] == shas
    assert curve[-1].policy_sha256 == result.submission_files["policy.safetensors"]
    assert all(p.episodes == 3 for p in curve)
    assert result.training is not None
    assert result.training.agent_steps == 110 and result.training.agent_steps_budget == 1_000_000

    # the signed events: one per checkpoint, only the policy snapshotted, seeds committed
    events = [e for e in result.events if e["kind"] == "checkpoint"]
    assert [e["payload"]["index"] for e in events] == [0, 1, 2]
    assert all(set(e["payload"]["files"]) == {"policy.safetensors"} for e in events)
    secret = ev.evaluator._secret
    seeds = derive_seeds(task.training.checkpoints.base_seeds, RUN, secret)  # type: ignore[union-attr]
    commitment = result.events[1]
    assert commitment["kind"] == "seed_commitment"
    assert commitment["payload"]["checkpoint_seed_commitments"] == [s.commitment for s in seeds]
    eval_seeds = derive_seeds(task.eval.base_seeds, RUN, secret)
    assert not {s.commitment for s in seeds} & {s.commitment for s in eval_seeds}
    text = json.dumps(result.events)
    assert not any(str(s.value) in text for s in seeds)  # commitments only, never a seed
    public = ev.evaluator.signer.public_key_hex
    for e in events:
        SignedEvaluatorEvent.model_validate(e).verify(public)
        assert [ep["seed_commitment"] for ep in e["payload"]["episodes"]] == [
            s.commitment for s in seeds
        ]
    # the signed result holds the practice count too (the audit checks result.json's)
    signed_result = [e for e in result.events if e["kind"] == "result"][-1]
    assert signed_result["payload"]["training"] == result.training.model_dump(mode="json")

    # a real measurement on those hidden seeds: recomputed here, the same numbers
    ctask = checkpoint_task(task)
    for point, seed in zip(curve, (1, 2, 3), strict=True):
        weights = random_weights(task, seed=seed, scale=0.3)
        outcomes = run_checkpoint(ctask, weights, seeds)
        assert point.mean_return == pytest.approx(np.mean([o.ret for o in outcomes]), abs=0)
    assert len({p.mean_return for p in curve}) == 3

    # the snapshots stay for the audit, also past the runner's reclaim
    snapshots = ev.evaluator.state.snapshots
    ev.evaluator.runner.reclaim_snapshots()
    for point in curve:
        kept = snapshots / f"ckpt-{point.checkpoint_id}"
        assert sorted(p.name for p in kept.iterdir()) == ["policy.safetensors"]
        assert hashlib.sha256((kept / "policy.safetensors").read_bytes()).hexdigest() == (
            point.policy_sha256
        )
    assert not (snapshots / job).exists()  # the job's own snapshot is gone, as always
    client.close()


def _nan_policy(task: TaskSpec, folder: Path) -> None:
    """Finite weights whose actions are NaN (inf - inf in the last layer)."""
    folder.mkdir(parents=True, exist_ok=True)
    weights = random_weights(task)
    weights["l1.weight"][:] = 0.0
    weights["l1.bias"][:] = 3e38
    weights["l2.weight"][:] = 3e38
    weights["l3.weight"][:] = np.where(np.arange(300) % 2 == 0, 1.0, -1.0)
    save_file(weights, str(folder / "policy.safetensors"))


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_dedup_limit_and_bad_checkpoints_over_grpc() -> None:
    """A checkpoint that breaks a contract rule, a path with nothing in it and a policy
    whose actions are NaN are answered like a good one, each using up one checkpoint; the
    signed events say which failed and why."""
    task = default_registry().get(REPRO)
    with _walker(_small_limit_registry(5)) as (ev, volume):
        client = _agent(ev, volume)
        bad = volume / "bad"
        bad.mkdir()
        save_file({"l1.weight": np.zeros((3, 3), np.float32)}, str(bad / "policy.safetensors"))
        _nan_policy(task, volume / "nan")
        with pytest.raises(InvalidArgumentError, match="does not exist"):
            client.submit_checkpoint(volume / "nowhere")  # refused by the SDK, before any call
        acks = [
            client.submit_checkpoint(bad, client_token="bad"),
            client.submit_checkpoint(volume / "nan", client_token="nan"),
        ]
        raw = pb.SubmitCheckpointRequest(task_id=REPRO, run_id=RUN, submission_path="nowhere")
        raw.client_token = "nowhere"
        acks.append(CheckpointAck.from_proto(client._call(client.stub.SubmitCheckpoint, raw)))
        raw.client_token = ""
        with pytest.raises(InvalidArgumentError, match="client_token"):
            client._call(client.stub.SubmitCheckpoint, raw)  # a malformed request still is

        _write_policy(task, volume, seed=1)
        acks.append(client.submit_checkpoint(client_token="a"))
        again = client.submit_checkpoint(client_token="a")
        assert again == CheckpointAck(acks[3].checkpoint_id, 3, 0, True, 1)
        _practice(ev, 3)
        acks.append(client.submit_checkpoint(client_token="b"))
        assert [(a.index, a.practice_steps, a.deduplicated, a.checkpoints_left) for a in acks] == [
            (0, 0, False, 4),
            (1, 0, False, 3),
            (2, 0, False, 2),
            (3, 0, False, 1),
            (4, 6, False, 0),
        ]
        with pytest.raises(ResourceExhaustedError, match="max_checkpoints"):
            client.submit_checkpoint(client_token="c")
        # a retry of a committed checkpoint still gets it, past the limit
        assert client.submit_checkpoint(client_token="nan").deduplicated

        # the harness channel does not commit checkpoints; nor is another task served
        with AleClient(ev.harness_address, ev.harness_token, task_id=REPRO, run_id=RUN) as h:
            request = pb.SubmitCheckpointRequest(task_id=REPRO, run_id=RUN, client_token="h")
            with pytest.raises(PermissionDeniedError, match="agent-channel"):
                h._call(h.stub.SubmitCheckpoint, request)
        other = pb.SubmitCheckpointRequest(task_id="td3-inverted-pendulum-v1", client_token="o")
        with pytest.raises(NotFoundError, match="serves task"):
            client._call(client.stub.SubmitCheckpoint, other)

        ev.evaluator.checkpoints.settle(RUN, task)
        events = ev.evaluator.ledger.events(RUN)
        received = [e["payload"] for e in events if e["kind"] == "checkpoint_received"]
        assert [r["client_token"] for r in received] == ["bad", "nan", "nowhere", "a", "b"]
        outcomes = [e for e in events if e["kind"] in ("checkpoint", "checkpoint_failed")]
        assert [(e["kind"], e["payload"]["index"]) for e in outcomes] == [
            ("checkpoint_failed", 0),
            ("checkpoint_failed", 1),
            ("checkpoint_failed", 2),
            ("checkpoint", 3),
            ("checkpoint", 4),
        ]
        failed = [e["payload"] for e in outcomes[:3]]
        assert [(f["source"], f["rule"]) for f in failed] == [
            ("submission", "contract"),
            ("submission", "non_finite_action"),
            ("submission", "contract"),
        ]
        assert "policy.safetensors" in failed[0]["reason"] and "(rule: " in failed[0]["reason"]
        assert "produced a non-finite action (nan) in episode" in failed[1]["reason"]
        assert "does not exist (rule: path)" in failed[2]["reason"]
        assert failed[2]["files"] == {}  # nothing to snapshot
        public = ev.evaluator.signer.public_key_hex
        for e in events:
            if e["kind"].startswith("checkpoint"):
                SignedEvaluatorEvent.model_validate(e).verify(public)
        # every checkpoint with a file keeps its snapshot (the audit re-runs failures too)
        ckpts = sorted(p.name for p in ev.evaluator.state.snapshots.glob("ckpt-*"))
        assert ckpts == sorted(f"ckpt-{r['checkpoint_id']}" for r in received if r["files"])
        assert len(ckpts) == 4
        assert not list(ev.evaluator.state.snapshots.glob("staging-*"))
        client.close()


def test_a_task_without_checkpoints_is_failed_precondition(
    evaluator: RunningEvaluator, task: TaskSpec
) -> None:
    volume = evaluator.evaluator.config.submission_volume
    assert volume is not None
    save_file(random_weights(task), str(volume / "policy.safetensors"))
    with AleClient(
        evaluator.agent_address,
        evaluator.agent_token,
        task_id=task.id,
        run_id="run-test-1",
        submission_dir=volume,
    ) as c:
        with pytest.raises(FailedPreconditionError, match="offers no checkpoints"):
            c.submit_checkpoint()
        try:
            c._call(c.stub.SubmitCheckpoint, pb.SubmitCheckpointRequest(client_token="x"))
        except FailedPreconditionError as exc:
            assert "training.checkpoints" in str(exc)
        else:
            pytest.fail("SubmitCheckpoint on a task without checkpoints succeeded")
        job = c.submit()
        assert c.wait(job, timeout_s=120).state == "SUCCEEDED"
    result = _official(evaluator, job, run_id="run-test-1")
    # its agent simulates on its own side: the evaluator saw no training, and says none
    assert result.learning_curve == [] and result.training is None
    signed = [e for e in result.events if e["kind"] == "result"][-1]["payload"]
    assert "training" not in signed
    assert not [e for e in result.events if e["kind"] == "checkpoint"]
    assert "checkpoint_seed_commitments" not in result.events[1]["payload"]
    assert grpc.StatusCode.FAILED_PRECONDITION is FailedPreconditionError.code


def test_on_a_shared_evaluator_each_run_commits_its_own_checkpoints(tmp_path: Path) -> None:
    """OpenRun's token acts for its run only: checkpoints come from the run's own
    directory and count per run; another task or another run's checkpoint is refused."""
    task = default_registry().get(REPRO)
    with tempfile.TemporaryDirectory(prefix="ale-cs-") as d:
        volume = Path(d) / "vol"
        volume.mkdir()
        ev = serve(
            EvaluatorConfig(Path(d) / "state", volume, workers=1, per_run_tokens=True),
            agent_listen=f"unix://{d}/a.sock",
            harness_listen=f"unix://{d}/h.sock",
            registry=default_registry(),
        )
        try:
            clients = []
            with AleClient(ev.harness_address, ev.harness_token) as h:
                for run_id in ("run-cs-a", "run-cs-b"):
                    r = h._call(h.stub.OpenRun, pb.OpenRunRequest(run_id=run_id, task_id=REPRO))
                    clients.append(
                        AleClient(ev.agent_address, r.agent_token, submission_dir=r.submission_dir)
                    )
                    _write_policy(task, Path(r.submission_dir), seed=len(clients))
            a, b = clients
            assert a.submit_checkpoint(client_token="same").index == 0
            assert b.submit_checkpoint(client_token="same").index == 0  # tokens are per run
            assert b.submit_checkpoint(client_token="same").deduplicated
            with pytest.raises(PermissionDeniedError, match="acts for run 'run-cs-b' only"):
                b._call(
                    b.stub.SubmitCheckpoint,
                    pb.SubmitCheckpointRequest(run_id="run-cs-a", client_token="x"),
                )
            with pytest.raises(PermissionDeniedError, match="cannot act on another task"):
                a._call(
                    a.stub.SubmitCheckpoint,
                    pb.SubmitCheckpointRequest(
                        task_id="td3-inverted-pendulum-v1", client_token="y"
                    ),
                )
            # the state dir's shared agent token acts for no run opened with OpenRun
            shared = AleClient(ev.agent_address, ev.agent_token, task_id=REPRO)
            with shared, pytest.raises(PermissionDeniedError):
                shared._call(
                    shared.stub.SubmitCheckpoint,
                    pb.SubmitCheckpointRequest(task_id=REPRO, run_id="run-cs-a", client_token="z"),
                )
            for run_id in ("run-cs-a", "run-cs-b"):
                ev.evaluator.checkpoints.settle(run_id, task)
                events = ev.evaluator.ledger.events(run_id)
                for kind in ("checkpoint_received", "checkpoint"):
                    assert [e["payload"]["index"] for e in events if e["kind"] == kind] == [0]
            for c in clients:
                c.close()
        finally:
            ev.stop(grace=0.5)
