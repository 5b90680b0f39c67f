"""The mount plan's visibility rule, the registry of running sandboxes, and the refusal
to make a run's directory where one of them would see it (issue 26, item 2).

The rule is checked against a real bubblewrap sandbox: every probed path exists inside
exactly when :func:`shows` says so on the host.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ale_robotics.sandboxes import live as live_sandboxes
from ale_robotics.sandboxes.bwrap.command import bwrap_command, sandbox_available, sandbox_mounts
from ale_robotics.sandboxes.live import LiveSandbox, register
from ale_robotics.sandboxes.live import live_sandboxes as live
from ale_robotics.sandboxes.mount_plan import Mount, plan_mounts, shows
from ale_robotics.sandboxes.run_dirs import (
    DirKind,
    VisibleToSandboxError,
    known_run_dirs,
    new_private_dirs,
    run_dirs_file,
)

needs_bwrap = pytest.mark.skipif(not sandbox_available(), reason="bubblewrap cannot start here")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A workspace with a runs root holding one run (scratch and submission)."""
    (tmp_path / "ws" / "runs" / "r1" / "scratch").mkdir(parents=True)
    (tmp_path / "ws" / "runs" / "r1" / "submission").mkdir()
    (tmp_path / "ws" / "code.py").write_text("")
    return tmp_path / "ws"


def _plan(ws: Path, hide: list[Path]) -> list[Mount]:
    run = ws / "runs" / "r1"
    return plan_mounts([ws], hide, [run / "scratch", run / "submission"])


def test_the_innermost_mount_decides(ws: Path) -> None:
    plan = _plan(ws, [ws / "runs"])
    assert [(m.kind, Path(m.dest).name) for m in plan] == [
        ("ro", "ws"),
        ("hide", "runs"),
        ("rw", "scratch"),
        ("rw", "submission"),
    ]
    assert shows(plan, ws / "code.py")
    assert shows(plan, ws / "not-yet-made")  # a live bind: what is made later shows
    assert not shows(plan, ws / "runs")
    assert not shows(plan, ws / "runs" / "r2" / "submission")  # made later, under the cover
    assert shows(plan, ws / "runs" / "r1" / "scratch" / "x")
    assert not shows(plan, ws / "runs" / "r1" / "agent.log")
    assert not shows(plan, ws.parent / "elsewhere")


def test_a_cover_inside_a_cover_is_left_out_and_a_tree_inside_one_is_bound_again(
    ws: Path,
) -> None:
    venv = ws / "runs" / "venv"
    venv.mkdir()
    plan = plan_mounts([ws, venv], [ws / "runs", ws / "runs" / "r1", ws / "gone"], [])
    assert [(m.kind, Path(m.dest).name) for m in plan] == [
        ("ro", "ws"),
        ("hide", "runs"),
        ("ro", "venv"),  # deeper than the cover: mounted after it, so it shows
    ]
    assert shows(plan, venv / "bin")
    assert not shows(plan, ws / "runs" / "r1")


def test_a_cover_whose_directory_was_made_again_covers_nothing(ws: Path) -> None:
    plan = _plan(ws, [ws / "runs"])
    late = ws / "runs" / "r2"
    assert not shows(plan, late)
    (ws / "runs").rename(ws / "old-runs")  # the kernel detaches a cover whose point goes
    late.mkdir(parents=True)
    assert shows(plan, late)


def test_the_registry_lists_running_sandboxes_and_forgets_dead_ones(ws: Path) -> None:
    plan = _plan(ws, [ws / "runs"])
    with register("run-a", "bwrap", ws, plan) as lease:
        (entry,) = live()
        assert entry.run_id == "run-a" and entry.pid == os.getpid()
        assert entry.shows(ws / "late") and not entry.shows(ws / "runs" / "late")
        lease.update(_plan(ws, []))
        assert live()[0].shows(ws / "runs" / "late")
        folder = lease.path.parent
        # A harness killed outright leaves its entry: its pid is gone...
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        stale = LiveSandbox(**{**entry.__dict__, "run_id": "run-dead", "pid": dead.pid})
        (folder / "dead.json").write_text(stale.to_json())
        # ...or it was reused by another process (the start time differs).
        reused = LiveSandbox(**{**entry.__dict__, "run_id": "run-reused", "pid_start": 1})
        (folder / "reused.json").write_text(reused.to_json())
        assert [e.run_id for e in live()] == ["run-a"]
        assert not (folder / "dead.json").exists() and not (folder / "reused.json").exists()
    assert live() == []
    assert list(folder.iterdir()) == []


