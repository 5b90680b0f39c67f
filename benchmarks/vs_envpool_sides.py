"""The sides that ``benchmarks/vs_envpool.py`` alternates, and their CPU accounting.

Every side has ``slice(seconds) -> {"steps", "episodes", "wall", "cpu"}``: it runs for about
``seconds`` and reports the CPU its process tree spent meanwhile, read from ``/proc``
(utime + stime of every process of the tree, which sums all of its threads, plus the
cutime + cstime of children reaped meanwhile). Ours is this process with its worker
processes, less EnvPool's child; EnvPool's is that child's tree. A side idles (no CPU)
while the other runs: the pool's workers wait on a pipe, EnvPool's threads on its queue.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Protocol

import gymnasium as gym
import mujoco
import numpy as np
from batch_eval import load_policy, with_layout
from interactive import evaluator

from ale_robotics.client import RemoteVectorEnv
from ale_robotics.evaluator.execution import LocalExecutor
from ale_robotics.rollouts.mlp import MLPPolicy
from ale_robotics.tasks import TaskSpec, default_registry

__all__ = [
    "FloorSide",
    "GymSide",
    "OurBatchSide",
    "OurInteractiveSide",
    "PeerSide",
    "Side",
    "record_replay",
]

_TICK = os.sysconf("SC_CLK_TCK")
_PEERS: set[int] = set()
"""EnvPool children: left out of our side's tree."""


def tree_cpu(root: int, exclude: set[int]) -> float:
    """CPU seconds (user + system, threads and reaped children included) of ``root``'s
    process tree, less the subtrees of ``exclude``."""
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:  # exited meanwhile
            continue
        f = stat[stat.rfind(")") + 2 :].split()
        parent[int(entry)] = int(f[1])
        cpu[int(entry)] = sum(int(x) for x in f[11:15]) / _TICK
    total = 0.0
    for pid in cpu:
        p = pid
        while p not in (root, 0, 1) and p not in exclude:
            p = parent.get(p, 0)
        if p == root and pid not in exclude:
            total += cpu[pid]
    return total


class Side(Protocol):
    def slice(self, seconds: float) -> dict[str, float]: ...
    def close(self) -> None: ...


def _timed(run: Any, root: int, exclude: set[int]) -> dict[str, float]:
    cpu0 = tree_cpu(root, exclude)
    got: dict[str, float] = run()
    got["cpu"] = tree_cpu(root, exclude) - cpu0
    return got


def _mujoco_lib() -> str:
    return str(next(Path(mujoco.__file__).parent.glob("libmujoco.so*")))


def torch_init(task: TaskSpec) -> dict[str, np.ndarray]:
    """Random weights as PyTorch's ``nn.Linear`` draws them: U(±1/sqrt(fan_in))."""
    assert task.contract is not None
    rng = np.random.default_rng(0)
    out = {}
    for r in task.contract.tensors:
        fan_in = (
            r.shape[1]
            if len(r.shape) == 2
            else next(
                t.shape[1]
                for t in task.contract.tensors
                if t.key == r.key.replace("bias", "weight")
            )
        )
        bound = 1 / math.sqrt(fan_in)
        out[r.key] = rng.uniform(-bound, bound, r.shape).astype(r.dtype)
    return out


