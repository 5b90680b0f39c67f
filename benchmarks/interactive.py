"""Interactive-mode throughput: what gym-over-gRPC costs against stepping the env in-process.

Measurements of the same task, same random actions, in one run, repeated over ``--rounds``
rounds (medians reported; the ratio is the median of the per-round ratios):

* ``raw``: one Gymnasium env in this process (``gym.make`` with the task's step limit);
* ``raw_vector``: ``gymnasium.vector.SyncVectorEnv`` with ``--num-envs`` envs in this process;
* ``unary``: ``RemoteEnv`` (one env): one Step RPC per env step; ``stream``: over one
  ``StepStream``; ``shm``: through the shared-memory data plane (the SDK's default where the
  evaluator offers it: ``ale_robotics.dataplane``), co-located as under the harness;
* ``batched``: ``RemoteVectorEnv`` with ``--num-envs`` envs: one Step for all of them (over
  ``StepStream``; ``batched_unary``: one unary Step RPC each; ``batched_shm``: shared memory).

Two pairs alternate every ``--slice`` seconds within a round, so that each pair's ratio
compares them under the same machine conditions: ``raw_vector`` with ``batched`` and
``batched_shm``, and ``raw`` (Gymnasium's own step in this process) with ``shm``, the
co-located one-env row (issue 47's target: within 1.5x of ``raw``).

``--memory N`` measures instead what N open one-env sessions cost: the resident memory
(``VmRSS``) of the evaluator's process and of this one, before and after opening N
sessions through shared memory, then N through gRPC (each set stepped once, then closed).

The evaluator runs as its own process (``ale-robotics evaluator serve``, Unix sockets), as it
does under the harness, so client and server do not share a GIL; ``--in-process`` starts it in
this process instead. The target is ``batched >= 1.0 x raw_vector`` on every MuJoCo task (a
batched session steps its envs natively: ``rollouts/mujoco_rollout/stepper.py``), so that a
remote vector env costs no more than the one the agent would otherwise step locally.

Usage::

    python benchmarks/interactive.py [--task ID|all] [--num-envs 64] [--rounds 5]
                                     [--seconds 1.5] [--slice 0.25] [--json]
    python benchmarks/interactive.py --memory 100 [--task ID] [--json]

``--task`` may be given more than once; ``all`` is every interactive task of Gymnasium's
MuJoCo envs (``simulator.package`` "mujoco"), each measured with its own evaluator.

With ``--json`` the last line is one JSON object with the keys ``raw_steps_per_s``,
``raw_vector_steps_per_s``, ``unary_steps_per_s``, ``batched64_steps_per_s`` (the last named
after 64 envs whatever ``--num-envs`` is; medians), plus ``num_envs``, the ratios (median,
min and max over the rounds) and every round's figures. With several tasks it is
``{"tasks": {ID: that object, ...}, "min_batched_vs_raw_vector": ...}``.

Every row measured in blocks also reports the CPU an env step cost, split into this
process (the client) and the evaluator's process, from ``/proc`` (``cpu_us_per_step``):
the one-env rows print it beside their latency, to be read against the client and server
CPU of a bare gRPC round trip (``benchmarks/grpc_floor.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium as gym
import numpy as np

from ale_robotics.client import AleClient, RemoteEnv, RemoteVectorEnv, StepTransport
from ale_robotics.errors import AleError
from ale_robotics.tasks import TaskMode, TaskSpec, default_registry

DEFAULT_TASK = "td3-inverted-double-pendulum-v1"
TARGET = 1.0
"""batched / raw_vector on every MuJoCo interactive task (issue 19)."""


def _actions(space: Any, n: int, seed: int = 0) -> np.ndarray:
    """Pre-drawn uniform actions, so no measurement pays for the RNG."""
    rng = np.random.default_rng(seed)
    return rng.uniform(space.low, space.high, (n, *space.shape)).astype(space.dtype)


def _run_for(step: Callable[[int], int], seconds: float, i: int, batch: int) -> tuple[int, float]:
    """Call ``step(i), step(i + 1), ...`` in batches until ``seconds`` passed: (steps, wall)."""
    done, t0 = 0, time.perf_counter()
    while True:
        for _ in range(batch):
            done += step(i)
            i += 1
        wall = time.perf_counter() - t0
        if wall >= seconds:
            return done, wall


_TICK = os.sysconf("SC_CLK_TCK")


def _children_cpu_s(pid: int) -> float:
    """CPU seconds (user + system, every thread) of ``pid``'s descendants now running: the
    evaluator, when it is this process's child."""
    total = 0.0
    todo = [int(c) for t in Path(f"/proc/{pid}/task").iterdir() for c in _children(t)]
    while todo:
        child = todo.pop()
        try:
            stat = Path(f"/proc/{child}/stat").read_text()
            todo += [int(c) for t in Path(f"/proc/{child}/task").iterdir() for c in _children(t)]
        except OSError:  # exited meanwhile
            continue
        total += sum(int(x) for x in stat[stat.rfind(")") + 2 :].split()[11:13]) / _TICK
    return total


