"""The Prometheus endpoint, scraped over real HTTP from two real evaluators in one process.

One evaluator runs a real batch job (the shipped TD3 checkpoint, its shards on a worker
process); the other serves an interactive session whose agent takes steps. Each has a
registry of its own, so each endpoint counts only its own work: the job's attempt, end,
duration and shards on the first, the agent's steps and open session on the second.
A non-loopback address is refused without ``--insecure``.
"""

from __future__ import annotations

import shutil
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from helpers import run_bound_evaluator
from prometheus_client.parser import text_string_to_metric_families

from ale_robotics import __version__
from ale_robotics.client import AleClient, RemoteEnv
from ale_robotics.errors import InvalidArgumentError
from ale_robotics.evaluator import RunningEvaluator
from ale_robotics.evaluator.server.metrics import check_metrics_address, serve_metrics
from ale_robotics.tasks import Registry

ROOT = Path(__file__).resolve().parents[3]
CHECKPOINT = ROOT / "examples/agents/checkpoints/td3-inverted-pendulum-v1/policy.safetensors"
INTERACTIVE_TASK = "td3-inverted-double-pendulum-v1"


def _scrape(address: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``http://ADDRESS/metrics``: (name, sorted labels) -> value."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_a_scrape_counts_a_real_job_and_a_sessions_steps(
    evaluator: RunningEvaluator, short_tmp: Path, registry: Registry
) -> None:
    volume = short_tmp / "submission"
    shutil.copy(CHECKPOINT, volume / "policy.safetensors")
    batch = serve_metrics(evaluator.evaluator, "127.0.0.1:0")
    with run_bound_evaluator(registry, INTERACTIVE_TASK, "run-metrics") as other:
        interactive = serve_metrics(other.evaluator, "127.0.0.1:0")
        try:
            run = "run-test-1"
            with AleClient(evaluator.agent_address, evaluator.agent_token, run_id=run,
                           submission_dir=volume) as c:  # fmt: skip
                job = c.submit(client_token="metrics")
                assert c.wait(job, timeout_s=120, poll_s=0.05).state == "SUCCEEDED"

            client = AleClient(other.agent_address, other.agent_token, task_id=INTERACTIVE_TASK,
                               run_id="run-metrics")  # fmt: skip
            env = RemoteEnv(client, own_client=True, transport="unary")
            env.reset(seed=0)
            action = np.zeros(env.action_space.shape, dtype=np.float32)
            for _ in range(3):
                env.step(action)

            first = _scrape(batch.address)
            second = _scrape(interactive.address)
            env.close()
        finally:
            interactive.stop()
            batch.stop()

    assert first[("ale_job_attempts_total", ())] == 1
    assert first[("ale_jobs_ended_total", (("source", "none"), ("state", "SUCCEEDED")))] == 1
    assert first[("ale_jobs", (("state", "SUCCEEDED"),))] == 1
    assert first[("ale_jobs", (("state", "RUNNING"),))] == 0
    assert first[("ale_queue_depth", ())] == 0
    assert first[("ale_job_store_up", ())] == 1
    assert first[("ale_job_duration_seconds_count", ())] == 1
    assert first[("ale_job_duration_seconds_sum", ())] > 0
    assert first[("ale_shard_duration_seconds_count", ())] >= 1
    assert first[("ale_agent_steps_total", ())] == 0  # the other evaluator's steps
    assert first[("ale_sessions_open", ())] == 0
    info = [dict(labels) for name, labels in first if name == "ale_evaluator_build_info"]
    assert info == [{"executor": "local", "store": "sqlite", "version": __version__}]

    assert second[("ale_agent_steps_total", ())] == 3
    assert second[("ale_sessions_open", ())] == 1
    assert second[("ale_job_attempts_total", ())] == 0


@pytest.mark.parametrize("address", ["0.0.0.0:9464", "192.0.2.1:9464", "[::]:9464"])
def test_a_non_loopback_metrics_address_needs_insecure(address: str) -> None:
    with pytest.raises(InvalidArgumentError, match="--insecure"):
        check_metrics_address(address, insecure=False)
    assert check_metrics_address(address, insecure=True)[1] == 9464


def test_a_metrics_address_without_a_port_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="HOST:PORT"):
        check_metrics_address("localhost", insecure=False)
