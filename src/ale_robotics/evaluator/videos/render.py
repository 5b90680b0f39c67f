"""``python -m ale_robotics.evaluator.videos FOLDER PART``: render a job's episodes to mp4.

Run by :class:`.service.VideoService` as a process of its own, niced, once the official
result is recorded: off-screen OpenGL (EGL or OSMesa, :func:`~ale_robotics.evaluator.
sessions.rendering.prepare_headless_gl`) and the encoder then share neither the
evaluator's interpreter (its GIL, its threads serving other runs) nor its fate (a driver
that crashes kills this process, and the run only misses its videos).

``FOLDER`` holds ``request-<PART>.json`` (a :class:`RenderRequest`: this process's share of
the episodes; several processes render a job's episodes side by side on a host with the
cores) and ``inputs.npz`` (the submitted artifact, or the session's taped actions); this
writes ``episode-<index>.mp4`` per episode and ``rendered-<PART>.json`` (a
:class:`Rendered`). Each episode: a fresh env of the task with ``render_mode="rgb_array"``
at the requested size (MuJoCo envs; others render at their own), reset on the episode's
env seed, a frame after the reset and after every step.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from ale_robotics.envs.make import make_env
from ale_robotics.evaluator.sessions.rendering import prepare_headless_gl, render_fps
from ale_robotics.evaluator.videos.encode import Mp4Writer
from ale_robotics.evaluator.videos.tape import tape_key
from ale_robotics.model.kind_registry import get_kind
from ale_robotics.model.rollout_kind import VideoActor
from ale_robotics.model.video import EpisodeVideo, VideoSource
from ale_robotics.tasks.spec import TaskSpec

__all__ = [
    "EpisodeToRender",
    "RenderRequest",
    "Rendered",
    "main",
    "render_episode",
    "rendered_file",
    "request_file",
]

INPUTS = "inputs.npz"
DEFAULT_FPS = 30
"""Playback rate of an env that declares no ``render_fps``."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EpisodeToRender(_Model):
    index: int
    env_seed: int
    seed_commitment: str
    official_return: float | None = None
    official_length: int | None = None


class RenderRequest(_Model):
    task_json: str
    source: VideoSource
    episodes: list[EpisodeToRender]
    width: int
    height: int


class Rendered(_Model):
    videos: list[EpisodeVideo]
    error: str | None = None


def _size(env: Any, width: int, height: int) -> None:
    """Ask a MuJoCo env's off-screen renderer for ``width`` x ``height`` before its first
    frame (it builds its viewer then); other envs render at their own size."""
    renderer = getattr(env.unwrapped, "mujoco_renderer", None)
    if renderer is None or getattr(renderer, "viewer", None) is not None:
        return
    renderer.width, renderer.height = width, height
    visual = renderer.model.vis.global_
    visual.offwidth, visual.offheight = max(visual.offwidth, width), max(visual.offheight, height)


def _actor(task: TaskSpec, request: RenderRequest, inputs: Any, index: int, env: Any) -> VideoActor:
    if request.source == "session":
        actions = inputs[tape_key(index)]

        def replay(obs: Any, step: int) -> Any:
            return actions[step] if step < len(actions) else None

        return replay
    artifact = {key: inputs[key] for key in inputs.files}
    actor = get_kind(task.eval.rollout).video_actor(task, artifact, index, env.action_space)
    if actor is None:
        raise ValueError(f"rollout kind {task.eval.rollout!r} makes no videos")
    return actor


def render_episode(
    task: TaskSpec, request: RenderRequest, episode: EpisodeToRender, inputs: Any, folder: Path
) -> EpisodeVideo:
    """Play ``episode`` again with frames, into ``folder/episode-<index>.mp4``."""
    env = make_env(task.env, render_mode="rgb_array")
    try:
        _size(env, request.width, request.height)
        act = _actor(task, request, inputs, episode.index, env)
        obs, _ = env.reset(seed=episode.env_seed)
        path = folder / f"episode-{episode.index:03d}.mp4"
        total, steps, ended = 0.0, 0, False
        with Mp4Writer(path, render_fps(env) or DEFAULT_FPS) as out:
            out.add(env.render())
            while not ended and steps <= task.env.max_episode_steps:
                action = act(obs, steps)
                if action is None:
                    break
                obs, reward, terminated, truncated, _ = env.step(action)
                total += float(reward)
                steps += 1
                ended = bool(terminated or truncated)
                out.add(env.render())
    finally:
        env.close()
    assert out.size is not None
    matches, note = _compare(total, steps, episode)
    return EpisodeVideo(
        file=path.name,
        index=episode.index,
        seed_commitment=episode.seed_commitment,
        frames=out.frames,
        fps=out.fps,
        width=out.size[0],
        height=out.size[1],
        bytes=path.stat().st_size,
        episode_return=total,
        official_return=episode.official_return,
        matches_official=matches,
        note=note,
    )


def _compare(total: float, steps: int, episode: EpisodeToRender) -> tuple[bool | None, str]:
    """Whether the rendered episode is the official one (its return and length), and if not,
    a note saying how it differs."""
    if episode.official_return is None:
        return None, ""
    same = steps == episode.official_length and math.isclose(
        total, episode.official_return, rel_tol=1e-9, abs_tol=1e-9
    )
    if same:
        return True, ""
    return False, (
        f"the rendered episode returned {total:.6g} in {steps} steps, the official one "
        f"{episode.official_return:.6g} in {episode.official_length}: the video shows the "
        "episode played again, not bit for bit the measured one; the score is the official "
        "result's"
    )


def request_file(folder: Path, part: int) -> Path:
    return folder / f"request-{part}.json"


def rendered_file(folder: Path, part: int) -> Path:
    return folder / f"rendered-{part}.json"


def render_folder(folder: Path, part: int = 0) -> Rendered:
    """Every episode of ``folder``'s request ``part``; the first failure ends the rendering
    (said in :attr:`Rendered.error`), the episodes rendered before it are kept."""
    request = RenderRequest.model_validate_json(request_file(folder, part).read_text())
    task = TaskSpec.model_validate_json(request.task_json)
    videos: list[EpisodeVideo] = []
    with np.load(folder / INPUTS, allow_pickle=False) as inputs:
        for episode in request.episodes:
            try:
                videos.append(render_episode(task, request, episode, inputs, folder))
            except Exception as exc:  # the env, OpenGL or the encoder: said, never raised
                why = f"episode {episode.index}: {type(exc).__name__}: {exc}"
                return Rendered(videos=videos, error=why)
    return Rendered(videos=videos)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or not args[1].isdigit():
        print("usage: python -m ale_robotics.evaluator.videos FOLDER PART", file=sys.stderr)
        return 2
    folder, part = Path(args[0]), int(args[1])
    os.nice(10)  # behind whatever else the host runs: other runs' measured evaluations
    prepare_headless_gl()
    rendered = render_folder(folder, part)
    rendered_file(folder, part).write_text(rendered.model_dump_json())
    return 0