def _children(task: Path) -> list[str]:
    try:
        return (task / "children").read_text().split()
    except OSError:
        return []


def _cpu_now() -> tuple[float, float]:
    """``(this process, its descendants)`` CPU seconds so far."""
    return time.process_time(), _children_cpu_s(os.getpid())


def _timed(
    step: Callable[[int], int], seconds: float, warmup: int = 20
) -> tuple[float, float, float]:
    """Env steps per second of ``step(i) -> env steps done``, run for about ``seconds``, and
    the CPU µs an env step cost this process (the client) and its children (the evaluator,
    when it runs as one; 0 with ``--in-process``, whose evaluator is in the client's figure)."""
    for i in range(warmup):
        step(i)
    own0, kids0 = _cpu_now()
    done, wall = _run_for(step, seconds, warmup, 50)
    own1, kids1 = _cpu_now()
    return done / wall, (own1 - own0) * 1e6 / done, (kids1 - kids0) * 1e6 / done


Bench = tuple[Callable[[int], int], Callable[[], None]]
"""``(step(i) -> env steps done, close())``: an env set up once, measured in every round."""


def bench_raw(task: TaskSpec) -> Bench:
    env = gym.make(task.env.gym_id, max_episode_steps=task.env.max_episode_steps)
    acts = _actions(env.action_space, 4096)
    env.reset(seed=0)

    def step(i: int) -> int:
        _, _, term, trunc, _ = env.step(acts[i % len(acts)])
        if term or trunc:
            env.reset()
        return 1

    return step, env.close


def bench_raw_vector(task: TaskSpec, n: int) -> Bench:
    env = gym.vector.SyncVectorEnv(
        [lambda: gym.make(task.env.gym_id, max_episode_steps=task.env.max_episode_steps)] * n
    )
    acts = _actions(env.single_action_space, 256 * n).reshape(256, n, -1)
    env.reset(seed=0)

    def step(i: int) -> int:
        env.step(acts[i % len(acts)])
        return n

    return step, env.close


def bench_single(client: AleClient, transport: StepTransport) -> Bench:
    env = RemoteEnv(client, transport=transport)
    assert env.transport == transport, f"asked for {transport}, got {env.transport}"
    acts = _actions(env.action_space, 4096)
    env.reset(seed=0)

    def step(i: int) -> int:
        _, _, term, trunc, _ = env.step(acts[i % len(acts)])
        if term or trunc:
            env.reset()
        return 1

    return step, env.close


def bench_batched(client: AleClient, n: int, transport: StepTransport) -> Bench:
    env = RemoteVectorEnv(client, num_envs=n, transport=transport)
    assert env.transport == transport, f"asked for {transport}, got {env.transport}"
    acts = _actions(env.single_action_space, 256 * n).reshape(256, n, -1)
    env.reset(seed=0)

    def step(i: int) -> int:
        env.step(acts[i % len(acts)])
        return n

    return step, env.close


def _timed_group(fns: list[Callable[[int], int]], seconds: float, slice_s: float) -> list[float]:
    """Steps/s of each of ``fns``, alternating every ``slice_s`` until each ran ``seconds``.

    Alternating every fraction of a second (AB, then BA, ...) puts them under the same
    machine conditions, where a block of seconds each would not (see :func:`measure`).
    """
    steps, walls = [0] * len(fns), [0.0] * len(fns)
    k = 0
    while min(walls) < seconds:
        order = range(len(fns)) if k % 2 == 0 else reversed(range(len(fns)))
        for j in order:
            done, wall = _run_for(fns[j], slice_s, k * 1000, 5)
            steps[j] += done
            walls[j] += wall
        k += 1
    return [s / w for s, w in zip(steps, walls, strict=True)]


