"""A runs root made of real runs, for the run index, leaderboard and ``runs`` CLI tests.

Importable as ``runs_helpers`` (tests/runs/conftest.py and tests/cli/test_runs_cmd.py
put this directory on ``sys.path``). The root is made once per test process, by real
``ale-robotics run`` processes of the shipped TD3 checkpoint agent (~3 s each), and
shared read-only: a test that changes runs works on :func:`copy_root`.

Layout (in start order):

=============  =======  ============================================  ==============
run dir        label    agent                                         ranks
=============  =======  ============================================  ==============
alpha-1        alpha    submit_checkpoint.py (score 1.018)            yes, best alpha
beta-1         beta     submit_checkpoint.py --checkpoint ZEROED      yes, low score
alpha-2        alpha    submit_checkpoint.py (score 1.018, later)     counted in runs
smoke-1        gamma    submit_checkpoint.py --episodes 2             never (smoke)
=============  =======  ============================================  ==============

ZEROED is the shipped checkpoint with every tensor set to 0: the policy always
outputs 0, the pendulum falls and the score is near 0, so the two labels differ.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "ale_robotics"]
TASK_ID = "td3-inverted-pendulum-v1"
AGENT = ROOT / "examples/agents/submit_checkpoint.py"
CHECKPOINT = ROOT / "examples/agents/checkpoints/td3-inverted-pendulum-v1/policy.safetensors"


@dataclass(frozen=True)
class RunsRoot:
    root: Path
    """The runs root: alpha-1, beta-1, alpha-2, smoke-1 (see the module docstring)."""
    base: Path
    """Where the evaluator state and the zeroed checkpoint are (outside the root)."""


def cli(
    *args: str, columns: int = 80, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``ale-robotics ARGS`` as a real process, stdout and stderr through pipes."""
    return subprocess.run(
        [*CLI, *args],
        env={**os.environ, "COLUMNS": str(columns)},
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        check=False,
    )


def real_run(base: Path, run_dir: Path, label: str | None, *extra: str) -> None:
    """One ``ale-robotics run`` of the checkpoint agent into ``run_dir`` (no sandbox)."""
    agent = f"{sys.executable} {AGENT}"
    if "--checkpoint" in extra:
        i = extra.index("--checkpoint")
        agent += f" --checkpoint {extra[i + 1]}"
        extra = extra[:i] + extra[i + 2 :]
    args = [
        "run",
        TASK_ID,
        "--agent",
        agent,
        "--sandbox",
        "none",
        "--workers",
        "1",
        "--run-dir",
        str(run_dir),
        "--state-dir",
        str(base / "state"),
        *(["--label", label] if label is not None else []),
        *extra,
    ]
    proc = cli(*args, cwd=ROOT, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1].startswith("score:"), proc.stdout


def zeroed_checkpoint(dest: Path) -> Path:
    """The shipped checkpoint with every tensor zeroed (a policy that always outputs 0)."""
    import numpy as np
    from safetensors.numpy import load_file, save_file

    tensors = load_file(str(CHECKPOINT))
    save_file({k: np.zeros_like(v) for k, v in tensors.items()}, str(dest))
    return dest


_MADE: dict[str, RunsRoot] = {}


def runs_root() -> RunsRoot:
    """The shared runs root of this test process (made on first use)."""
    if "root" not in _MADE:
        base = Path(tempfile.mkdtemp(prefix="ale-runs-"))
        atexit.register(shutil.rmtree, base, True)
        root = base / "runs"
        root.mkdir()
        zeroed = zeroed_checkpoint(base / "zeroed.safetensors")
        real_run(base, root / "alpha-1", "alpha")
        real_run(base, root / "beta-1", "beta", "--checkpoint", str(zeroed))
        real_run(base, root / "alpha-2", "alpha")
        real_run(base, root / "smoke-1", "gamma", "--episodes", "2")
        _MADE["root"] = RunsRoot(root=root, base=base)
    return _MADE["root"]


def copy_root(src: Path, dest: Path) -> Path:
    """A copy of a runs root to change (the agents' scratch and submission dirs left out,
    and the index too: each copy starts without one)."""
    shutil.copytree(
        src, dest, ignore=shutil.ignore_patterns("scratch", "submission", "index.sqlite3*")
    )
    return dest


def forge(run_dir: Path, like: Path, mean_return: float) -> dict[str, object]:
    """Rewrite ``run_dir``'s result.json (and submission) as a forger would, leaving its
    trajectory untouched: every episode returns ``mean_return``, the metrics and the score
    report say so (the score computed by the real scoring function, so the file is
    consistent in itself), and the submission is ``like``'s (file and hashes). Returns
    the forged document."""
    import hashlib
    import json

    from ale_robotics.harness.report import submission_sha256
    from ale_robotics.scoring import score
    from ale_robotics.tasks import default_registry

    doc = json.loads((run_dir / "result.json").read_text())
    genuine = json.loads((like / "result.json").read_text())
    result = doc["eval_result"]
    for episode in result["episodes"]:
        episode["episode_return"] = mean_return
    result["metrics"] = {**result["metrics"], "mean_return": mean_return, "std_return": 0.0}
    registry = default_registry()
    task = registry.get(doc["task_id"])
    doc["score"] = score(task, result["metrics"], registry.target(task.id)).model_dump(mode="json")
    files = genuine["eval_result"]["submission_files"]
    result["submission_files"] = files
    doc["submission_sha256"] = submission_sha256(files)
    (run_dir / "submission").mkdir(exist_ok=True)
    for name in files:
        shutil.copyfile(like / "submission" / name, run_dir / "submission" / name)
        copied = (run_dir / "submission" / name).read_bytes()
        assert hashlib.sha256(copied).hexdigest() == files[name]
    (run_dir / "result.json").write_text(json.dumps(doc, indent=2) + "\n")
    return dict(doc)
