"""Evaluation videos from a real evaluator over real gRPC, rendered by real MuJoCo off-screen.

A batch job's policy rolled out again and an interactive run's taped eval-session actions
replayed, each fetched on the harness channel (GetEvalVideos), decoded back and compared
with the official result; the agent's token refused; a job that cannot have videos
answered with an index that says why. Bad (quickly falling) policies and Reacher's
50-step episodes keep each render to a second or two.
"""

from __future__ import annotations

import os
from pathlib import Path

import grpc
import numpy as np
import pytest
from helpers import child_pids, decoded, random_weights, run_bound_evaluator
from safetensors.numpy import save_file

from ale_robotics.client import AleClient, RemoteVectorEnv
from ale_robotics.errors import PermissionDeniedError, from_rpc_error
from ale_robotics.evaluator import EvaluatorConfig, RunningEvaluator, serve
from ale_robotics.evaluator.videos import service
from ale_robotics.harness.videos import fetch_videos
from ale_robotics.model.result import EvalResult
from ale_robotics.model.video import VIDEO_INDEX, VideoIndex
from ale_robotics.seeds import derive_seeds
from ale_robotics.tasks import Registry, TaskSpec
from ale_robotics.v1 import ale_env_pb2 as pb

RUN = "run-test-1"


def _result(ev: RunningEvaluator, run: str, job: str = "") -> EvalResult:
    with AleClient(ev.harness_address, ev.harness_token, run_id=run) as h:
        r = h._call(h.stub.GetEvalResult, pb.GetEvalResultRequest(job_id=job, run_id=run))
    return EvalResult.model_validate_json(r.eval_result_json)


def _check_videos(index: VideoIndex, folder: Path, result: EvalResult) -> None:
    """Each video is its episode of the official result: frame count (the reset frame and
    one per step), nonblank frames, the seed commitment, the return."""
    official = {e.index: e for e in result.episodes}
    for video in index.videos:
        episode = official[video.index]
        frames = decoded(folder / video.file)
        assert len(frames) == video.frames == episode.length + 1
        assert all(f.std() > 1.0 for f in frames), "a blank frame"
        assert (video.width, video.height) == (320, 240) == frames[0].shape[1::-1]
        assert video.seed_commitment == episode.seed_commitment
        assert video.official_return == episode.episode_return
        assert video.matches_official is True, video.note
        assert video.episode_return == pytest.approx(episode.episode_return, rel=1e-9)


