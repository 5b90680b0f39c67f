"""Small helpers shared by tests (importable as ``helpers``)."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ale_robotics.evaluator import EvaluatorConfig, RunningEvaluator, serve
from ale_robotics.tasks import Registry, TaskSpec

TASK_ID = "td3-inverted-pendulum-v1"


def random_weights(task: TaskSpec, seed: int = 0, scale: float = 0.1) -> dict[str, np.ndarray]:
    """Weights that satisfy the contract (a bad, quickly-falling policy: short episodes)."""
    assert task.contract is not None
    rng = np.random.default_rng(seed)
    return {
        r.key: (rng.standard_normal(r.shape) * scale).astype(r.dtype) for r in task.contract.tensors
    }


@contextlib.contextmanager
def run_bound_evaluator(
    registry: Registry, task_id: str, run_id: str
) -> Iterator[RunningEvaluator]:
    """A real evaluator serving one task for one run on Unix sockets in a temp dir (short
    enough for the 108-byte socket path limit), as the harness starts one; stopped after."""
    with tempfile.TemporaryDirectory(prefix="ale-") as d:
        running = serve(
            EvaluatorConfig(Path(d) / "state", None, task_id=task_id, run_id=run_id, workers=1),
            agent_listen=f"unix://{d}/a.sock",
            harness_listen=f"unix://{d}/h.sock",
            registry=registry,
        )
        try:
            yield running
        finally:
            running.stop(grace=0.5)


def child_pids(pid: int, *, marker: bytes | None = None) -> list[int]:
    """Live children of ``pid`` (from /proc); with ``marker``, only those whose command
    line holds it (``b"spawn_main"``: the rollout workers multiprocessing spawned)."""
    out = []
    for stat_path in Path("/proc").glob("[0-9]*/stat"):
        try:
            stat = stat_path.read_text()
            cmdline = (stat_path.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) != pid:
            continue
        if marker is None or marker in cmdline:
            out.append(int(stat_path.parent.name))
    return out


def decoded(path: Path) -> list[np.ndarray]:
    """Every frame of an mp4 (an evaluation video), read back with imageio-ffmpeg."""
    import imageio_ffmpeg

    reader = imageio_ffmpeg.read_frames(str(path))
    meta = next(reader)
    width, height = meta["size"]
    return [np.frombuffer(f, np.uint8).reshape(height, width, 3) for f in reader]
