"""Containment attacks, run for real through ``python -m ale_robotics run`` (issue 12).

Each test plays an attacker from inside the agent process against a real harness,
embedded evaluator and (where bubblewrap starts) sandbox, then checks on the host
that the attack was refused or contained and that the run still ended with its
result. Every one of these attacks worked before the workspace became read-only,
the harness got a private working directory and a safe ``sys.path``, run
directories were hidden wherever they are, and the agent's disk and log were capped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import docker_support
import pytest

from ale_robotics.sandboxes.bwrap.command import sandbox_available

CLI = [sys.executable, "-m", "ale_robotics"]
TASK = "td3-inverted-pendulum-v1"
BWRAP = sandbox_available()
needs_bwrap = pytest.mark.skipif(not BWRAP, reason="bubblewrap cannot start here")
SANDBOXES = ["none", pytest.param("bwrap", marks=needs_bwrap), docker_support.DOCKER]
"""The attacks that need no host workspace also run in the agent container (issue 20)."""

SUBMIT = """
import numpy as np
from safetensors.numpy import save_file
from ale_robotics.client import AleClient
c = AleClient.from_env()
rng = np.random.default_rng(0)
w = {r.key: (rng.standard_normal(r.shape) * 0.1).astype(r.dtype)
     for r in c.get_spec().contract.tensors}
EXTRA
save_file(w, str(c.submission_dir / "policy.safetensors"))
print("job state:", c.wait(c.submit()).state)
"""

TRY_WRITE = """
import json, os
def try_write(path, text, mode="w"):
    try:
        if os.path.dirname(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, mode) as fh:
            fh.write(text)
        return "WROTE"
    except OSError as exc:
        return type(exc).__name__
def try_read(path):
    try:
        with open(path, "rb") as fh:
            fh.read(1)
        return "READ"
    except OSError as exc:
        return type(exc).__name__
