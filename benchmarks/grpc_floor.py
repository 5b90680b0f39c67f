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
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc

SERVER = """
import sys, time
from concurrent import futures
import grpc
same = lambda b: b
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
server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("echo.Echo", {
    "Unary": grpc.unary_unary_rpc_method_handler(unary, same, same),
    "Bidi": grpc.stream_stream_rpc_method_handler(bidi, same, same),
})])
server.add_insecure_port(sys.argv[1])
server.start()
server.wait_for_termination()
"""


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
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    payload = b"x" * args.bytes
    with tempfile.TemporaryDirectory(prefix="ale-echo-") as d:
        addr = f"unix://{d}/echo.sock"
        server = subprocess.Popen([sys.executable, "-c", SERVER, addr, str(args.server_work_us)])
        try:
            while not Path(f"{d}/echo.sock").exists():
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
                    for _ in range(200):
                        call(payload)
                    t0, c0, s0 = time.perf_counter(), time.process_time(), _cpu_s(server.pid)
                    for _ in range(args.calls):
                        call(payload)
                    wall = time.perf_counter() - t0
                    out[name] = {
                        "wall_us": wall / args.calls * 1e6,
                        "client_cpu_us": (time.process_time() - c0) / args.calls * 1e6,
                        "server_cpu_us": (_cpu_s(server.pid) - s0) / args.calls * 1e6,
                    }
                requests.put(None)
        finally:
            server.terminate()
            server.wait(timeout=10)
    print(
        f"bare Python gRPC echo, {args.bytes} B each way, {args.calls} calls, "
        f"{args.server_work_us:g} us of server work per call, {os.cpu_count()} CPUs"
    )
    for name, r in out.items():
        cpu = f"client CPU {r['client_cpu_us']:.0f} us, server CPU {r['server_cpu_us']:.0f} us"
        print(f"  {name:<7} {r['wall_us']:7.0f} us a round trip  ({cpu})")
    print(f"  stream / unary round trip: {out['stream']['wall_us'] / out['unary']['wall_us']:.2f}")
    if args.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