def measure(
    benches: dict[str, Bench],
    rounds: int,
    seconds: float,
    groups: list[tuple[str, ...]],
    slice_s: float,
) -> dict[str, list[float]]:
    """Steps/s of every bench in each of ``rounds`` rounds.

    On a shared 2-core machine the speed of everything drifts by 20% or more within
    a minute. So the benches of each of ``groups`` (whose ratios are the targets) run
    in alternating slices of ``slice_s`` (a fraction of a second) in every round, and
    the report takes the median of the per-round ratios; the others run one block
    of ``seconds`` each per round, for the medians only. Every bench also runs one
    block per round for its CPU per step (client and evaluator, from ``/proc``).
    """
    out: dict[str, list[float]] = {name: [] for name in benches}
    grouped = {name for group in groups for name in group}
    for _ in range(rounds):
        for name in benches:
            rate, client_us, evaluator_us = _timed(benches[name][0], seconds / 2)
            if name not in grouped:
                out[name].append(rate)
            out.setdefault(f"{name}_client_cpu_us", []).append(client_us)
            out.setdefault(f"{name}_evaluator_cpu_us", []).append(evaluator_us)
        for group in groups:
            for name in group:
                for i in range(20):  # warm up after the other benches ran
                    benches[name][0](i)
            rates = _timed_group([benches[n][0] for n in group], seconds, slice_s)
            for name, rate in zip(group, rates, strict=True):
                out[name].append(rate)
    return out


@contextlib.contextmanager
def evaluator(task_id: str, in_process: bool, max_sessions: int = 0) -> Iterator[AleClient]:
    """An evaluator serving the task on a Unix socket, and an agent client for it
    (``max_sessions``: the evaluator's --max-sessions and --max-sessions-total, if set)."""
    with tempfile.TemporaryDirectory(prefix="ale-bench-") as d:
        state, addr = Path(d) / "state", f"unix://{d}/agent.sock"
        if in_process:
            from ale_robotics.evaluator import EvaluatorConfig, serve

            running = serve(
                EvaluatorConfig(state, None, task_id=task_id, workers=1),
                agent_listen=addr,
                harness_listen=f"unix://{d}/harness.sock",
            )
            try:
                yield AleClient(running.agent_address, running.agent_token, task_id=task_id)
            finally:
                running.stop()
            return
        cmd = [sys.executable, "-m", "ale_robotics", "evaluator", "serve", "--state-dir"]
        cmd += [str(state), "--agent-listen", addr, "--harness-listen", f"unix://{d}/h.sock"]
        # Practice outside any run: the operator's practice token (issue 26), not agent.token.
        cmd += ["--task", task_id, "--allow-practice-without-run"]
        if max_sessions:
            cmd += ["--max-sessions", str(max_sessions), "--max-sessions-total", str(max_sessions)]
        proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
        try:
            yield _connect(state / "practice.token", addr, task_id, proc)
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def _connect(token: Path, addr: str, task_id: str, proc: subprocess.Popen[bytes]) -> AleClient:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the evaluator exited with code {proc.returncode}")
        if token.exists() and Path(addr.removeprefix("unix://")).exists():
            client = AleClient(addr, token.read_text().strip(), task_id=task_id)
            try:
                client.get_spec()
                return client
            except AleError:
                client.close()
        time.sleep(0.2)
    raise SystemExit("the evaluator did not come up within 120 s")


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise SystemExit(f"no VmRSS for process {pid}")


def _child_pid() -> int:
    kids = [int(c) for t in Path(f"/proc/{os.getpid()}/task").iterdir() for c in _children(t)]
    if len(kids) != 1:
        raise SystemExit(f"expected one evaluator process, found {kids}")
    return kids[0]


