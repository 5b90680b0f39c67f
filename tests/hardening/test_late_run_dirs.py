"""Run directories made after an agent's sandbox started stay invisible to it (issue 26, item 2).

The attack measured before the fix: an eval set whose runs root is inside the workspace,
two runs at a time; the workspace is a live read-only bind, so a *thief* agent polling
the tree saw the directory of a run started after it, read that run's submission (and
could resubmit its policy) and its official ``result.json``. Here the thief polls the
whole workspace for as long as it lives and prints every path of another run it saw and
every file of another run it could read; the test asserts it saw nothing.

A run directory that a live sandbox would see (inside its workspace, not under a hidden
runs root) is refused before anything of it exists: exit 2, one line naming the live run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from ale_robotics.sandboxes.bwrap.command import sandbox_available

needs_bwrap = pytest.mark.skipif(not sandbox_available(), reason="bubblewrap cannot start here")

CLI = [sys.executable, "-m", "ale_robotics"]
TASK = "td3-inverted-pendulum-v1"

THIEF = """
import json, os, sys, time
ws = os.environ["ALE_WORKSPACE"]
mine = (os.environ["ALE_SCRATCH_DIR"], os.environ["ALE_SUBMISSION_DIR"])
duration = float(sys.argv[1])
seen, read, held = set(), {}, []
end = time.monotonic() + duration
while time.monotonic() < end:
    for root, dirs, files in os.walk(ws):
        for name in dirs + files:
            p = os.path.join(root, name)
            if any(p == m or p.startswith(m + os.sep) or m.startswith(p + os.sep) for m in mine):
                continue  # its own scratch and submission, and the directories above them
            if os.path.dirname(p) == ws:
                continue  # the workspace's own files (these scripts)
            seen.add(p)
            if name in dirs and len(held) < 200:
                try:  # an fd on a directory keeps showing it after an overmount
                    held.append(os.open(p, os.O_RDONLY | os.O_DIRECTORY))
                except OSError:
                    pass
            if name in files and p not in read:
                try:
                    with open(p, "rb") as fh:
                        read[p] = fh.read(200).decode("utf-8", "replace")
                except OSError:
                    pass
    if any("VICTIM-MARKER" in v for v in read.values()) and any(
        p.endswith("result.json") for p in read
    ):
        break  # the old code: everything there was to steal
    time.sleep(0.1)
for fd in held:  # what the held directories show now
    for name in os.listdir(fd):
        seen.add(f"fd:{name}")
print("THIEF " + json.dumps({"seen": sorted(seen), "read": read}), flush=True)
"""

VICTIM = """
import os, time
sub = os.environ["ALE_SUBMISSION_DIR"]
with open(os.path.join(sub, "policy.txt"), "w") as fh:
    fh.write("VICTIM-MARKER " + os.environ["ALE_RUN_ID"])