def test_batch_videos_replay_the_policy_on_the_harness_channel_only(
    evaluator: RunningEvaluator, task: TaskSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a host of four cores: two renderer processes, one episode each
    monkeypatch.setattr(service.os, "cpu_count", lambda: 4)
    assert service.render_processes(2) == 2 and service.render_processes(9) == 2
    volume = evaluator.evaluator.config.submission_volume
    assert volume is not None
    save_file(random_weights(task, seed=3, scale=0.3), str(volume / "policy.safetensors"))
    with AleClient(
        evaluator.agent_address, evaluator.agent_token, task_id=task.id, run_id=RUN
    ) as agent:
        job = agent.submit()
        agent.wait(job, timeout_s=120)
        # the agent's token: refused before anything is looked up or rendered
        stream = agent.stub.GetEvalVideos(
            pb.GetEvalVideosRequest(run_id=RUN, episodes=2), metadata=agent.metadata
        )
        with pytest.raises(grpc.RpcError) as refused:
            next(stream)
        assert isinstance(from_rpc_error(refused.value), PermissionDeniedError)
    result = _result(evaluator, RUN, job)
    assert result.state == "SUCCEEDED"
    with AleClient(evaluator.harness_address, evaluator.harness_token, run_id=RUN) as h:
        index = fetch_videos(h, tmp_path, job, 2)
    assert index is not None and index.error is None, index
    assert (index.source, index.requested, index.job_id) == ("policy", 2, job)
    assert [v.index for v in index.videos] == [0, 1]
    assert index.render_s > 0 and "imageio-ffmpeg" in index.encoder
    _check_videos(index, tmp_path / "videos", result)
    text = (tmp_path / "videos" / VIDEO_INDEX).read_text()
    secret = evaluator.evaluator._secret
    for seed in derive_seeds(task.eval.base_seeds, RUN, secret)[:2]:
        assert str(seed.value) not in text  # commitments only, never a hidden seed
    # rendering changed nothing of the official result, and a second fetch is the same
    assert _result(evaluator, RUN, job).model_dump(exclude={"events"}) == result.model_dump(
        exclude={"events"}
    )
    with AleClient(evaluator.harness_address, evaluator.harness_token, run_id=RUN) as h:
        again = fetch_videos(h, tmp_path / "again", job, 2)
    assert again == index


def test_a_job_without_an_official_result_has_no_videos_and_says_why(
    evaluator: RunningEvaluator, task: TaskSpec, tmp_path: Path
) -> None:
    volume = evaluator.evaluator.config.submission_volume
    assert volume is not None
    (volume / "policy.safetensors").write_bytes(b"not a safetensors file")
    with AleClient(
        evaluator.agent_address, evaluator.agent_token, task_id=task.id, run_id=RUN
    ) as agent:
        job = agent.submit()
        assert agent.wait(job, timeout_s=60).state == "REJECTED"
    with AleClient(evaluator.harness_address, evaluator.harness_token, run_id=RUN) as h:
        index = fetch_videos(h, tmp_path, job, 3)
    assert index is not None and index.videos == []
    assert index.error is not None and "REJECTED" in index.error
    assert sorted(p.name for p in (tmp_path / "videos").iterdir()) == [VIDEO_INDEX]


def test_interactive_videos_replay_the_agents_actions_to_the_recorded_return(
    registry: Registry, tmp_path: Path
) -> None:
    """Random actions on three envs, a Reset that abandons running episodes and a close
    that leaves the rest to the evaluator's null action: every taped episode replays to
    exactly its recorded return and length."""
    run = "run-videos-int"
    with run_bound_evaluator(registry, "td3-reacher-v1", run) as ev:
        client = AleClient(ev.agent_address, ev.agent_token, task_id="td3-reacher-v1", run_id=run)
        env = RemoteVectorEnv(client, num_envs=3, kind="eval", own_client=True)
        rng = np.random.default_rng(0)
        try:
            env.reset()
            for _ in range(30):
                env.step(rng.uniform(-1, 1, (3, 2)).astype(np.float32))
            env.reset()  # abandons the three running episodes (the null action plays them out)
            for _ in range(60):
                env.step(rng.uniform(-1, 1, (3, 2)).astype(np.float32))
        finally:
            env.close()  # the rest of the budget: the evaluator's null action
        result = _result(ev, run)
        assert result.state == "SUCCEEDED" and any(e.abandoned for e in result.episodes[:3])
        with AleClient(ev.harness_address, ev.harness_token, run_id=run) as h:
            index = fetch_videos(h, tmp_path, "", 3)
        assert index is not None and index.error is None, index
        assert index.source == "session" and [v.index for v in index.videos] == [0, 1, 2]
        _check_videos(index, tmp_path / "videos", result)
        state = ev.evaluator.videos.store.root
    assert not (state / run).exists()  # the embedded evaluator forgets them when it stops


def test_a_task_whose_env_renders_nothing_has_no_videos(registry: Registry, tmp_path: Path) -> None:
    run = "run-videos-dmc"
    task_id = "tdmpc2-cheetah-run-v2"
    with run_bound_evaluator(registry, task_id, run) as ev:
        env = RemoteVectorEnv(
            AleClient(ev.agent_address, ev.agent_token, task_id=task_id, run_id=run),
            num_envs=1,
            kind="eval",
            own_client=True,
        )
        env.close()  # every episode the evaluator's null action
        with AleClient(ev.harness_address, ev.harness_token, run_id=run) as h:
            index = fetch_videos(h, tmp_path, "", 3)
    assert index is not None and index.videos == []
    assert index.error is not None and "renders no frames" in index.error


def test_trajectory_set_videos_replay_the_submitted_actions(
    registry: Registry, tmp_path: Path, short_tmp: Path
) -> None:
    task_id, run = "fetch-pickplace-trajset-v1", "run-videos-replay"
    task = registry.get(task_id)
    volume = short_tmp / "volume"
    volume.mkdir()
    n, t = len(task.eval.base_seeds), task.env.max_episode_steps
    rng = np.random.default_rng(0)
    with open(volume / "trajectories.npz", "wb") as fh:
        np.savez(
            fh,
            seeds=np.asarray(task.eval.base_seeds, np.int64),
            actions=rng.uniform(-1, 1, (n, t, 4)).astype(np.float32),
        )
    ev = serve(
        EvaluatorConfig(short_tmp / "state", volume, task_id=task_id, run_id=run, workers=1),
        agent_listen=f"unix://{short_tmp}/a.sock",
        harness_listen=f"unix://{short_tmp}/h.sock",
        registry=registry,
    )
    try:
        with AleClient(ev.agent_address, ev.agent_token, task_id=task_id, run_id=run) as agent:
            job = agent.submit()
            assert agent.wait(job, timeout_s=120).state == "SUCCEEDED"
        result = _result(ev, run, job)
        with AleClient(ev.harness_address, ev.harness_token, run_id=run) as h:
            index = fetch_videos(h, tmp_path, job, 2)
    finally:
        ev.stop(grace=0.5)
    assert index is not None and index.error is None, index
    assert index.source == "replay"
    # the first two instances of the hidden subset, in index order
    assert [v.index for v in index.videos] == [e.index for e in result.episodes][:2]
    _check_videos(index, tmp_path / "videos", result)


def _submit_random(ev: RunningEvaluator, task: TaskSpec, seed: int) -> str:
    volume = ev.evaluator.config.submission_volume
    assert volume is not None
    save_file(random_weights(task, seed=seed, scale=0.3), str(volume / "policy.safetensors"))
    with AleClient(ev.agent_address, ev.agent_token, task_id=task.id, run_id=RUN) as agent:
        job = agent.submit(client_token=f"videos-{seed}")
        assert agent.wait(job, timeout_s=120).state == "SUCCEEDED"
    return job


def test_a_failed_render_is_said_in_the_index_and_the_result_stands(
    evaluator: RunningEvaluator, task: TaskSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = _submit_random(evaluator, task, seed=4)
    before = _result(evaluator, RUN, job)
    monkeypatch.setenv("MUJOCO_GL", "disable")  # a host without off-screen OpenGL
    with AleClient(evaluator.harness_address, evaluator.harness_token, run_id=RUN) as h:
        index = fetch_videos(h, tmp_path / "a", job, 2)
    assert index is not None and index.videos == []
    assert index.error is not None and "MUJOCO_GL" in index.error
    monkeypatch.delenv("MUJOCO_GL")
    # a renderer past its time limit is killed, and says so
    videos = evaluator.evaluator.videos
    job = _submit_random(evaluator, task, seed=5)
    monkeypatch.setattr(videos, "_timeout_s", 0.05)
    with AleClient(evaluator.harness_address, evaluator.harness_token, run_id=RUN) as h:
        index = fetch_videos(h, tmp_path / "b", job, 2)
    assert index is not None and index.videos == []
    assert index.error == "rendering took longer than 0 s"
    assert not child_pids(os.getpid(), marker=b"ale_robotics.evaluator.videos")
    # the renderers' inputs (the submission, the hidden env seeds) are gone either way
    left = {p.name for p in videos.store.root.rglob("*") if p.is_file()}
    assert not {n for n in left if n.startswith(("request-", "rendered-")) or n == "inputs.npz"}
    after = _result(evaluator, RUN, before.job_id)
    assert after.model_dump(exclude={"events"}) == before.model_dump(exclude={"events"})
