"""Does SubmitCheckpoint's answer tell the agent anything about its hidden-seed rollouts?

A checkpoint is no evaluation oracle only if its answer is the same whatever the
policy does on the hidden checkpoint episodes: the same fields, the same quota
used, and no answer time that follows the rollout. This measures all three over
real gRPC on real Unix sockets, with real MuJoCo episodes, on the pendulum task
(``td3-inverted-pendulum-v2`` with a ``training.checkpoints`` block added, as the
walker repro task has it: 3 hidden-seed episodes per checkpoint) and three
policies, submitted ``--rounds`` times each in a shuffled order (seeded):

* ``zero``: all-zero weights, the pole falls within a few dozen steps (low return);
* ``good``: the shipped TD3 checkpoint (``examples/agents/checkpoints/``), which
  balances all 1,000 steps of every episode (return 1,000);
* ``nan``: finite weights whose actions are NaN (inf - inf in the last layer) from
  the first step: a checkpoint that fails on a hidden episode.

For each it prints the answer time (median, min-max, ms), what the answer held
(an error, or the receipt with its ``checkpoints_left`` step), how often the
good policy answered slower than the zero one in the same round ("order right":
12 of 12 is a perfect oracle, ~half is a coin), and the answer time grouped by
the policy submitted just before (a rollout still running in the background
could slow the next answer). Then, once the evaluator has settled every
checkpoint, what the trusted side recorded: one signed outcome per checkpoint
(``checkpoint`` with its measured return, or ``checkpoint_failed`` with the
reason).

Usage::

    python benchmarks/checkpoint_leak.py [--rounds 6] [--json]

With ``--json`` the last line is one JSON object: ``policies`` (per policy:
``latency_ms`` {median, min, max, all}, ``answers``: the distinct answers),
``order_right`` / ``rounds``, ``after_previous_ms`` (median answer time by the
previous policy), ``ranges_overlap`` (zero's and good's) and ``events`` (signed
event kinds, counted).

Run it on an older checkout with ``PYTHONPATH=<checkout>/src`` to measure that
release (before the fix: the NaN policy's answer is an INVALID_ARGUMENT that uses
no quota, and good policies answer 3-5x slower than zero ones).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file, save_file

from ale_robotics.client import AleClient
from ale_robotics.errors import AleError
from ale_robotics.evaluator import EvaluatorConfig, serve
from ale_robotics.tasks import Registry, default_registry
from ale_robotics.v1 import ale_env_pb2 as pb

TASK = "td3-inverted-pendulum-v2"
RUN = "run-ckpt-leak"
ROOT = Path(__file__).resolve().parent.parent
GOOD = (
    ROOT / "examples" / "agents" / "checkpoints" / "td3-inverted-pendulum-v1" / "policy.safetensors"
)
POLICIES = ("zero", "good", "nan")


def _registry(max_checkpoints: int) -> Registry:
    """The pendulum task with checkpoints (3 episodes on their own base seeds)."""
    data = json.loads(default_registry().entry(TASK).raw)
    data["session"] = {"practice_allowed": True, "training_step_unit": "agent_step"}
    data["training"] = {
        "simulator": "evaluator",
        "checkpoints": {
            "episodes": 3,
            "base_seeds": [7301, 7302, 7303],
            "max_checkpoints": max_checkpoints,
        },
    }
    return Registry({f"{TASK}.json": json.dumps(data).encode()})


def _weights(kind: str) -> dict[str, np.ndarray]:
    good = load_file(str(GOOD))
    if kind == "good":
        return good
    zero = {k: np.zeros_like(v) for k, v in good.items()}
    if kind == "zero":
        return zero
    # finite weights, NaN actions: relu(3e38 * 3e38 * ...) = inf in layer 2, then
    # +inf - inf = NaN in the last layer, on the first step of every episode
    nan = dict(zero)
    nan["l1.bias"] = np.full_like(good["l1.bias"], 3e38)
    nan["l2.weight"] = np.full_like(good["l2.weight"], 3e38)
    signs = np.where(np.arange(good["l3.weight"].shape[1]) % 2 == 0, 1.0, -1.0)
    nan["l3.weight"] = np.broadcast_to(signs, good["l3.weight"].shape).astype(np.float32)
    return nan


def _answer(client: AleClient, folder: Path, token: str) -> tuple[float, dict[str, Any]]:
    """Submit ``folder`` as a checkpoint; (answer time in ms, what the answer held)."""
    start = time.perf_counter()
    try:
        ack = client.submit_checkpoint(folder, client_token=token)
    except AleError as exc:
        ms = (time.perf_counter() - start) * 1000
        return ms, {"error": type(exc).__name__, "message": str(exc)[:160]}
    ms = (time.perf_counter() - start) * 1000
    return ms, {
        "deduplicated": ack.deduplicated,
        "practice_steps": ack.practice_steps,
        "checkpoints_left": ack.checkpoints_left,
        "index": ack.index,
    }


def _probe(client: AleClient, window_s: float) -> int:
    """GetSpec calls answered in ``window_s`` right after a checkpoint's answer: a side
    channel. An evaluation running in the evaluator's process competes with every call
    for the interpreter, so fewer answers mean it is still running (a long, good
    rollout); as many as when idle mean it is not running at all."""
    request = pb.GetSpecRequest(task_id=TASK)
    n = 0
    end = time.perf_counter() + window_s
    while time.perf_counter() < end:
        client._call(client.stub.GetSpec, request)
        n += 1
    return n


def _shape(answer: dict[str, Any], before: int) -> str:
    """An answer with what differs on every call (index, quota left) made relative."""
    if "error" in answer:
        return f"error {answer['error']}: {answer['message'][:90]}"
    used = before - answer["checkpoints_left"]
    return (
        f"receipt (deduplicated={answer['deduplicated']}, "
        f"practice_steps={answer['practice_steps']}, quota used={used})"
    )


def _settled_events(running: Any, timeout_s: float = 300.0) -> list[dict[str, Any]]:
    """The run's signed events once every received checkpoint has its outcome."""
    evaluator = running.evaluator
    settle = getattr(evaluator.checkpoints, "settle", None)
    if settle is not None:  # releases that answer before evaluating
        settle(RUN, evaluator.task(TASK), timeout_s=timeout_s)
    return list(evaluator.ledger.events(RUN))