class OurBatchSide:
    """The evaluator's native batch pipeline, warm: jobs of ``episodes`` episodes on a
    :class:`LocalExecutor` of ``workers`` processes, as ``batch_eval.py`` drives it."""

    def __init__(self, task_id: str, policy: str, episodes: int, workers: int) -> None:
        task = default_registry().get(task_id)
        self.per_shard = math.ceil(episodes / workers)
        self.task = with_layout(task, episodes, self.per_shard)
        self.gym_id = task.env.gym_id
        if policy == "random":
            self.weights = torch_init(task)
        else:
            self.weights, source = load_policy(task)
            assert policy in source or (policy == "fixed" and "random" in source), source
        self.env = gym.make(self.gym_id, max_episode_steps=task.env.max_episode_steps)
        assert task.policy is not None
        self.mlp = MLPPolicy(task.policy, self.weights, self.env.action_space.high)
        self.mujoco_lib = _mujoco_lib()
        self.episodes, self.seed = episodes, 1000
        self.pool = LocalExecutor(workers)
        self.pool.run(self.task, self.weights, [10_000 + i for i in range(episodes)])  # warm

    def act(self, obs: np.ndarray) -> np.ndarray:
        return self.mlp(obs)

    def slice(self, seconds: float) -> dict[str, float]:
        def run() -> dict[str, float]:
            steps = episodes = 0
            t0 = time.perf_counter()
            while (wall := time.perf_counter() - t0) < seconds:
                seeds = list(range(self.seed, self.seed + self.episodes))
                self.seed += self.episodes
                outcomes = self.pool.run(self.task, self.weights, seeds)
                steps += sum(o.length for o in outcomes)
                episodes += len(outcomes)
            return {"steps": steps, "episodes": episodes, "wall": wall}

        return _timed(run, os.getpid(), _PEERS)

    def write_policy(self, path: Path) -> str:
        """The MLP as EnvPool's side reads it (x @ w + b layout)."""
        arch = self.task.policy
        assert arch is not None
        layers = {}
        for i, n in enumerate(arch.layer_names):
            layers[f"w{i}"] = self.weights[f"{n}.weight"].T.astype(np.float32)
            layers[f"b{i}"] = self.weights[f"{n}.bias"].astype(np.float32)
        np.savez(
            path,
            **layers,
            hidden=np.array(arch.activation),
            out_tanh=np.array(arch.output_activation == "tanh"),
            high=np.asarray(self.env.action_space.high, dtype=np.float32),
        )
        return str(path)

    def check_same_policy(self, peer: PeerSide, tmp: Path) -> None:
        """Both sides' MLPs give the same actions on random observations, or stop."""
        obs = np.random.default_rng(1).standard_normal((16, self.env.observation_space.shape[0]))
        np.save(tmp / "obs.npy", obs)
        peer.request("act", obs=str(tmp / "obs.npy"), out=str(tmp / "act.npy"))
        if not np.allclose(np.load(tmp / "act.npy"), self.mlp(obs), rtol=1e-5, atol=1e-6):
            raise SystemExit(f"{self.gym_id}: EnvPool's side computes another policy")

    def check_spaces(self, spaces: dict[str, Any]) -> None:
        check_spaces(self.env, spaces)

    def policy_costs(self, peer: PeerSide) -> dict[str, float]:
        """CPU µs per row of the MLP at each side's batch size (shard size; EnvPool's 32)."""
        dim = self.env.observation_space.shape[0]
        obs = np.random.default_rng(0).standard_normal((self.per_shard, dim))
        self.mlp(obs)
        calls, t0 = 0, time.thread_time()
        while (cpu := time.thread_time() - t0) < 0.5:
            self.mlp(obs)
            calls += 1
        theirs = peer.request("policy", rows=32, obs_dim=dim, seconds=0.5)
        return {"ours": cpu / (calls * self.per_shard) * 1e6, "envpool": theirs["us_per_row"]}

    def close(self) -> None:
        self.pool.shutdown()
        self.env.close()


def check_spaces(env: Any, spaces: dict[str, Any]) -> None:
    mine = (env.observation_space.shape[0], env.action_space.shape[0])
    if mine != (spaces["obs_dim"], spaces["act_dim"]):
        raise SystemExit(f"observation/action sizes differ: ours {mine}, EnvPool's {spaces}")


class _VectorSide:
    """A vector env stepped with pre-drawn random actions (``step`` set by the subclass)."""

    env: Any
    n: int
    mujoco_lib = _mujoco_lib()

    def _init(self, task: TaskSpec, n: int, space: Any) -> None:
        self.task, self.gym_id, self.n = task, task.env.gym_id, n
        rng = np.random.default_rng(0)
        self.actions = rng.uniform(space.low, space.high, (256, n, *space.shape))
        self.actions = self.actions.astype(space.dtype)
        self.i = 0
        self.rng = np.random.default_rng(1)
        self.single = gym.make(self.gym_id, max_episode_steps=task.env.max_episode_steps)

    def act(self, obs: np.ndarray) -> np.ndarray:
        space = self.single.action_space
        return self.rng.uniform(space.low, space.high, (len(obs), *space.shape))

    def slice(self, seconds: float) -> dict[str, float]:
        def run() -> dict[str, float]:
            steps = episodes = 0
            t0 = time.perf_counter()
            while (wall := time.perf_counter() - t0) < seconds:
                for _ in range(5):
                    _, _, term, trunc, _ = self.env.step(self.actions[self.i % 256])
                    self.i += 1
                    steps += self.n
                    episodes += int(np.count_nonzero(term | trunc))
            return {"steps": steps, "episodes": episodes, "wall": wall}

        return _timed(run, os.getpid(), _PEERS)

    def check_spaces(self, spaces: dict[str, Any]) -> None:
        check_spaces(self.single, spaces)

    def policy_costs(self, peer: PeerSide) -> dict[str, float]:
        return {"ours": 0.0, "envpool": 0.0}  # pre-drawn actions: no policy