def test_a_directory_a_running_sandbox_would_see_is_refused_and_not_made(ws: Path) -> None:
    plan = _plan(ws, [ws / "runs"])
    with register("run-a", "bwrap", ws, plan):
        late = ws / "late" / "deeper" / "run-b"
        made: list[tuple[Path, DirKind]] = [(late, "run"), (late / "submission", "submission")]
        with pytest.raises(VisibleToSandboxError) as exc, new_private_dirs(made):
            late.mkdir(parents=True)
            (late / "submission").mkdir()
        message = str(exc.value)
        assert "run-a" in message and str(late) in message and "nothing was made" in message
        assert "\n" not in message
        assert not (ws / "late").exists()
        # Under the cover it laid from its start, the same is allowed.
        ok = ws / "runs" / "run-c"
        with new_private_dirs([(ok, "run")]):
            ok.mkdir()
        assert ok.is_dir()
    # Recorded before it was made, so every sandbox started later hides it.
    recorded = [json.loads(x) for x in run_dirs_file().read_text().splitlines()]
    assert {"path": str(late.resolve()), "kind": "run"} in recorded
    assert ok.resolve() in known_run_dirs()
    # With no sandbox running, nothing is refused.
    with new_private_dirs([(late, "run")]):
        late.mkdir(parents=True)


def test_a_docker_sandbox_sees_only_its_own_directories(ws: Path) -> None:
    run = ws / "runs" / "r1"
    with register("run-d", "docker", None, plan_mounts([], [], [run / "scratch"])):
        with new_private_dirs([(ws / "late", "run")]):
            (ws / "late").mkdir()
        nested = run / "scratch" / "nested"  # inside its scratch: it would see that
        with pytest.raises(VisibleToSandboxError), new_private_dirs([(nested, "run")]):
            nested.mkdir()


@pytest.fixture
def agent_socket(tmp_path: Path) -> Iterator[Path]:
    sock_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"ale-ls-{os.getpid()}"
    sock_dir.mkdir(exist_ok=True)
    path = sock_dir / "a.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    try:
        yield path
    finally:
        s.close()
        path.unlink()
        sock_dir.rmdir()


@needs_bwrap
def test_the_rule_matches_what_a_real_sandbox_shows(ws: Path, agent_socket: Path) -> None:
    """Every probed path exists inside bubblewrap exactly when :func:`shows` says so,
    including directories made on the host after the sandbox started."""
    run = ws / "runs" / "r1"
    nested_root = ws / "data" / "evals"
    nested_root.mkdir(parents=True)
    hide = [ws / "runs", nested_root]
    probes = [
        ws / "code.py",
        ws / "late-top",  # made after the start, in the workspace: shows (a live bind)
        ws / "runs" / "late-run",  # made after the start, under a cover: does not
        nested_root / "late-set",
        run / "scratch",
        run / "submission",
        run / "agent.log",
        Path(sys.prefix) / "bin",
        Path("/usr/bin"),
        Path("/etc/shadow"),
        ws.parent / "outside",
    ]
    (run / "agent.log").write_text("x")
    (ws.parent / "outside").mkdir()
    go = run / "scratch" / "go"
    script = (
        "import json, os, sys, time\n"
        "open('ready', 'w').close()\n"
        "while not os.path.exists('go'): time.sleep(0.05)\n"
        "print('SEEN ' + json.dumps([os.path.exists(p) for p in sys.argv[1:]]))\n"
    )
    argv = bwrap_command(
        [sys.executable, "-c", script, *map(str, probes)],
        workspace=ws,
        scratch_dir=run / "scratch",
        submission_dir=run / "submission",
        agent_socket=agent_socket,
        hide=hide,
        tmp_size_bytes=16 * 1024**2,
    )
    plan = sandbox_mounts(
        workspace=ws,
        scratch_dir=run / "scratch",
        submission_dir=run / "submission",
        agent_socket=agent_socket,
        hide=hide,
    )
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(600):
            if (run / "scratch" / "ready").exists() or proc.poll() is not None:
                break
            subprocess.run(["sleep", "0.05"], check=True)
        for late in (ws / "late-top", ws / "runs" / "late-run", nested_root / "late-set"):
            late.mkdir()
        go.touch()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    inside = json.loads(out.split("SEEN ", 1)[1])
    expected = [shows(plan, p) for p in probes]
    assert dict(zip(map(str, probes), inside, strict=True)) == dict(
        zip(map(str, probes), expected, strict=True)
    )
    assert expected == [True, True, False, False, True, True, False, True, True, False, False]


def test_registry_dir_is_in_the_state_home() -> None:
    assert live_sandboxes.registry_dir().parent == run_dirs_file().parent