"""


def _agent(where: Path, body: str, name: str = "agent.py") -> Path:
    path = where / name
    path.write_text(TRY_WRITE + textwrap.dedent(body))
    return path


def _run(
    cwd: Path, agent_cmd: str, *extra: str, sandbox: str = "none", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *CLI,
            "run",
            TASK,
            "--agent",
            agent_cmd,
            *docker_support.sandbox_args(sandbox),
            "--episodes",
            "2",
            "--workers",
            "1",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=cwd,
        env=env,
    )


def _run_in(
    tmp: Path, cwd: Path, agent: Path, *extra: str, sandbox: str = "none"
) -> subprocess.CompletedProcess[str]:
    """``_run`` with the run dir ``tmp/run`` and the state dir ``tmp/state``."""
    return _run(
        cwd,
        docker_support.agent_cmd(sandbox, agent),
        "--run-dir",
        str(tmp / "run"),
        "--state-dir",
        str(tmp / "state"),
        *extra,
        sandbox=sandbox,
    )


def _score_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = proc.stdout.strip().splitlines()[-1]
    assert line.startswith("score: "), proc.stdout
    return line


def _probe(proc: subprocess.CompletedProcess[str], run_dir: Path) -> dict[str, str]:
    log = (run_dir / "agent.log").read_text()
    line = next((x for x in log.splitlines() if x.startswith("PROBE ")), None)
    assert line is not None, (log, proc.stderr[-2000:])
    out: dict[str, str] = json.loads(line[len("PROBE ") :])
    return out


def _git_repo(ws: Path) -> None:
    ws.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / "Makefile").write_text("test:\n\t@echo ok\n")
    (ws / "tests").mkdir()
    (ws / "tests" / "conftest.py").write_text("# the operator's\n")


@needs_bwrap
def test_agent_cannot_plant_git_hooks_makefile_or_bashrc_in_the_default_workspace(
    short_tmp: Path,
) -> None:
    """The README runs from the repository root: that whole tree is the workspace, read-only."""
    ws = short_tmp / "repo"
    _git_repo(ws)
    home = short_tmp / "home"
    home.mkdir()
    (home / ".bashrc").write_text("# the operator's\n")
    marker = short_tmp / "PWNED"
    evil = f"#!/bin/sh\ntouch {marker}\n"
    before = {p: p.read_bytes() for p in [ws / ".git" / "config", ws / "Makefile"]}
    _agent(
        ws,
        SUBMIT.replace(
            "EXTRA",
            textwrap.dedent(
                f"""
                seen = {{
                    "git_config": try_write({str(ws / ".git" / "config")!r},
                                            "[core]\\n\\tfsmonitor = {ws}/evil.sh\\n", "a"),
                    "evil_script": try_write({str(ws / "evil.sh")!r}, {evil!r}),
                    "pre_commit": try_write(
                        {str(ws / ".git" / "hooks" / "pre-commit")!r}, {evil!r}
                    ),
                    "conftest": try_write({str(ws / "tests" / "conftest.py")!r}, "import os\\n"),
                    "makefile": try_write({str(ws / "Makefile")!r}, "test:\\n\\ttouch {marker}\\n"),
                    "bashrc": try_write({str(home / ".bashrc")!r}, "touch {marker}\\n", "a"),
                    "cwd": try_write("notes.txt", "the agent's own scratch\\n"),
                }}
                print("PROBE " + json.dumps(seen))
                """
            ),
        ),
    )
    # Relative, as the README writes it: resolved against the workspace.
    proc = _run(
        ws,
        "python agent.py",
        "--run-dir",
        str(short_tmp / "run"),
        "--state-dir",
        str(short_tmp / "state"),
        sandbox="bwrap",
        env={**os.environ, "HOME": str(home)},
    )
    line = _score_line(proc)
    assert "no submission" not in line
    seen = _probe(proc, short_tmp / "run")
    for name in ("git_config", "evil_script", "pre_commit", "conftest", "makefile"):
        assert seen[name] != "WROTE", (name, seen)
    # ~/.bashrc is not even there: a write lands in the sandbox's private /tmp (the test's
    # home is under the host's /tmp), so only the host file tells.
    assert seen["cwd"] == "WROTE"  # its working directory is the run's scratch dir
    assert (short_tmp / "run" / "scratch" / "notes.txt").exists()
    assert {p: p.read_bytes() for p in before} == before
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()
    assert (ws / "tests" / "conftest.py").read_text() == "# the operator's\n"
    assert (home / ".bashrc").read_text() == "# the operator's\n"
    subprocess.run(["git", "-C", str(ws), "status", "--short"], check=True, capture_output=True)
    assert not marker.exists()


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_planted_matplotlib_never_runs_in_the_harness(short_tmp: Path, sandbox: str) -> None:
    """The harness imports matplotlib after the agent exits; it must be the installed one.

    Without a sandbox the agent can write the harness's launch directory (it can
    write anything this user can); with one it tries its own working directory.
    Either way ``python -m ale_robotics`` must not import from there.
    """
    ws = short_tmp / "ws"
    ws.mkdir()
    marker = short_tmp / "HARNESS-PWNED"
    plant = f"open({str(marker)!r}, 'w').write('code ran in the harness')\n"
    _agent(
        ws,
        SUBMIT.replace(
            "EXTRA",
            textwrap.dedent(
                f"""
                for d in ({str(ws)!r}, "."):
                    try_write(os.path.join(d, "matplotlib", "__init__.py"), {plant!r})
                """
            ),
        ),
    )
    proc = _run_in(short_tmp, ws, ws / "agent.py", sandbox=sandbox)
    _score_line(proc)
    assert not marker.exists()
    assert (short_tmp / "run" / "episodes.png").stat().st_size > 1000
    assert json.loads((short_tmp / "run" / "result.json").read_text())["job_state"] == "SUCCEEDED"


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_planted_matplotlibrc_cannot_kill_the_harness(short_tmp: Path, sandbox: str) -> None:
    """``figure.hooks: sys:exit`` in ./matplotlibrc killed the harness before result.json."""
    ws = short_tmp / "ws"
    ws.mkdir()
    rc = "figure.hooks: sys:exit\n"
    _agent(
        ws,
        SUBMIT.replace(
            "EXTRA",
            textwrap.dedent(
                f"""
                for d in ({str(ws)!r}, "."):
                    try_write(os.path.join(d, "matplotlibrc"), {rc!r})
                """
            ),
        ),
    )
    proc = _run_in(short_tmp, ws, ws / "agent.py", sandbox=sandbox)
    _score_line(proc)
    doc = json.loads((short_tmp / "run" / "result.json").read_text())
    assert doc["job_state"] == "SUCCEEDED"
    assert (short_tmp / "run" / "episodes.png").exists()


@needs_bwrap
def test_no_run_directory_is_visible_to_a_later_agent_wherever_it_is(short_tmp: Path) -> None:
    """An explicit --run-dir inside the workspace, outside runs/: hidden from the next agent."""
    ws = short_tmp / "ws"
    ws.mkdir()
    first = ws / "experiments" / "first"
    _agent(ws, SUBMIT.replace("EXTRA", ""), "plain.py")
    state = ["--state-dir", str(short_tmp / "state")]
    _score_line(_run(ws, f"{sys.executable} {ws / 'plain.py'}", "--run-dir", str(first), *state))
    _score_line(_run(ws, f"{sys.executable} {ws / 'plain.py'}", *state))  # ws/runs/<id>
    default_run = next((ws / "runs").iterdir())
    targets = {
        "first_result": first / "result.json",
        "first_trajectory": first / "trajectory.jsonl",
        "first_policy": first / "submission" / "policy.safetensors",
        "default_result": default_run / "result.json",
        "default_policy": default_run / "submission" / "policy.safetensors",
    }
    assert all(p.exists() for p in targets.values())
    reads = ", ".join(f"{k!r}: try_read({str(p)!r})" for k, p in targets.items())
    _agent(
        ws,
        SUBMIT.replace(
            "EXTRA",
            textwrap.dedent(
                f"""
                seen = {{{reads}}}
                seen["forge"] = try_write({str(first / "result.json")!r}, "{{}}")
                print("PROBE " + json.dumps(seen))
                """
            ),
        ),
        "snoop.py",
    )
    second = ws / "experiments" / "second"
    before = (first / "result.json").read_bytes()
    proc = _run(
        ws,
        f"{sys.executable} {ws / 'snoop.py'}",
        "--run-dir",
        str(second),
        *state,
        sandbox="bwrap",
    )
    _score_line(proc)
    seen = _probe(proc, second)
    assert all(v != "READ" for k, v in seen.items() if k != "forge"), seen
    assert seen["forge"] != "WROTE"
    assert (first / "result.json").read_bytes() == before


def test_agent_controlled_text_is_printed_without_markup(short_tmp: Path) -> None:
    """A tensor key ``[/x]`` in a rejection reason crashed rich (MarkupError) before."""
    _agent(short_tmp, SUBMIT.replace("EXTRA", 'w["[/x]"] = np.zeros(1, np.float32)'))
    proc = _run_in(short_tmp, short_tmp, short_tmp / "agent.py")
    line = _score_line(proc)
    assert "rejected" in line
    assert "MarkupError" not in proc.stderr and "Traceback" not in proc.stderr
    assert "[/x]" in proc.stderr  # the reason names the key, verbatim


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_disk_quota_stops_an_agent_that_fills_the_disk(short_tmp: Path, sandbox: str) -> None:
    """One file over the quota fails to write (EFBIG); many small ones get the agent stopped."""
    _agent(
        short_tmp,
        """
        import errno, time
        try:
            with open("big.bin", "wb") as fh:
                fh.write(b"x" * (6 * 1024 * 1024))
            print("BIG WROTE", flush=True)
        except OSError as exc:
            print("BIG", errno.errorcode.get(exc.errno), flush=True)
        for i in range(12):
            with open(f"part{i}.bin", "wb") as fh:
                fh.write(os.urandom(1024 * 1024))
        print("FILLED", flush=True)
        time.sleep(60)
        """,
    )
    t0 = time.monotonic()
    proc = _run_in(
        short_tmp, short_tmp, short_tmp / "agent.py", "--disk-quota-mib", "4", sandbox=sandbox
    )
    _score_line(proc)
    assert time.monotonic() - t0 < 60  # stopped, not left to sleep out its 60 s
    log = (short_tmp / "run" / "agent.log").read_text()
    assert "BIG EFBIG" in log
    doc = json.loads((short_tmp / "run" / "result.json").read_text())
    assert doc["agent_disk_quota_exceeded"] is True
    assert "disk quota" in doc["score"]["explanation"]
    assert "disk quota" in proc.stderr


def test_agent_log_is_capped(short_tmp: Path) -> None:
    _agent(
        short_tmp,
        """
        import sys
        for _ in range(48):
            sys.stdout.write("y" * 65535 + "\\n")
        sys.stdout.flush()
        print("job state: none")
        """,
    )
    proc = _run_in(short_tmp, short_tmp, short_tmp / "agent.py", "--log-cap-mib", "1")
    _score_line(proc)
    size = (short_tmp / "run" / "agent.log").stat().st_size
    assert 1024**2 <= size < 1024**2 + 4096
    assert "agent.log cut at 1.0 MiB" in (short_tmp / "run" / "agent.log").read_text()
    assert json.loads((short_tmp / "run" / "result.json").read_text())["agent_log_truncated"]


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_nothing_the_agent_started_outlives_the_run(short_tmp: Path, sandbox: str) -> None:
    _agent(
        short_tmp,
        SUBMIT.replace(
            "EXTRA",
            textwrap.dedent(
                """
                import subprocess
                loop = "while true; do echo beat >> beat; sleep 0.05; done"
                subprocess.Popen(["/bin/sh", "-c", loop],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                """
            ),
        ),
    )
    proc = _run_in(short_tmp, short_tmp, short_tmp / "agent.py", sandbox=sandbox)
    _score_line(proc)
    beat = short_tmp / "run" / "scratch" / "beat"
    assert beat.exists()
    size = beat.stat().st_size
    time.sleep(1.0)
    assert beat.stat().st_size == size, "a process the agent started is still running"
