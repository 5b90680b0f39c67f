"""The runner's process handling, with a stand-in for ``ale-robotics run`` (fast, and able
to misbehave: ignore SIGINT, fail); the real command is in test_evalset_cli.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ale_robotics.evalset import EvalSetRunner, EvalSetSpec
from ale_robotics.evalset.runner import SlotStatus, agent_seed, prepare

FAKE_RUN = """
import json, os, signal, sys, time
args = sys.argv[1:]
run_dir = args[args.index("--run-dir") + 1]
mode = os.environ["FAKE_MODE"]
with open(os.environ["FAKE_LOG"], "a") as fh:
    fh.write(json.dumps({"start": time.time(), "pid": os.getpid(), "args": args}) + "\\n")
if mode == "stubborn":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # stops only when killed
    print("running", flush=True)
    time.sleep(60)
time.sleep(0.4)
with open(os.environ["FAKE_LOG"], "a") as fh:
    fh.write(json.dumps({"end": time.time(), "pid": os.getpid()}) + "\\n")
print("error: the fake run always fails; see nothing", file=sys.stderr)
sys.exit(1)
"""

DRIVER = """
import json, sys
from pathlib import Path
import pytest

from ale_robotics.evalset import EvalSetRunner, EvalSetSpec
spec = EvalSetSpec.model_validate_json(sys.argv[1])
runner = EvalSetRunner(spec, "s", Path(sys.argv[2]), jobs=2, grace_s=1.0,
                       cli=[sys.executable, sys.argv[3]],
                       on_event=lambda e: print(e.kind, flush=True))
outcome = runner.run()
print(json.dumps({"stopped_by": outcome.stopped_by,
                  "states": [o.state for o in outcome.outcomes]}))
"""


def make_spec(reps: int) -> EvalSetSpec:
    return EvalSetSpec.model_validate(
        {
            "schema_version": 1,
            "tasks": ["td3-inverted-pendulum-v1"],
            "agents": [{"label": "a", "cmd": "python a.py"}, {"label": "b", "cmd": "b --x"}],
            "repetitions": reps,
            "episodes": 1,
            "budget_s": 30,
            "run_args": ["--workers", "1"],
        }
    )


def test_at_most_jobs_runs_at_once_and_failures_name_their_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "fake_run.py"
    fake.write_text(FAKE_RUN)
    log = tmp_path / "fake.jsonl"
    monkeypatch.setenv("FAKE_MODE", "fail")
    monkeypatch.setenv("FAKE_LOG", str(log))
    runner = EvalSetRunner(
        make_spec(3), "s", tmp_path / "runs", jobs=2, cli=[sys.executable, str(fake)]
    )
    outcome = runner.run()
    assert [o.state for o in outcome.outcomes] == ["failed"] * 6
    first = outcome.outcomes[0]
    assert first.exit_code == 1
    assert first.message == (
        f"error: the fake run always fails; see nothing (log: {first.slot.log_path})"
    )
    events = [json.loads(line) for line in log.read_text().splitlines()]
    starts = [e for e in events if "start" in e]
    assert len(starts) == 6
    # the command line: the slot's run dir and label, the SPEC's settings, then run_args
    rep0 = str(tmp_path / "runs/s/td3-inverted-pendulum-v1/a/rep0")
    (args,) = [e["args"] for e in starts if rep0 in e["args"]]  # two start at once
    assert args[:3] == ["run", "td3-inverted-pendulum-v1", "--agent"]
    assert args[3] == "python a.py"
    seed = str(agent_seed("s", "td3-inverted-pendulum-v1", "a", 0))
    assert args[4:] == [
        "--run-dir", rep0,
        "--label", "a", "--repetition", "0", "--agent-seed", seed,
        "--sandbox", "auto", "--episodes", "1", "--budget", "30.0",
        "--workers", "1",
    ]  # fmt: skip
    # never more than 2 at once: at each start, count the runs started and not ended
    ends = {e["pid"]: e["end"] for e in events if "end" in e}
    for s in starts:
        overlapping = [o for o in starts if o["start"] <= s["start"] < ends[o["pid"]]]
        assert len(overlapping) <= 2


def test_a_run_that_ignores_the_signal_is_killed_after_the_grace(tmp_path: Path) -> None:
    fake = tmp_path / "fake_run.py"
    fake.write_text(FAKE_RUN)
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    log = tmp_path / "fake.jsonl"
    proc = subprocess.Popen(
        [sys.executable, str(driver), make_spec(2).model_dump_json(), str(tmp_path / "runs"),
         str(fake)],
        env={**os.environ, "FAKE_MODE": "stubborn", "FAKE_LOG": str(log)},
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "start"
    assert proc.stdout.readline().strip() == "start"  # jobs=2: two run, two wait
    deadline = time.monotonic() + 10
    while (
        not log.exists() or len(log.read_text().splitlines()) < 2
    ) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # the fakes now ignore SIGINT
    t0 = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=20)
    assert time.monotonic() - t0 < 60  # killed after the 1 s grace, not after their 60 s
    lines = out.splitlines()
    assert lines[0] == "stopping"
    result = json.loads(lines[-1])
    assert result == {
        "stopped_by": "SIGINT",
        "states": ["interrupted", "interrupted", "not_run", "not_run"],
    }
    pids = [json.loads(line)["pid"] for line in log.read_text().splitlines()]
    for pid in pids:
        assert (
            not Path(f"/proc/{pid}").exists()
            or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
        )


def test_each_repetition_gets_its_own_training_seed_the_same_on_every_rerun(
    tmp_path: Path,
) -> None:
    runner = EvalSetRunner(make_spec(3), "s", tmp_path / "runs")
    commands = [runner.command(slot) for slot in [s.slot for s in _statuses(runner)]]
    seeds = {}
    for cmd in commands:
        label = cmd[cmd.index("--label") + 1]
        rep = int(cmd[cmd.index("--repetition") + 1])
        seeds[(label, rep)] = int(cmd[cmd.index("--agent-seed") + 1])
        assert seeds[(label, rep)] == agent_seed("s", "td3-inverted-pendulum-v1", label, rep)
    assert len(seeds) == 6 and len(set(seeds.values())) == 6
    assert all(0 <= s < 2**31 for s in seeds.values())
    again = EvalSetRunner(make_spec(3), "s", tmp_path / "runs")
    assert [again.command(s.slot) for s in _statuses(again)] == commands
    assert agent_seed("other-set", "td3-inverted-pendulum-v1", "a", 0) != seeds[("a", 0)]


def _statuses(runner: EvalSetRunner) -> list[SlotStatus]:
    return prepare(runner.spec, runner.name, runner.runs_root)
