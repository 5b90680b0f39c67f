"""Bounded load test on loopback: concurrent interactive sessions plus batch jobs.

Starts a real evaluator (``ale-robotics evaluator serve``, its own process, Unix
sockets) not bound to a task or run, then for ``--duration`` seconds:

* ``--sessions`` client threads each open a practice session of an interactive
  task and call Reset/Step with random actions as fast as they can;
* ``--jobs`` batch submissions (each its own run id) are evaluated meanwhile.

Every call that should succeed is counted; any failure is reported with its
status. The evaluator's resident memory (its process tree, from /proc) is
sampled every second. It stops by itself.

Usage::

    python benchmarks/load.py [--sessions 50] [--jobs 10] [--duration 60] [--json]

With ``--json`` the last line is one JSON object (``failed_calls``, ``calls``,
``steps_per_s``, ``step_p50_ms``, ``step_p99_ms``, ``jobs_succeeded``,
``rss_start_mb``, ``rss_peak_mb``, ``rss_end_mb``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from ale_robotics.client import AleClient, RemoteEnv
from ale_robotics.errors import AleError
from ale_robotics.tasks import default_registry

INTERACTIVE = "td3-inverted-double-pendulum-v1"
BATCH = "td3-inverted-pendulum-v2"


def _tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and all its descendants, in MiB.

    A process's children are listed per thread that started them
    (``/proc/PID/task/TID/children``): the evaluator starts its rollout workers from a
    thread of its own, so reading only the main thread's list left them out (~85 MiB)."""
    total = 0
    todo, seen = [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return total / 1024


def _wait_for(path: Path, server: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    """Until the evaluator made ``path``; an evaluator that exited says so with its output
    (a busy host only makes the wait longer: ``timeout`` is generous)."""
    t0 = time.monotonic()
    while not path.exists():
        if server.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:]
            raise SystemExit(f"the evaluator exited ({server.returncode}) before {path}:\n{tail}")
        if time.monotonic() - t0 > timeout:
            tail = log.read_text(errors="replace")[-3000:]
            raise SystemExit(f"evaluator did not create {path} within {timeout:.0f}s:\n{tail}")
        time.sleep(0.1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=50)
    ap.add_argument("--jobs", type=int, default=10)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="ale-load-"))
    state, volume = tmp / "state", tmp / "vol"
    volume.mkdir()
    log = tmp / "evaluator.log"
    log_fh = log.open("wb")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ale_robotics",
            "evaluator",
            "serve",
            "--state-dir",
            str(state),
            "--submission-dir",
            str(volume),
            "--agent-listen",
            f"unix://{tmp}/a/agent.sock",
            "--harness-listen",
            f"unix://{tmp}/harness.sock",
            "--max-sessions",
            str(args.sessions + 4),
            "--workers",
            "1",
        ],
        stdout=log_fh,
        stderr=subprocess.STDOUT,
    )
    calls: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    transports: Counter[str] = Counter()
    latencies: list[float] = []
    lock = threading.Lock()
    stop = threading.Event()
    rss: list[float] = []
    try:
        _wait_for(state / "harness.token", server, log, timeout=120)
        _wait_for(tmp / "a" / "agent.sock", server, log, timeout=120)
        time.sleep(0.5)
        endpoint = f"unix://{tmp}/a/agent.sock"
        # A shared evaluator: every simulated agent is a run of its own, opened on the
        # harness channel, with its own token and submission directory.
        harness = AleClient(
            f"unix://{tmp}/harness.sock", (state / "harness.token").read_text().strip()
        )
        rss.append(_tree_rss_mb(server.pid))

        def session_worker(i: int) -> None:
            rng = np.random.default_rng(i)
            try:
                grant = harness.open_run(f"load-s{i}", INTERACTIVE)
                client = AleClient(
                    endpoint, grant.agent_token, task_id=INTERACTIVE, run_id=grant.run_id
                )
                env = RemoteEnv(client, kind="practice", own_client=True)
                env.reset(seed=i)
            except AleError as exc:
                with lock:
                    failures[f"open/reset: {exc.code.name}: {exc.message[:80]}"] += 1
                return
            with lock:
                calls["open+reset"] += 2
            while not stop.is_set():
                action = rng.uniform(-1, 1, env.action_space.shape).astype(np.float32)
                t0 = time.perf_counter()
                try:
                    _, _, term, trunc, _ = env.step(action)
                except AleError as exc:
                    with lock:
                        failures[f"step: {exc.code.name}: {exc.message[:80]}"] += 1
                    continue
                dt = time.perf_counter() - t0
                with lock:
                    calls["step"] += 1
                    latencies.append(dt)
                if term or trunc:
                    try:
                        env.reset()
                        with lock:
                            calls["reset"] += 1
                    except AleError as exc:
                        with lock:
                            failures[f"reset: {exc.code.name}: {exc.message[:80]}"] += 1
            with lock:  # StepStream, or unary Step once the listener's stream slots were taken
                transports[env.transport] += 1
            try:
                env.close()
                with lock:
                    calls["close"] += 1
            except AleError as exc:
                with lock:
                    failures[f"close: {exc.code.name}"] += 1

        task = default_registry().get(BATCH)
        assert task.contract is not None
        job_states: dict[str, str] = {}

        def batch_worker() -> None:
            rng = np.random.default_rng(0)
            for j in range(args.jobs):
                grant = harness.open_run(f"load-b{j}", BATCH)
                sub = Path(grant.submission_dir)
                weights = {
                    r.key: (rng.standard_normal(r.shape) * 0.1).astype(r.dtype)
                    for r in task.contract.tensors
                }
                save_file(weights, str(sub / "policy.safetensors"))
                with AleClient(
                    endpoint, grant.agent_token, task_id=BATCH, run_id=grant.run_id
                ) as c:
                    try:
                        job = c.submit(client_token=f"load-{j}")
                        st = c.wait(job, timeout_s=args.duration * 3, poll_s=0.5)
                        job_states[job] = st.state
                        with lock:
                            calls["submit+wait"] += 1
                    except (AleError, TimeoutError) as exc:
                        with lock:
                            failures[f"batch: {exc}"[:120]] += 1

        threads = [threading.Thread(target=session_worker, args=(i,)) for i in range(args.sessions)]
        threads.append(threading.Thread(target=batch_worker))
        t_start = time.monotonic()
        for t in threads:
            t.start()
        while time.monotonic() - t_start < args.duration:
            time.sleep(1.0)
            rss.append(_tree_rss_mb(server.pid))
        stop.set()
        for t in threads:
            t.join(timeout=args.duration * 3)
        elapsed = time.monotonic() - t_start
        rss.append(_tree_rss_mb(server.pid))
        harness.close()  # closes the runs it opened
    finally:
        stop.set()
        server.terminate()
        server.wait(timeout=30)
        log_fh.close()
        shutil.rmtree(tmp, ignore_errors=True)  # the state dir holds the secret and keys

    lat = np.array(latencies) * 1000 if latencies else np.zeros(1)
    out = {
        "sessions": args.sessions,
        "jobs": args.jobs,
        "duration_s": round(elapsed, 1),
        "calls": sum(calls.values()),
        "failed_calls": sum(failures.values()),
        "steps_per_s": round(calls["step"] / elapsed, 1),
        "step_p50_ms": round(float(np.percentile(lat, 50)), 2),
        "step_p99_ms": round(float(np.percentile(lat, 99)), 2),
        "sessions_by_transport": dict(transports),
        "jobs_succeeded": sum(1 for s in job_states.values() if s == "SUCCEEDED"),
        "rss_start_mb": round(rss[0], 1),
        "rss_peak_mb": round(max(rss), 1),
        "rss_end_mb": round(rss[-1], 1),
    }
    print(f"{args.sessions} practice sessions + {args.jobs} batch jobs for {elapsed:.0f}s")
    print(f"  calls ok {out['calls']}, failed {out['failed_calls']}")
    for what, n in failures.most_common(5):
        print(f"    {n} x {what}")
    print(
        f"  steps/s {out['steps_per_s']}, step latency p50 {out['step_p50_ms']} ms, "
        f"p99 {out['step_p99_ms']} ms"
    )
    print(f"  sessions by step transport: {dict(transports)}")
    print(f"  batch jobs succeeded {out['jobs_succeeded']}/{args.jobs}")
    print(
        f"  evaluator RSS start {out['rss_start_mb']} MiB, peak {out['rss_peak_mb']} MiB, "
        f"end {out['rss_end_mb']} MiB"
    )
    if args.json:
        print(json.dumps(out))
    sys.exit(0 if out["failed_calls"] == 0 and out["jobs_succeeded"] == args.jobs else 1)


if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    main()