class OurInteractiveSide(_VectorSide):
    """A batched ``RemoteVectorEnv`` on a practice session of an evaluator in its own
    process, as the harness runs it (``interactive.py``'s; a child of this process, so its
    CPU counts on our side): over gRPC (``StepStream``), or through the shared-memory data
    plane (``transport="shm"``, the SDK's default on the evaluator's host)."""

    def __init__(self, task_id: str, n: int, transport: str = "stream") -> None:
        task = default_registry().get(task_id)
        self._stack = contextlib.ExitStack()
        self.client = self._stack.enter_context(evaluator(task_id, in_process=False))
        self.env = RemoteVectorEnv(self.client, num_envs=n, transport=transport)  # type: ignore[arg-type]
        assert self.env.transport == transport, self.env.transport
        self.env.reset(seed=0)
        self._init(task, n, self.env.single_action_space)
        self.slice(0.2)  # warm-up

    def close(self) -> None:
        self.env.close()
        self.client.close()
        self._stack.close()
        self.single.close()


class GymSide(_VectorSide):
    """Gymnasium's ``SyncVectorEnv`` of ``n`` envs in this process."""

    def __init__(self, task: TaskSpec, n: int) -> None:
        limit = task.env.max_episode_steps
        self.env = gym.vector.SyncVectorEnv(
            [lambda: gym.make(task.env.gym_id, max_episode_steps=limit)] * n
        )
        self.env.reset(seed=0)
        self._init(task, n, self.env.single_action_space)

    def close(self) -> None:
        self.env.close()
        self.single.close()


def record_replay(side: Any, steps: int) -> tuple[dict[str, np.ndarray], str, int]:
    """Episodes of ``side``'s policy on Gymnasium's env (qpos/qvel before each step, actions) until
    ``steps`` steps, for the physics replay; with the env's XML and frame skip."""
    env = side.single if hasattr(side, "single") else side.env
    uw = env.unwrapped
    qpos, qvel, actions, lengths = [], [], [], []
    seed = 0
    while sum(lengths) < steps:
        obs, _ = env.reset(seed=seed)
        seed += 1
        length = 0
        while True:
            a = np.asarray(side.act(obs[None])[0], dtype=np.float64)
            qpos.append(uw.data.qpos.copy())
            qvel.append(uw.data.qvel.copy())
            actions.append(a)
            length += 1
            obs, _, term, trunc, _ = env.step(a)
            if term or trunc:
                break
        lengths.append(length)
    replay = {
        "qpos": np.array(qpos),
        "qvel": np.array(qvel),
        "actions": np.array(actions),
        "lengths": np.array(lengths),
    }
    return replay, str(uw.fullpath), int(uw.frame_skip)


_ECHO = """
import sys, time
from concurrent import futures
import grpc
work_s, reply = float(sys.argv[2]) / 1e6, b"x" * int(sys.argv[3])
def bidi(requests, context):
    for _ in requests:
        end = time.perf_counter() + work_s
        while time.perf_counter() < end:
            pass
        yield reply
same = lambda b: b
server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("echo.Echo", {
    "Bidi": grpc.stream_stream_rpc_method_handler(bidi, same, same)})])
server.add_insecure_port(sys.argv[1])
server.start()
server.wait_for_termination()
"""


def wire_sizes(task: TaskSpec, n: int) -> tuple[int, int]:
    """Bytes of one ``n``-env Step request and response of ``task`` (random actions; the
    median over some steps, resets included), as our session encodes them."""
    from ale_robotics.evaluator.server.messages import step_response
    from ale_robotics.evaluator.sessions.envs import make_envs
    from ale_robotics.evaluator.sessions.types import SessionKind
    from ale_robotics.evaluator.sessions.vector import Session
    from ale_robotics.tensors import to_tensor
    from ale_robotics.v1 import ale_env_pb2 as pb

    session = Session("sizes", task, SessionKind.PRACTICE, make_envs(task, n))
    session.reset([0])
    space = session._envs[0].action_space
    rng = np.random.default_rng(0)
    requests, responses = [], []
    for _ in range(50):
        action = rng.uniform(space.low, space.high, (n, *space.shape)).astype(space.dtype)
        request = pb.StepRequest(session_id="sess-" + "0" * 32, action=to_tensor(action))
        requests.append(request.ByteSize())
        responses.append(step_response(session.step(action)).ByteSize())
    session.close("sizes measured")
    return int(np.median(requests)), int(np.median(responses))


