"""Every directory a run writes, unwritable: one line saying what to change, exit 2, nothing made.

Issue 48.2: a read-only ``--state-dir`` gave a traceback (``os.chmod`` -> EROFS), exit 1
and a ``failed`` run in ``runs list``. Each directory a run writes is made unwritable
here for real, for root too: a tmpfs remounted read-only in a private mount namespace
(``unshare -rm``; permission bits do not stop root), or a file where the directory
belongs. The CLI runs inside that namespace; afterwards nothing of the run exists: no
run directory, no runs root, no state dir, no run recorded in the harness's state home.

The agent's ``scratch/`` is made inside the run directory, which is new or empty: it is
writable exactly when the run directory is, so the run directory's cases cover it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "ale_robotics"]
TASK = "td3-inverted-pendulum-v2"
AGENT = f"{sys.executable} -c pass"


def _private_mounts() -> str | None:
    """Why a private mount namespace cannot be made here (None: it can)."""
    if shutil.which("unshare") is None:
        return "no unshare(1) here (util-linux)"
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True, text=True, check=False)
    return None if probe.returncode == 0 else f"unshare -rm fails here: {probe.stderr.strip()}"


_NO_MOUNTS = _private_mounts()
needs_mounts = pytest.mark.skipif(_NO_MOUNTS is not None, reason=str(_NO_MOUNTS))

_READ_ONLY = """set -e
mount -t tmpfs -o size=1m ale-test-ro "$RO"
for d in $RO_DIRS; do mkdir -p "$RO/$d"; done
mount -o remount,ro "$RO"
cd "$RUN_CWD"
exec "$@"
"""
"""Mount a tmpfs at $RO holding the directories $RO_DIRS, make it read-only, run "$@"."""


class Layout:
    """A test's directories: ``ro`` (read-only once the CLI runs), ``work`` (the CLI's
    working directory, writable) and ``xdg`` (the harness's state home, writable)."""

    def __init__(self, tmp: Path) -> None:
        self.ro = tmp / "ro"
        self.work = tmp / "work"
        self.xdg = tmp / "xdg"
        for d in (self.ro, self.work):
            d.mkdir()

    def run(self, *args: str, cwd: Path | None = None, xdg: Path | None = None) -> tuple[int, str]:
        """``ale-robotics run TASK --agent ... ARGS`` with ``ro`` read-only (its ``state``,
        ``empty`` and ``xdg`` directories made first); (exit code, stderr)."""
        env = {
            **os.environ,
            "COLUMNS": "200",
            "XDG_STATE_HOME": str(xdg or self.xdg),
            "RO": str(self.ro),
            "RO_DIRS": "state empty xdg",
            "RUN_CWD": str(cwd or self.work),
        }
        argv = [*CLI, "run", TASK, "--agent", AGENT, "--sandbox", "none", *args]
        proc = subprocess.run(
            ["unshare", "-rm", "sh", "-c", _READ_ONLY, "sh", *argv],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return proc.returncode, proc.stderr

    def assert_nothing_made(self, *paths: Path) -> None:
        """No runs root in the working directory, none of ``paths``, no run recorded."""
        assert not (self.work / "runs").exists()
        for p in paths:
            assert not p.exists(), f"{p} was made by a refused run"
        assert not (self.xdg / "ale-robotics" / "run-dirs.jsonl").exists()
        assert not [p for p in self.ro.iterdir()], "the mount point was written"


def _refused(rc: int, err: str, message: str) -> None:
    assert rc == 2, err
    assert "Traceback" not in err, err
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, err
    assert message in errors[0], err


@pytest.fixture
def lay(tmp_path: Path) -> Layout:
    return Layout(tmp_path)


@needs_mounts
def test_a_read_only_state_dir(lay: Layout) -> None:
    run_dir, state = lay.work / "run", lay.ro / "state"
    rc, err = lay.run("--state-dir", str(state), "--run-dir", str(run_dir))
    _refused(
        rc,
        err,
        f"--state-dir {state} is not writable (Read-only file system): give a directory "
        "this user can write",
    )
    lay.assert_nothing_made(run_dir)


@needs_mounts
def test_a_state_dir_to_make_on_a_read_only_file_system(lay: Layout) -> None:
    run_dir, state = lay.work / "run", lay.ro / "new" / "state"
    rc, err = lay.run("--state-dir", str(state), "--run-dir", str(run_dir))
    _refused(
        rc,
        err,
        f"--state-dir {state} cannot be made: {lay.ro} is not writable (Read-only file "
        "system): give a directory this user can write",
    )
    lay.assert_nothing_made(run_dir)


@needs_mounts
def test_the_default_state_dir_on_a_read_only_state_home(lay: Layout) -> None:
    run_dir, home = lay.work / "run", lay.ro / "xdg"
    rc, err = lay.run("--run-dir", str(run_dir), xdg=home)
    _refused(
        rc,
        err,
        f"the evaluator's state dir {home / 'ale-robotics' / 'evaluator'} (the default) "
        f"cannot be made: {home} is not writable (Read-only file system): give one this "
        "user can write with --state-dir DIR, or set XDG_STATE_HOME",
    )
    lay.assert_nothing_made(run_dir)


@needs_mounts
def test_a_read_only_state_home(lay: Layout) -> None:
    """The harness records every run directory in its state home, before making it."""
    run_dir, state, home = lay.work / "run", lay.work / "state", lay.ro / "xdg"
    rc, err = lay.run("--state-dir", str(state), "--run-dir", str(run_dir), xdg=home)
    _refused(
        rc,
        err,
        f"the harness's state home {home / 'ale-robotics'} (it records every run directory "
        f"there) cannot be made: {home} is not writable (Read-only file system): set "
        "XDG_STATE_HOME to a directory this user can write",
    )
    lay.assert_nothing_made(run_dir, state)


@needs_mounts
def test_an_empty_run_dir_on_a_read_only_file_system(lay: Layout) -> None:
    state, run_dir = lay.work / "state", lay.ro / "empty"
    rc, err = lay.run("--state-dir", str(state), "--run-dir", str(run_dir))
    _refused(
        rc,
        err,
        f"--run-dir {run_dir} is not writable (Read-only file system): give a new or "
        "empty directory this user can write",
    )
    lay.assert_nothing_made(state)


@needs_mounts
def test_a_run_dir_to_make_on_a_read_only_file_system(lay: Layout) -> None:
    state, run_dir = lay.work / "state", lay.ro / "run"
    rc, err = lay.run("--state-dir", str(state), "--run-dir", str(run_dir))
    _refused(rc, err, f"--run-dir {run_dir} cannot be made: {lay.ro} is not writable")
    lay.assert_nothing_made(state)


@needs_mounts
def test_the_runs_root_in_a_read_only_working_directory(lay: Layout) -> None:
    state = lay.work / "state"
    rc, err = lay.run("--state-dir", str(state), cwd=lay.ro)
    _refused(
        rc,
        err,
        f"the runs directory {lay.ro / 'runs'} cannot be made: {lay.ro} is not writable "
        "(Read-only file system): run from a directory this user can write, or give "
        "--run-dir DIR",
    )
    lay.assert_nothing_made(state)


@needs_mounts
def test_a_read_only_submission_dir_of_a_separate_evaluator(lay: Layout) -> None:
    """``--submission-dir``: the volume the agent writes and a separate evaluator reads."""
    token = lay.work / "harness.token"
    token.write_text("t0ken\n")
    run_dir, volume = lay.work / "run", lay.ro / "empty"
    rc, err = lay.run(
        "--evaluator",
        f"unix://{lay.work}/agent/agent.sock",
        "--harness-token-file",
        str(token),
        "--submission-dir",
        str(volume),
        "--run-dir",
        str(run_dir),
    )
    _refused(rc, err, f"--submission-dir {volume} is not writable (Read-only file system)")
    lay.assert_nothing_made(run_dir)


def test_a_file_where_the_runs_root_belongs(tmp_path: Path) -> None:
    """A file is no directory for root either: no mount namespace needed."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "runs").write_text("not a directory\n")
    proc = subprocess.run(
        [*CLI, "run", TASK, "--agent", AGENT, "--sandbox", "none"],
        cwd=work,
        env={**os.environ, "COLUMNS": "200", "XDG_STATE_HOME": str(tmp_path / "xdg")},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    _refused(
        proc.returncode,
        proc.stderr,
        f"the runs directory {work / 'runs'} is a file, not a directory: run from a directory "
        "this user can write, or give --run-dir DIR",
    )
    assert (work / "runs").read_text() == "not a directory\n"
    assert not (tmp_path / "xdg" / "ale-robotics").exists()


def test_a_file_where_a_parent_of_the_state_dir_belongs(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    dirs = ["--state-dir", str(a_file / "state"), "--run-dir", str(tmp_path / "run")]
    proc = subprocess.run(
        [*CLI, "run", TASK, "--agent", AGENT, "--sandbox", "none", *dirs],
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    _refused(
        proc.returncode,
        proc.stderr,
        f"--state-dir {a_file / 'state'} cannot be made: {a_file} is a file, not a directory",
    )
    assert not (tmp_path / "run").exists()


@needs_mounts
@pytest.mark.parametrize("mode", [0o755, 0o700], ids=["to-chmod", "private-already"])
def test_the_evaluators_state_dir_refuses_a_read_only_directory_in_one_line(
    lay: Layout, mode: int
) -> None:
    """``StateDir``, which every evaluator opens its state dir with: it chmod-ed the
    directory first (a traceback of EROFS); a directory already 0700 passed that and
    failed later, at the first file written."""
    state = lay.ro / "state"
    code = (
        "import os, sys\n"
        "from ale_robotics.evaluator.state.directory import StateDir, StateDirError\n"
        "try:\n"
        "    StateDir(__import__('pathlib').Path(sys.argv[1]))\n"
        "except StateDirError as exc:\n"
        "    print(exc.message)\n"
        "    sys.exit(2)\n"
    )
    script = _READ_ONLY.replace(
        'mount -o remount,ro "$RO"',
        f'chmod {mode:o} "$RO/state"; mkdir "$RO/state/snapshots"; mount -o remount,ro "$RO"',
    )
    env = {**os.environ, "RO": str(lay.ro), "RO_DIRS": "state", "RUN_CWD": str(lay.work)}
    proc = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, "sh", sys.executable, "-c", code, str(state)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout.strip() == (
        f"the evaluator's state dir {state} cannot be used: Read-only file system; give a "
        "directory this user can write (--state-dir)"
    )
