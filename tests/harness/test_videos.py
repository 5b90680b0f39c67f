"""``ale-robotics run`` with evaluation videos: real CLI processes, a real embedded evaluator.

The videos land in ``runs/<id>/videos/`` after result.json is written and change nothing
of it (its trajectory head still verifies); ``runs show`` and the report show them;
``--no-videos`` makes none, whatever ``ALE_VIDEOS`` says. The agent submits a bad policy
(short episodes), so rendering takes a second or two.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import decoded

from ale_robotics.harness.report import load_run_report
from ale_robotics.model.video import VIDEO_INDEX, VideoIndex
from ale_robotics.report.site import build_site
from ale_robotics.trajectory import verify_file

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "ale_robotics"]
TASK = "td3-inverted-pendulum-v2"
SUBMIT_RANDOM = """
import numpy as np
from safetensors.numpy import save_file
from ale_robotics.client import AleClient
c = AleClient.from_env()
rng = np.random.default_rng(0)
w = {r.key: (rng.standard_normal(r.shape) * 0.1).astype(r.dtype)
     for r in c.get_spec().contract.tensors}
save_file(w, str(c.submission_dir / "policy.safetensors"))
c.wait(c.submit())
"""


def _run(
    tmp: Path, *extra: str, env: dict[str, str] | None = None, agent: str | None = None
) -> Path:
    if agent is None:
        (tmp / "agent.py").write_text(SUBMIT_RANDOM)
        agent = f"{sys.executable} {tmp / 'agent.py'}"
    run_dir = tmp / "runs" / "r1"
    args = ["--agent", agent, "--sandbox", "none", "--workers", "1"]
    args += ["--run-dir", str(run_dir), "--state-dir", str(tmp / "state"), *extra]
    proc = subprocess.run(
        [*CLI, "run", TASK, *args],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    (run_dir.parent / "stderr.txt").write_text(proc.stderr)
    return run_dir


def test_a_run_writes_its_videos_after_result_json_and_shows_them(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, "--videos", "2")
    folder = run_dir / "videos"
    index = VideoIndex.model_validate_json((folder / VIDEO_INDEX).read_text())
    assert index.error is None and [v.file for v in index.videos] == [
        "episode-000.mp4",
        "episode-001.mp4",
    ]
    said = (run_dir.parent / "stderr.txt").read_text()
    assert f"videos: 2 in {folder}" in " ".join(said.split())  # the command says where
    files = [v.file for v in index.videos]
    assert sorted(p.name for p in folder.iterdir()) == [*files, VIDEO_INDEX]
    report = load_run_report(run_dir / "result.json")
    assert report.eval_result is not None
    official = {e.index: e for e in report.eval_result.episodes}
    assert all(v.frames == official[v.index].length + 1 for v in index.videos)
    # result.json was written before the first frame and is not touched after: no video in
    # it, its trajectory head is still the trajectory's last event, its evaluation timed alone
    raw = (run_dir / "result.json").read_text()
    assert ".mp4" not in raw and "videos" not in json.loads(raw)
    assert (run_dir / "result.json").stat().st_mtime <= min(
        (folder / v.file).stat().st_mtime for v in index.videos
    )
    traj = verify_file(run_dir / "trajectory.jsonl", expected_head=report.trajectory_head)
    assert traj.ok, traj.summary()
    assert not (tmp_path / "state" / "videos" / report.run_id).exists()  # forgotten after
    # runs show, both ways
    show = subprocess.run(
        [*CLI, "runs", "show", str(run_dir), "--root", str(run_dir.parent), "--json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    doc = json.loads(show.stdout)
    assert [Path(v["path"]) for v in doc["videos"]["videos"]] == [
        folder / v.file for v in index.videos
    ]
    text = subprocess.run(
        [*CLI, "runs", "show", str(run_dir), "--root", str(run_dir.parent)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200"},
    ).stdout
    assert "episode-000.mp4 (episode 0" in text
    # the report's run page plays them from its own copies
    site = build_site(run_dir.parent, tmp_path / "site").out
    page = (site / "runs" / f"{report.run_id}.html").read_text()
    for v in index.videos:
        assert f'<video controls preload="metadata" src="{report.run_id}/videos/{v.file}"' in page
        copied = site / "runs" / report.run_id / "videos" / v.file
        assert copied.read_bytes() == (folder / v.file).read_bytes()


def test_no_videos_makes_none(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, "--no-videos", env={"ALE_VIDEOS": "3"})
    assert (run_dir / "result.json").is_file()
    assert not (run_dir / "videos").exists()
    assert not (tmp_path / "state" / "videos").exists() or not any(
        (tmp_path / "state" / "videos").iterdir()
    )


@pytest.mark.slow
def test_the_shipped_checkpoint_gets_three_full_episodes_by_default(tmp_path: Path) -> None:
    """The default (no --videos, ALE_VIDEOS unset): the first 3 of the shipped TD3 policy's
    1000-step episodes, 1001 frames each, every one reproducing its official return."""
    agent = f"{sys.executable} {ROOT / 'examples/agents/submit_checkpoint.py'}"
    run_dir = _run(tmp_path, agent=agent, env={"ALE_VIDEOS": ""})
    index = VideoIndex.model_validate_json((run_dir / "videos" / VIDEO_INDEX).read_text())
    assert index.error is None and index.requested == 3
    assert [(v.index, v.frames, v.matches_official) for v in index.videos] == [
        (i, 1001, True) for i in range(3)
    ]
    for v in index.videos:
        frames = decoded(run_dir / "videos" / v.file)
        assert len(frames) == 1001 and all(f.std() > 1.0 for f in frames[::50])