class FloorSide:
    """The interactive rows' ceiling: what a ``RemoteVectorEnv`` step would take with no Python
    at all beside the physics. A bare gRPC stream echo in its own process (as
    ``benchmarks/grpc_floor.py``'s) gets a request of our Step request's size, spins for
    ``work_us`` (our physics of a Step split perfectly over ``threads`` threads: the
    replay's CPU per env step x envs / threads) and answers with our Step response's
    size; each round trip counts ``n`` steps. No session, no observation or reward, no
    info, no encoding or decoding on either side: a pipeline over gRPC between two
    processes cannot be faster than this, whatever its Python."""

    def __init__(self, task: TaskSpec, n: int, work_us: float) -> None:
        import queue
        import tempfile

        import grpc

        self.n, self.work_us = n, work_us
        self.request_bytes, self.response_bytes = wire_sizes(task, n)
        self._dir = tempfile.TemporaryDirectory(prefix="ale-floor-")
        sock = Path(self._dir.name) / "echo.sock"
        argv = [sys.executable, "-c", _ECHO, f"unix://{sock}", str(work_us)]
        self.server = subprocess.Popen([*argv, str(self.response_bytes)])
        while not sock.exists():
            if self.server.poll() is not None:
                raise SystemExit("the gRPC echo server exited")
            time.sleep(0.05)
        self._channel = grpc.insecure_channel(f"unix://{sock}")
        self._requests: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        bidi = self._channel.stream_stream("/echo.Echo/Bidi")
        self._stream = bidi(iter(self._requests.get, None))
        self._body = b"x" * self.request_bytes
        self.slice(0.2)  # warm-up

    def slice(self, seconds: float) -> dict[str, float]:
        def run() -> dict[str, float]:
            steps = 0
            t0 = time.perf_counter()
            while (wall := time.perf_counter() - t0) < seconds:
                self._requests.put(self._body)
                next(self._stream)
                steps += self.n
            return {"steps": steps, "episodes": 0, "wall": wall}

        return _timed(run, os.getpid(), _PEERS)

    def close(self) -> None:
        self._requests.put(None)
        self._channel.close()
        self.server.terminate()
        self.server.wait(timeout=10)
        self._dir.cleanup()


class PeerSide:
    """EnvPool's side: ``envpool_side.py`` on the peers' venv, one JSON line each way."""

    def __init__(self, python: Path, script: Path) -> None:
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        self.proc = subprocess.Popen(
            [str(python), str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        _PEERS.add(self.proc.pid)
        self.spaces: dict[str, Any] = {}

    def request(self, cmd: str, **kw: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"cmd": cmd, **kw}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"EnvPool's side exited ({self.proc.wait()}) on {cmd!r}")
        reply: dict[str, Any] = json.loads(line)
        if not reply.pop("ok"):
            raise SystemExit(f"EnvPool's side failed on {cmd!r}: {reply['error']}")
        return reply

    def setup_async(self, gym_id: str, policy: str, threads: int) -> None:
        self.spaces = self.request(
            "setup",
            mode="async",
            task=gym_id,
            num_envs=64,
            batch_size=32,
            threads=threads,
            seed=0,
            policy=policy,
        )

    def setup_sync(self, gym_id: str, n: int, threads: int) -> None:
        self.spaces = self.request(
            "setup", mode="sync", task=gym_id, num_envs=n, batch_size=n, threads=threads, seed=0
        )

    def slice(self, seconds: float) -> dict[str, float]:
        return _timed(lambda: self.request("run", seconds=seconds), self.proc.pid, set())

    def close(self) -> None:
        with contextlib.suppress(BrokenPipeError, OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        _PEERS.discard(self.proc.pid)

    def __enter__(self) -> PeerSide:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


if __name__ == "__main__":
    sys.exit("run benchmarks/vs_envpool.py")