def measure_memory(task: TaskSpec, n: int) -> dict[str, Any]:
    """Resident memory of ``n`` open one-env sessions, shared memory against gRPC: each set
    on a fresh evaluator (so no set reuses memory another freed), warmed by one session
    opened and closed; ``VmRSS`` of the evaluator and of this process before and after
    opening the ``n`` (each stepped once, so every buffer is touched); in the order shm,
    gRPC, gRPC, shm."""
    import gc

    out: dict[str, list[dict[str, Any]]] = {"shm": [], "stream": []}
    for transport in ("shm", "stream", "stream", "shm"):
        with evaluator(task.id, in_process=False, max_sessions=n + 2) as client:
            pid = _child_pid()
            warm = RemoteEnv(client, transport=transport)
            warm.reset(seed=0)
            warm.step(warm.action_space.sample())
            warm.close()
            gc.collect()
            time.sleep(1.0)
            ev0, me0 = _rss_kib(pid), _rss_kib(os.getpid())
            envs = [RemoteEnv(client, transport=transport) for _ in range(n)]
            for env in envs:
                env.reset(seed=0)
                env.step(env.action_space.sample())
            used = sorted({env.transport for env in envs})
            time.sleep(1.0)
            ev1, me1 = _rss_kib(pid), _rss_kib(os.getpid())
            for env in envs:
                env.close()
            del envs
            gc.collect()
            client.close()
        out[transport].append(
            {
                "evaluator_kib_per_session": (ev1 - ev0) / n,
                "client_kib_per_session": (me1 - me0) / n,
                "evaluator_kib": [ev0, ev1],
                "transports": used,
            }
        )
        print(
            f"  {n} sessions over {transport:<6} ({'/'.join(used)}): evaluator "
            f"+{(ev1 - ev0) / n:,.0f} KiB, client +{(me1 - me0) / n:,.0f} KiB a session"
        )
    return {"task_id": task.id, "sessions": n, "rss": out}


def mujoco_interactive_tasks() -> list[TaskSpec]:
    """Every interactive task of a Gymnasium MuJoCo env (not Meta-World's or dm_control's)."""
    reg = default_registry()
    return [
        e.spec
        for e in reg
        if e.spec.mode is TaskMode.INTERACTIVE and e.spec.simulator.package == "mujoco"
    ]


