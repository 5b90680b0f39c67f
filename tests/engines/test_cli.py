"""``ale-robotics engines list|install`` as a real process: what it prints, what it builds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-m", "ale_robotics", "engines"]


def _cli(*args: str, site: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80"}
    if site is not None:  # the tiny plug-in registered in the command's process too
        env["PYTHONPATH"] = str(site)
    return subprocess.run(
        [*CLI, *args], env=env, capture_output=True, text=True, timeout=600, check=False
    )


def test_list_then_install_then_list(tiny: Path) -> None:
    before = _cli("list", "--json", site=tiny)
    assert before.returncode == 0, before.stderr
    rows = {r["name"]: r for r in json.loads(before.stdout)["engines"]}
    assert rows["tiny"]["installed"] is False and rows["tiny"]["kinds"] == ["tiny_kind"]
    assert rows["mujoco-warp"]["kinds"] == ["mujoco_warp"]  # the bundled one, listed too

    built = _cli("install", "tiny", "--json", site=tiny)
    assert built.returncode == 0, built.stderr
    (row,) = json.loads(built.stdout)["installed"]
    assert row["installed"] is True and row["versions"]["numpy"] == "2.4.6"
    assert Path(row["path"], "engine.json").is_file()
    assert "tiny: installing 7 pinned distributions" in built.stderr  # progress on stderr

    listed = _cli("list", site=tiny)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert "tiny  installed" in lines
    assert all(len(line) <= 80 for line in lines if not line.startswith("  /")), lines


def test_an_unknown_engine_is_one_line_and_exit_2() -> None:
    done = _cli("install", "mujoco-wrap")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "did you mean 'mujoco-warp'?" in done.stderr