time.sleep(3)
"""


def _event_time(run_dir: Path, kind: str) -> str:
    """When the run's trajectory recorded its first ``kind`` event (ISO time, sortable)."""
    for line in (run_dir / "trajectory.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["kind"] == kind:
            return str(event["time"])
    raise AssertionError(f"no {kind} event in {run_dir}")


def _thief_report(agent_log: Path) -> dict[str, Any]:
    text = agent_log.read_text()
    assert "THIEF " in text, text[-2000:]
    report: dict[str, Any] = json.loads(text.split("THIEF ", 1)[1].splitlines()[0])
    return report


@pytest.mark.slow
@needs_bwrap
def test_an_eval_set_run_started_later_is_invisible_to_a_thief(short_tmp: Path) -> None:
    """Three runs, two at a time, the runs root inside the workspace: the thief and a
    filler start together; the victim starts when the filler ends, while the thief's
    sandbox is live. The thief must see nothing of either other run."""
    ws = short_tmp / "ws"
    ws.mkdir()
    (ws / "thief.py").write_text(textwrap.dedent(THIEF))
    (ws / "victim.py").write_text(textwrap.dedent(VICTIM))
    spec = {
        "schema_version": 1,
        "name": "s",
        "tasks": [TASK],
        "agents": [
            {"label": "thief", "cmd": "python thief.py 25"},
            {"label": "filler", "cmd": "python -c pass"},
            {"label": "victim", "cmd": "python victim.py"},
        ],
        "repetitions": 1,
        "episodes": 1,
        "budget_s": 120,
        "sandbox": "bwrap",
        "run_args": ["--workers", "1", "--state-dir", str(short_tmp / "state")],
        "bootstrap": {"reps": 300, "profile_reps": 200, "seed": 0},
    }
    (ws / "set.json").write_text(json.dumps(spec))
    started = time.monotonic()
    proc = subprocess.run(
        [*CLI, "eval-set", "set.json", "--runs-root", "evals", "--jobs", "2"],
        cwd=ws,
        capture_output=True,
        text=True,
        timeout=600,
    )
    wall = time.monotonic() - started
    set_dir = ws / "evals" / "s" / TASK
    assert (set_dir / "victim" / "rep0" / "submission" / "policy.txt").exists(), proc.stderr
    thief, victim = set_dir / "thief" / "rep0", set_dir / "victim" / "rep0"
    # The case under test happened: the victim's run began while the thief was sandboxed.
    assert (
        _event_time(thief, "agent_launched")
        < _event_time(victim, "run_started")
        < _event_time(thief, "agent_exited")
    )
    report = _thief_report(thief / "agent.log")
    # Anything at all besides its own dirs (its scratch, submission and read-only task
    # packet, bound into the sandbox on purpose) is another run's.
    own_packet = str(thief / "task")
    # (entries read through a held fd are named "fd:NAME"; the packet's own names are its)
    packet_names = {
        f"fd:{n}" for n in ("brief.md", "contract.json", "index.json", "paper", "task.json")
    }
    seen = [
        p
        for p in report["seen"]
        if p != own_packet and not p.startswith(own_packet + "/") and p not in packet_names
    ]
    others = [p for p in seen if "/victim" in p or "/filler" in p]
    stolen = {p: v for p, v in report["read"].items() if "VICTIM-MARKER" in v}
    results = [p for p in report["read"] if p.endswith("result.json")]
    assert not seen and not stolen and not results, (
        f"the thief saw {len(seen)} path(s) ({len(others)} of the other runs: {others[:5]}), "
        f"read {sorted(stolen)} and {results} ({wall:.0f} s)"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


WAITER = """
import json, os, time
ws = os.environ["ALE_WORKSPACE"]
open("ready", "w").close()  # in its scratch dir, which the test watches
end = time.monotonic() + 90
seen = set()
while time.monotonic() < end and not os.path.exists("stop"):
    for root, dirs, files in os.walk(ws):
        seen.update(os.path.join(root, n) for n in dirs + files)
    time.sleep(0.1)
print("WAITER " + json.dumps(sorted(seen)), flush=True)
"""


@pytest.mark.slow
@needs_bwrap
def test_a_run_dir_a_live_sandbox_would_see_is_refused_before_it_exists(
    short_tmp: Path,
) -> None:
    """Run A's agent is sandboxed in ``ws``; run B asks for ``--run-dir ws/late/run-b``
    (a new directory no cover of A's sandbox can hide): B exits 2 naming run A, and
    nothing of B ever exists, so A's agent saw nothing of it."""
    ws, other = short_tmp / "ws", short_tmp / "other"
    ws.mkdir()
    other.mkdir()
    (ws / "waiter.py").write_text(textwrap.dedent(WAITER))
    common = ["--episodes", "1", "--workers", "1", "--sandbox", "bwrap", "--budget", "120"]
    a = subprocess.Popen(
        [*CLI, "run", TASK, "--agent", "python waiter.py", "--run-dir", "runs/run-a", *common,
         "--state-dir", str(short_tmp / "state-a")],
        cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    scratch = ws / "runs" / "run-a" / "scratch"
    try:
        deadline = time.monotonic() + 120
        while not (scratch / "ready").exists():
            assert a.poll() is None and time.monotonic() < deadline, a.communicate()
            time.sleep(0.1)
        late = ws / "late" / "run-b"
        b = subprocess.run(
            [*CLI, "run", TASK, "--agent", "python -c pass", "--run-dir", str(late), *common,
             "--state-dir", str(short_tmp / "state-b")],
            cwd=other, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert not (ws / "late").exists()
    finally:
        (scratch / "stop").touch()
        _out, err = a.communicate(timeout=120)
    assert b.returncode == 2, (b.returncode, b.stderr[-2000:])
    assert a.returncode == 0, err[-2000:]
    run_a = json.loads((ws / "runs" / "run-a" / "result.json").read_text())["run_id"]
    (line,) = [x for x in b.stderr.splitlines() if x.startswith("error:")]
    assert run_a in line and str(late) in line and "nothing was made" in line, line
    log = (ws / "runs" / "run-a" / "agent.log").read_text()
    seen = json.loads(log.split("WAITER ", 1)[1].splitlines()[0])
    assert not [p for p in seen if "/late" in p], seen
