"""The benchmark scripts run end to end and print what their docs promise.

Tiny durations: these check the scripts' plumbing and output contract (the keys
issue #4 names, ratios consistent with the rates), never their speed.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
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


def test_step_breakdown_names_every_piece() -> None:
    out, data = _run("step_breakdown.py", "--rounds", "1", "--steps", "20", "--num-envs", "4")
    assert set(data["median_us"]) == {"sync_vector_env_step", "session_step", "encode", "decode"}
    assert all(us > 0 for us in data["median_us"].values())
    assert "session+encode+decode" in out


def test_grpc_floor_measures_unary_and_stream() -> None:
    _, data = _run("grpc_floor.py", "--calls", "30", "--server-work-us", "200")
    for name in ("unary", "stream"):
        assert data[name]["wall_us"] >= 200  # the server's work is part of every round trip
