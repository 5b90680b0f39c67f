"""The benchmark scripts run end to end and print what their docs promise.

Tiny durations: these check the scripts' plumbing and output contract (the keys
issue #4 names, ratios consistent with the rates), never their speed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _run(script: str, *args: str) -> tuple[str, dict[str, Any]]:
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    return proc.stdout, json.loads(lines[-1])


def test_interactive_prints_the_rates_and_a_json_last_line() -> None:
    out, data = _run(
        "interactive.py", "--rounds", "2", "--seconds", "0.05", "--slice", "0.02", "--num-envs", "4"
    )
    for key in (
        "raw_steps_per_s",
        "raw_vector_steps_per_s",
        "unary_steps_per_s",
        "batched64_steps_per_s",
    ):
        assert data[key] > 0, key
    assert data["num_envs"] == 4 and data["rounds"] == 2
    per_round = data["batched_vs_raw_vector_per_round"]
    rates = data["per_round_steps_per_s"]
    assert per_round == pytest.approx(
        [b / v for b, v in zip(rates["batched"], rates["raw_vector"], strict=True)]
    )
    assert data["batched_vs_raw_vector"] == pytest.approx(statistics.median(per_round))
    for row in ("raw env", "unary Step over gRPC", "batched StepStream (4 envs)", "target:"):
        assert row in out
    cpu = data["cpu_us_per_step"]
    assert set(cpu) == {
        "raw", "raw_vector", "unary", "stream", "shm", "batched_unary", "batched", "batched_shm"
    }  # fmt: skip
    assert cpu["raw"]["client"] > 0  # in-process: the client's CPU (the evaluator idles)
    for name in ("unary", "stream", "shm"):  # a remote step costs the evaluator's process CPU
        assert cpu[name]["evaluator"] > cpu["raw"]["evaluator"] and cpu[name]["client"] > 0
        assert data[f"{name}_ms_per_step"] == pytest.approx(1e3 / data[f"{name}_steps_per_s"])
        assert f"one env, {name}: " in out
    # the co-located one-env row, alternated with Gymnasium's own step in the same rounds
    one = data["shm_time_vs_raw_per_round"]
    assert one == pytest.approx([r / s for r, s in zip(rates["raw"], rates["shm"], strict=True)])
    assert data["shm_time_vs_raw"] == pytest.approx(statistics.median(one))
    shm = data["batched_shm_vs_raw_vector_per_round"]
    assert shm == pytest.approx(
        [b / v for b, v in zip(rates["batched_shm"], rates["raw_vector"], strict=True)]
    )
    assert "batched shared memory (4 envs)" in out and "shared memory (1 env)" in out


def test_interactive_memory_compares_open_sessions_of_both_transports() -> None:
    out, data = _run("interactive.py", "--memory", "3")
    assert data["sessions"] == 3 and set(data["rss"]) == {"shm", "stream"}
    for transport, sets in data["rss"].items():
        assert len(sets) == 2, transport
        for one in sets:
            assert one["transports"] == ([transport] if transport == "shm" else ["stream"])
            low, high = one["evaluator_kib"]
            assert one["evaluator_kib_per_session"] == pytest.approx((high - low) / 3)
    assert "3 sessions over shm" in out and "3 sessions over stream" in out


def test_step_breakdown_names_every_piece() -> None:
    out, data = _run("step_breakdown.py", "--rounds", "1", "--steps", "20", "--num-envs", "4")
    assert set(data["median_us"]) == {"sync_vector_env_step", "session_step", "encode", "decode"}
    assert all(us > 0 for us in data["median_us"].values())
    assert "session+encode+decode" in out


def test_grpc_floor_measures_unary_and_stream() -> None:
    _, data = _run("grpc_floor.py", "--calls", "30", "--server-work-us", "200")
    for name in ("unary", "stream"):
        assert data[name]["wall_us"] >= 200  # the server's work is part of every round trip
        assert data[name]["response_bytes"] == 5000


def test_grpc_floor_steps_a_real_session_behind_a_bare_server() -> None:
    out, data = _run("grpc_floor.py", "--calls", "30", "--session", "td3-hopper-v1")
    assert "stepping a session of td3-hopper-v1" in out
    for name in ("unary", "stream"):
        assert data[name]["observation_shape"] == [1, 11], name  # Hopper's, one env
        assert data[name]["wall_us"] > 0 and data[name]["server_cpu_us"] > 0


@pytest.mark.slow  # the benchmark over every MuJoCo batch task: about 20 s on two cores
def test_batch_eval_measures_the_limit_for_every_mujoco_batch_task() -> None:
    out, data = _run("batch_eval.py", "--task", "all", "--episodes", "2", "--rounds", "2")
    from ale_robotics.tasks import default_registry

    reg = default_registry()
    batch_mujoco = {
        i
        for i in reg.ids()
        if reg.get(i).mode.value == "batch"
        and reg.get(i).simulator.package == "mujoco"
        and reg.superseded_by(i) is None
    }  # Gymnasium's MuJoCo envs (the trajectory-set task replays, it rolls nothing out)
    assert set(data["tasks"]) == batch_mujoco  # every current one, none skipped
    for task_id, doc in data["tasks"].items():
        p, q = doc["physics_steps_per_s"], doc["policy_steps_per_s"]
        assert p > 0 and q > 0, task_id
        # each round's ratio is the evaluator over that round's 1/(1/P + 1/Q)
        assert len(doc["evaluator_over_limit_per_round"]) == 2
        assert doc["evaluator_over_limit"] == pytest.approx(
            statistics.median(doc["evaluator_over_limit_per_round"])
        )
        assert doc["limit_steps_per_s"] < min(p, q)  # so in every round, so the medians
        # the same ratio from CPU time: physics + policy CPU per step over the pipeline's
        cpu = [doc[f"{k}_cpu_us_per_step"] for k in ("evaluator", "physics", "policy")]
        assert all(c > 0 for c in cpu), task_id
        assert len(doc["evaluator_over_limit_cpu_per_round"]) == 2
        assert doc["evaluator_over_limit_cpu"] == pytest.approx(
            statistics.median(doc["evaluator_over_limit_cpu_per_round"])
        )
        assert 0 < doc["evaluator_over_limit_cpu"] < 1.5, task_id  # near 1 at most, noise aside
        assert 1 <= doc["physics_nthread"] <= doc["cores"]
        assert doc["env_steps"] == 2 * reg.get(task_id).env.max_episode_steps  # full length
        assert f"task {task_id}" in out
    assert data["min_evaluator_over_limit"] == min(
        d["evaluator_over_limit"] for d in data["tasks"].values()
    )
    assert data["min_evaluator_over_limit_cpu"] == min(
        d["evaluator_over_limit_cpu"] for d in data["tasks"].values()
    )
    assert "limit 1/(1/P+1/Q)" in out and "evaluator / limit" in out and "by CPU time" in out


def test_interactive_covers_every_mujoco_interactive_task() -> None:
    _, data = _run(
        "interactive.py",
        *("--task", "all", "--rounds", "1", "--seconds", "0.05", "--slice", "0.02"),
        *("--num-envs", "2"),
    )
    from ale_robotics.tasks import default_registry

    reg = default_registry()
    interactive_mujoco = {
        i
        for i in reg.ids()
        if reg.get(i).mode.value == "interactive" and reg.get(i).simulator.package == "mujoco"
    }
    assert interactive_mujoco == {
        "td3-hopper-v1",
        "td3-inverted-double-pendulum-v1",
        "td3-reacher-v1",
    }
    assert set(data["tasks"]) == interactive_mujoco
    for task_id, doc in data["tasks"].items():
        low, mid, high = (
            doc["batched_vs_raw_vector_min"],
            doc["batched_vs_raw_vector"],
            doc["batched_vs_raw_vector_max"],
        )
        assert 0 < low <= mid <= high, task_id
    assert data["min_batched_vs_raw_vector"] == min(
        d["batched_vs_raw_vector"] for d in data["tasks"].values()
    )


def test_td3_budget_times_the_reference_agents_and_states_a_verdict() -> None:
    out, data = _run(
        "td3_budget.py",
        "--task",
        "td3-inverted-pendulum-v2",
        "--task",
        "td3-walker2d-repro-v3",
        "--steps",
        "20",
    )
    rows = {r["task"]: r for r in data["rows"]}
    assert set(rows) == {"td3-inverted-pendulum-v2", "td3-walker2d-repro-v3"}
    assert rows["td3-inverted-pendulum-v2"]["where"] == "local env"
    assert rows["td3-walker2d-repro-v3"]["where"] == "practice session"
    for row in rows.values():
        assert row["ms_per_step"] > 0 and row["cpu_ms_per_step"] > 0
        assert abs(row["steps_1m_s"] - 1000 * row["ms_per_step"]) <= 1  # 1M steps, in s
        usable = row["wall_clock_s"] * 0.9
        assert row["fits"] == (1000 * row["ms_per_step"] <= usable)
        assert row["steps_that_fit"] <= usable * 1e3 / row["ms_per_step"]
        assert row["task"] in out and ("fits" in out or "does not fit" in out)
    assert data["machine"]["cpus"] >= 1


def test_load_counts_the_whole_evaluator_tree_and_leaves_no_temp_dir(tmp_path: Path) -> None:
    args = ["--sessions", "2", "--jobs", "1", "--duration", "2", "--json"]
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "load.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    assert data["failed_calls"] == 0 and data["jobs_succeeded"] == 1
    assert 0 < data["rss_start_mb"] <= data["rss_peak_mb"]
    assert list(tmp_path.iterdir()) == []  # its state dir (secret, keys) removed


def test_load_tree_rss_counts_children_started_by_any_thread() -> None:
    """A child started from a thread other than the main one is listed under that thread
    (/proc/PID/task/TID/children): the evaluator's rollout workers are such children."""
    spec = importlib.util.spec_from_file_location("load_bench", BENCHMARKS / "load.py")
    assert spec is not None and spec.loader is not None
    load = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(load)
    hold = "b = bytearray(64 * 2**20); import sys; sys.stdin.read()"  # 64 MiB, touched
    children: list[subprocess.Popen[bytes]] = []
    done = threading.Event()

    def spawn() -> None:  # the thread stays alive while measured: its children are its own
        children.append(subprocess.Popen([sys.executable, "-c", hold], stdin=subprocess.PIPE))
        done.wait(30)

    before = load._tree_rss_mb(os.getpid())
    thread = threading.Thread(target=spawn)
    thread.start()
    try:
        time.sleep(1.5)  # the child starts and allocates
        assert children, "the child did not start"
        assert load._tree_rss_mb(os.getpid()) - before > 60
    finally:
        done.set()
        thread.join()
        for child in children:
            child.kill()
            child.wait()


