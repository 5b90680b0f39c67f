"""The floor under every remote Step: a bare Python gRPC echo between two processes.

An echo server (generic handlers, no interceptors, no protobuf) in its own process
on a Unix socket, and this process calling it: unary calls, and messages on one
bidi stream read back in the caller's thread (as ``StepStream`` does). Whatever
``benchmarks/interactive.py`` measures above the in-process vector env, beyond
these figures, is the evaluator's own work.

Usage::

    python benchmarks/grpc_floor.py [--calls 3000] [--bytes 5000] [--server-work-us 0] [--json]

``--server-work-us 4000`` has the server compute (spin) that long before each answer, as a
64-env Step of a light task does: the client's threads then go idle between messages, and
waking them is part of the round trip (subtract the work from the figures).

``--session TASK [--num-envs N]`` has the server do a session's real work instead: each
request is a real ``StepRequest`` (random actions), answered with what a practice session
of the task's N envs (default 1) returns, encoded as the evaluator does
(``Session.step`` and ``step_response``), and nothing else: no servicer, no auth, no
session manager, no interceptors. What the evaluator takes above this is theirs; this
is the least a remote Step of that task can take with the session's Python as it is.
(Measured so, a one-env Hopper step costs the server as much CPU as it costs the whole
evaluator: the session's step, warm in a loop ~160 µs, costs ~300 µs between gRPC's
messages, whose work leaves the caches cold.)
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import grpc

_SERVE = """
same = lambda b: b
server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("echo.Echo", {
    "Unary": grpc.unary_unary_rpc_method_handler(unary, same, same),
    "Bidi": grpc.stream_stream_rpc_method_handler(bidi, same, same),
})])
server.add_insecure_port(sys.argv[1])
server.start()
server.wait_for_termination()
"""
"""How both servers end: their ``unary`` and ``bidi`` served on ``sys.argv[1]``."""

SERVER = (
    """
import sys, time
from concurrent import futures
import grpc
work_s = float(sys.argv[2]) / 1e6
def busy():
    end = time.perf_counter() + work_s
    while time.perf_counter() < end:
        pass
def unary(request, context):
    busy()
    return request
def bidi(requests, context):
    for r in requests:
        busy()
        yield r
"""
    + _SERVE
)

SESSION_SERVER = (
    """
import sys
from concurrent import futures
import grpc
from ale_robotics.evaluator.server.messages import step_response
from ale_robotics.evaluator.sessions.envs import make_envs
from ale_robotics.evaluator.sessions.types import SessionKind
from ale_robotics.evaluator.sessions.vector import Session
from ale_robotics.tasks import default_registry
from ale_robotics.tensors import from_tensor
from ale_robotics.v1 import ale_env_pb2 as pb
task = default_registry().get(sys.argv[2])
session = Session("floor", task, SessionKind.PRACTICE, make_envs(task, int(sys.argv[3])))
session.reset([0])
def answer(body):
    request = pb.StepRequest.FromString(body)
    batch = session.step(from_tensor(request.action, "action"))
    return step_response(batch).SerializeToString()
def unary(request, context):
    return answer(request)
def bidi(requests, context):
    for r in requests:
        yield answer(r)
"""
    + _SERVE
)


def _step_requests(task_id: str, n: int) -> list[bytes]:
    """256 serialized ``StepRequest`` of ``n`` envs of the task, random actions."""
    import numpy as np

    from ale_robotics.envs.make import make_env
    from ale_robotics.tasks import default_registry
    from ale_robotics.tensors import to_tensor
    from ale_robotics.v1 import ale_env_pb2 as pb

    env = make_env(default_registry().get(task_id).env, time_limit=False)
    space = env.action_space
    env.close()
    rng = np.random.default_rng(0)
    actions = rng.uniform(space.low, space.high, (256, n, *space.shape)).astype(space.dtype)
    session = "sess-" + "0" * 32
    return [
        pb.StepRequest(session_id=session, action=to_tensor(a)).SerializeToString() for a in actions
    ]


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=3000)
    p.add_argument("--bytes", type=int, default=5000, help="Payload (a 64-env IDP Step: ~5 kB).")
    p.add_argument(
        "--server-work-us", type=float, default=0.0, help="Server spins this long per answer."
    )
    p.add_argument("--session", metavar="TASK", help="The server steps a session of TASK.")
    p.add_argument("--num-envs", type=int, default=1, help="The --session's envs.")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    payloads = [b"x" * args.bytes]
    with tempfile.TemporaryDirectory(prefix="ale-echo-") as d:
        addr = f"unix://{d}/echo.sock"
        if args.session:
            payloads = _step_requests(args.session, args.num_envs)
            argv = [SESSION_SERVER, addr, args.session, str(args.num_envs)]
        else:
            argv = [SERVER, addr, str(args.server_work_us)]
        server = subprocess.Popen([sys.executable, "-c", *argv])
        try:
            while not Path(f"{d}/echo.sock").exists():
                if server.poll() is not None:
                    raise SystemExit(f"the server exited with code {server.returncode}")
                time.sleep(0.05)
            with grpc.insecure_channel(addr) as ch:
                unary = ch.unary_unary("/echo.Echo/Unary")
                requests: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
                stream = ch.stream_stream("/echo.Echo/Bidi")(iter(requests.get, None))

                def streamed(body: bytes) -> bytes:
                    requests.put(body)
                    return next(stream)  # type: ignore[no-any-return]

                out = {}
                for name, call in (("unary", unary), ("stream", streamed)):
                    for i in range(200):
                        call(payloads[i % len(payloads)])
                    t0, c0, s0 = time.perf_counter(), time.process_time(), _cpu_s(server.pid)
                    for i in range(args.calls):
                        call(payloads[i % len(payloads)])
                    wall = time.perf_counter() - t0
                    out[name] = {
                        "wall_us": wall / args.calls * 1e6,
                        "client_cpu_us": (time.process_time() - c0) / args.calls * 1e6,
                        "server_cpu_us": (_cpu_s(server.pid) - s0) / args.calls * 1e6,
                        "response_bytes": len(last := call(payloads[0])),
                    }
                    if args.session:
                        out[name]["observation_shape"] = _observation_shape(last)
                requests.put(None)
        finally:
            server.terminate()
            server.wait(timeout=10)
    if args.session:
        what = (
            f"a bare Python gRPC server stepping a session of {args.session} "
            f"({args.num_envs} env(s)): Session.step + step_response only"
        )
    else:
        what = (
            f"bare Python gRPC echo, {args.bytes} B each way, "
            f"{args.server_work_us:g} us of server work per call"
        )
    print(textwrap.fill(f"{what}, {args.calls} calls, {os.cpu_count()} CPUs", 80))
    for name, r in out.items():
        cpu = f"client CPU {r['client_cpu_us']:.0f} us, server CPU {r['server_cpu_us']:.0f} us"
        print(f"  {name:<7} {r['wall_us']:7.0f} us a round trip  ({cpu})")
    print(f"  stream / unary round trip: {out['stream']['wall_us'] / out['unary']['wall_us']:.2f}")
    if args.json:
        print(json.dumps(out))


def _observation_shape(response: bytes) -> list[int]:
    """The observation shape a session's answer carries (what the test checks it stepped)."""
    from ale_robotics.v1 import ale_env_pb2 as pb

    return list(pb.StepResponse.FromString(response).observation.shape)


if __name__ == "__main__":
    main()