def measure_task(task: TaskSpec, args: argparse.Namespace) -> dict[str, Any]:
    """Every bench for one task (its own evaluator), printed; the JSON object of the task."""
    n = args.num_envs
    benches = {"raw": bench_raw(task), "raw_vector": bench_raw_vector(task, n)}
    with evaluator(task.id, args.in_process) as client:
        benches["unary"] = bench_single(client, "unary")
        benches["stream"] = bench_single(client, "stream")
        benches["shm"] = bench_single(client, "shm")
        benches["batched_unary"] = bench_batched(client, n, "unary")
        benches["batched"] = bench_batched(client, n, "stream")
        benches["batched_shm"] = bench_batched(client, n, "shm")
        groups = [("raw_vector", "batched", "batched_shm"), ("raw", "shm")]
        try:
            runs = measure(benches, args.rounds, args.seconds, groups, args.slice)
        finally:
            for _, close in benches.values():
                close()
            client.close()
    med = {name: statistics.median(v) for name, v in runs.items()}

    def per_round(a: str, b: str) -> list[float]:
        return [x / y for x, y in zip(runs[a], runs[b], strict=True)]

    ratios = per_round("batched", "raw_vector")
    ratio = statistics.median(ratios)
    shm_ratios = per_round("batched_shm", "raw_vector")
    one_ratios = per_round("raw", "shm")  # how many times Gymnasium's own step it takes
    unary_ratio = statistics.median(per_round("batched_unary", "raw_vector"))
    rows = [
        ("raw env (in-process, 1 env)", med["raw"], ""),
        (f"raw vector env (SyncVectorEnv, {n} envs)", med["raw_vector"], ""),
        ("unary Step over gRPC (1 env)", med["unary"], f"{med['unary'] / med['raw']:.2f} x raw"),
        ("StepStream over gRPC (1 env)", med["stream"], f"{med['stream'] / med['raw']:.2f} x raw"),
        ("shared memory (1 env)", med["shm"], f"{statistics.median(one_ratios):.2f} x raw time"),
        (f"batched unary Step ({n} envs)", med["batched_unary"], f"{unary_ratio:.2f} x raw vector"),
        (f"batched StepStream ({n} envs)", med["batched"], f"{ratio:.2f} x raw vector"),
        (
            f"batched shared memory ({n} envs)",
            med["batched_shm"],
            f"{statistics.median(shm_ratios):.2f} x raw vector",
        ),
    ]
    where = "this process" if args.in_process else "its own process"
    print(
        f"task {task.id} ({task.env.gym_id}), evaluator in {where}, {os.cpu_count()} CPUs, "
        f"medians of {args.rounds} rounds of {args.seconds:g} s per row (SyncVectorEnv and "
        f"batched StepStream alternating every {args.slice:g} s)"
    )
    for name, value, note in rows:
        print(f"  {name:<42} {value:>10,.0f} steps/s  {note}")
    for name in ("raw", "unary", "stream", "shm"):  # each line < 80 columns
        evaluator_us, client_us = med[f"{name}_evaluator_cpu_us"], med[f"{name}_client_cpu_us"]
        print(
            f"  one env, {name}: {1e3 / med[name]:.3f} ms/step, CPU/step: evaluator "
            f"{evaluator_us:,.0f} µs, client {client_us:,.0f} µs"
        )
    print("  (the gRPC floor under those: python benchmarks/grpc_floor.py)")
    print(f"  batched StepStream / raw vector per round: {' '.join(f'{r:.2f}' for r in ratios)}")
    print(f"  batched shm / raw vector per round: {' '.join(f'{r:.2f}' for r in shm_ratios)}")
    print(f"  one env, shm time / raw time per round: {' '.join(f'{r:.2f}' for r in one_ratios)}")
    print(
        f"  target: batched >= {TARGET:.2f} x raw vector -> {ratio:.2f} (median of the rounds; "
        f"min {min(ratios):.2f}, max {max(ratios):.2f})"
    )
    return {
        "task_id": task.id,
        "num_envs": n,
        "rounds": args.rounds,
        "slice_s": args.slice,
        "raw_steps_per_s": med["raw"],
        "raw_vector_steps_per_s": med["raw_vector"],
        "unary_steps_per_s": med["unary"],
        "stream_steps_per_s": med["stream"],
        "batched64_steps_per_s": med["batched"],
        "batched64_unary_steps_per_s": med["batched_unary"],
        "unary_vs_raw": med["unary"] / med["raw"],
        "stream_ms_per_step": 1e3 / med["stream"],
        "unary_ms_per_step": 1e3 / med["unary"],
        "cpu_us_per_step": {
            name: {
                "client": med[f"{name}_client_cpu_us"],
                "evaluator": med[f"{name}_evaluator_cpu_us"],
            }
            for name in benches
        },
        "batched_vs_raw_vector": ratio,
        "batched_vs_raw_vector_min": min(ratios),
        "batched_vs_raw_vector_max": max(ratios),
        "batched_unary_vs_raw_vector": unary_ratio,
        "batched_vs_raw_vector_per_round": ratios,
        "shm_steps_per_s": med["shm"],
        "shm_ms_per_step": 1e3 / med["shm"],
        "shm_time_vs_raw": statistics.median(one_ratios),
        "shm_time_vs_raw_per_round": one_ratios,
        "batched64_shm_steps_per_s": med["batched_shm"],
        "batched_shm_vs_raw_vector": statistics.median(shm_ratios),
        "batched_shm_vs_raw_vector_per_round": shm_ratios,
        "per_round_steps_per_s": {k: v for k, v in runs.items() if k in benches},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--task",
        action="append",
        help=f"a task id, or 'all' (repeatable; default {DEFAULT_TASK})",
    )
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--rounds", type=int, default=5, help="Interleaved rounds (medians reported).")
    p.add_argument("--seconds", type=float, default=1.5, help="Per measurement per round.")
    p.add_argument(
        "--slice",
        type=float,
        default=0.25,
        help="The vector env and the batched session alternate every this many seconds.",
    )
    p.add_argument("--in-process", action="store_true", help="Evaluator in this process.")
    p.add_argument("--memory", type=int, default=0, metavar="N", help="RSS of N open sessions.")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if args.memory:
        task = default_registry().get((args.task or [DEFAULT_TASK])[0])
        print(f"task {task.id}: resident memory of {args.memory} open one-env sessions")
        doc = measure_memory(task, args.memory)
        if args.json:
            print(json.dumps(doc))
        return
    tasks: list[TaskSpec] = []
    for name in args.task or [DEFAULT_TASK]:
        for task in mujoco_interactive_tasks() if name == "all" else [default_registry().get(name)]:
            if task.id not in {t.id for t in tasks}:
                tasks.append(task)
    docs = {task.id: measure_task(task, args) for task in tasks}
    worst = min(d["batched_vs_raw_vector"] for d in docs.values())
    if len(docs) > 1:
        print(f"lowest batched / raw vector over {len(docs)} tasks: {worst:.2f}")
    if args.json:
        one = next(iter(docs.values()))
        print(
            json.dumps(
                one if len(docs) == 1 else {"tasks": docs, "min_batched_vs_raw_vector": worst}
            )
        )


if __name__ == "__main__":
    main()