@pytest.mark.slow  # two real `ale-robotics run`s, one on a private Ray instance: ~60 s
def test_cold_run_times_both_executors_from_their_trajectories() -> None:
    out, data = _run("cold_run.py", "--reps", "1", "--agent-s", "0")
    for executor in ("ray", "local"):
        (run,) = data[executor]["runs"]
        assert 0 < run["job_s"] < run["wall_s"] and 0 <= run["agent_launched_s"] < run["wall_s"]
        assert data[executor]["wall_s"] == run["wall_s"]
    assert data["ray_vs_local_wall"] == pytest.approx(
        data["ray"]["wall_s"] / data["local"]["wall_s"]
    )
    assert "ray / local: whole run" in out


@pytest.mark.slow  # two training loops on three envs each, one a real evaluator: ~40 s
def test_one_env_training_runs_td3_and_ppo_on_every_env_kind() -> None:
    out, data = _run("one_env_training.py", "--quick")
    rows = {(r["algo"], r["side"]): r for r in data["rows"]}
    assert set(rows) == {(a, s) for a in ("td3", "ppo") for s in ("local", "shm", "stream")}
    for (algo, side), row in rows.items():
        assert row["steps"] == (20 if algo == "td3" else 256)  # 2 rounds of 10 / of 128
        assert row["steps_per_s_min"] <= row["steps_per_s"] <= row["steps_per_s_max"]
        assert len(row["vs_local_per_round"]) == 2 and row["vs_local"] > 0
        assert 0 < row["env_share"] < 1 and row["agent_cpu_us_per_step"] > 0
        if side == "local":
            assert row["vs_local"] == 1.0 and row["cpu_vs_local"] == 1.0
        elif algo == "ppo":  # the evaluator's process stepped the env (TD3's 10-step slices
            # are too short for /proc's 10 ms ticks)
            evaluator_us = row["evaluator_cpu_us_per_step"]
            assert evaluator_us > rows[(algo, "local")]["evaluator_cpu_us_per_step"]
        assert f"{algo:<4} {side:<6}" in out
    assert len(data["loadavg"]) == 2 * 3  # before each round and after the last, per loop