def measure(rounds: int, seed: int = 0, probe_s: float = 0.4) -> dict[str, Any]:
    order = [p for _ in range(rounds) for p in POLICIES]
    rng = random.Random(seed)
    plan = []
    for r in range(rounds):
        batch = list(POLICIES)
        rng.shuffle(batch)
        plan.extend((r, p) for p in batch)
    limit = len(order) + 4
    with tempfile.TemporaryDirectory(prefix="ale-cl-") as d:
        volume = Path(d) / "submission"
        for kind in POLICIES:
            (volume / kind).mkdir(parents=True)
            save_file(_weights(kind), str(volume / kind / "policy.safetensors"))
        running = serve(
            EvaluatorConfig(Path(d) / "state", volume, task_id=TASK, run_id=RUN, workers=1),
            agent_listen=f"unix://{d}/a.sock",
            harness_listen=f"unix://{d}/h.sock",
            registry=_registry(limit),
        )
        try:
            client = AleClient(
                running.agent_address,
                running.agent_token,
                task_id=TASK,
                run_id=RUN,
                submission_dir=volume,
            )
            # one warm-up call (first-call costs: channel, imports), not counted
            _answer(client, volume / "zero", "warm-up")
            left = limit - 1
            latency: dict[str, list[float]] = {p: [] for p in POLICIES}
            answers: dict[str, Counter[str]] = {p: Counter() for p in POLICIES}
            by_round: dict[int, dict[str, float]] = {}
            after: dict[str, list[float]] = {p: [] for p in POLICIES}
            probes: dict[str, list[int]] = {p: [] for p in POLICIES}
            idle = _probe(client, probe_s)
            previous = "zero"
            for i, (r, kind) in enumerate(plan):
                if probe_s:
                    time.sleep(probe_s)  # nothing of the previous checkpoint still running
                ms, answer = _answer(client, volume / kind, f"t{i}")
                if probe_s:
                    probes[kind].append(_probe(client, probe_s))
                latency[kind].append(ms)
                answers[kind][_shape(answer, left)] += 1
                left = answer.get("checkpoints_left", left)
                by_round.setdefault(r, {})[kind] = ms
                after[previous].append(ms)
                previous = kind
            client.close()
            events = _settled_events(running)
        finally:
            running.stop(grace=0.5)
    kinds = Counter(str(e["kind"]) for e in events if str(e["kind"]).startswith("checkpoint"))
    order_right = sum(1 for v in by_round.values() if v["good"] > v["zero"])
    z, g = latency["zero"], latency["good"]
    return {
        "rounds": rounds,
        "policies": {
            p: {
                "latency_ms": {
                    "median": round(statistics.median(v), 1),
                    "min": round(min(v), 1),
                    "max": round(max(v), 1),
                    "all": [round(x, 1) for x in v],
                },
                "answers": dict(answers[p]),
            }
            for p, v in latency.items()
        },
        "order_right": order_right,
        "ranges_overlap": max(z) >= min(g) and max(g) >= min(z),
        "after_previous_ms": {
            p: round(statistics.median(v), 1) if v else None for p, v in after.items()
        },
        "events": dict(sorted(kinds.items())),
        "probe": {
            "window_s": probe_s,
            "idle_calls": idle,
            "calls_after": {
                p: {"median": statistics.median(v), "min": min(v), "max": max(v)}
                for p, v in probes.items()
                if v
            },
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=6, help="submissions of each policy")
    parser.add_argument("--seed", type=int, default=0, help="seed of the shuffled order")
    parser.add_argument(
        "--probe-s",
        type=float,
        default=0.4,
        help="after each answer, count GetSpec calls answered in this window (0: off)",
    )
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    args = parser.parse_args(argv)
    out = measure(args.rounds, args.seed, args.probe_s)
    for name, p in out["policies"].items():
        lat = p["latency_ms"]
        print(
            f"{name:>5}: answer {lat['median']:7.1f} ms "
            f"(min {lat['min']:.1f}, max {lat['max']:.1f})"
        )
        for shape, n in p["answers"].items():
            print(f"        {n} x {shape}")
    print(
        f"order right (good answered slower than zero, same round): "
        f"{out['order_right']} of {out['rounds']}; zero's and good's ranges "
        f"{'overlap' if out['ranges_overlap'] else 'do NOT overlap'}"
    )
    prev = ", ".join(f"after {k}: {v} ms" for k, v in out["after_previous_ms"].items())
    print(f"answer time by the previous policy (median): {prev}")
    probe = out["probe"]
    if probe["calls_after"]:
        after = ", ".join(
            f"{k}: {v['median']} ({v['min']}-{v['max']})" for k, v in probe["calls_after"].items()
        )
        print(
            f"side channel: GetSpec calls answered in the {probe['window_s']} s after the "
            f"answer (idle: {probe['idle_calls']}): {after}"
        )
    print(f"signed checkpoint events: {out['events']}")
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
