"""Issue 44's attacks on the model gateway, replayed and measured: what each one got.

Runs a gateway in this process in front of the scripted upstream of the tests
(``tests/gateway/scripted_upstream.py``, on loopback, reporting 1,000 + 1,000 tokens a
call) and prints, per attack, what the attacker obtained: tokens served against those
recorded, bytes of transcript, the harness's memory, what reached the upstream. Only the
constructor arguments every version of :class:`~ale_robotics.gateway.ModelGateway` takes
are used, so an older checkout can be measured with the same script::

    python benchmarks/gateway_attacks.py [--json]
    git worktree add /tmp/before <commit>
    PYTHONPATH=/tmp/before/src python benchmarks/gateway_attacks.py   # before

Not a timing: each figure is a count, the same on any host but the memory (RSS, MiB).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import httpx
import openai

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "gateway"))
from scripted_upstream import ScriptedUpstream, Turn

from ale_robotics.gateway import GatewayPolicy, ModelGateway

MODEL = "scripted-model"
KEY = "sk-operator"


def _gateway(tmp: Path, upstream: ScriptedUpstream, budget: int | None) -> ModelGateway:
    upstream.key = KEY
    return ModelGateway(
        upstream=upstream.url + "/v1",
        upstream_key=KEY,
        policy=GatewayPolicy.of([MODEL], budget),
        socket_path=tmp / "gw.sock",
        transcript=tmp / "model_calls.jsonl",
        tcp=True,
    ).start()


def _post(gw: ModelGateway, path: str, body: bytes, headers: dict[str, str]) -> int:
    url = f"http://127.0.0.1:{gw.tcp_port}{path}"
    try:
        return httpx.post(url, content=body, headers=headers, timeout=120).status_code
    except httpx.HTTPError:
        return -1


def _auth(gw: ModelGateway) -> dict[str, str]:
    return {"authorization": f"Bearer {gw.token}"}


def _served(upstream: ScriptedUpstream) -> int:
    return sum(i + o for i, o in upstream.reported)


def protocol_confusion(tmp: Path) -> dict[str, Any]:
    """30 chat calls with an ``anthropic-version`` header on a 50,000-token budget."""
    upstream = ScriptedUpstream([Turn(text="ok", tokens_in=1000, tokens_out=1000)] * 30).start()
    upstream.lenient_auth = True  # the upstream took the key in either header
    gw = _gateway(tmp, upstream, 50_000)
    body = {"model": MODEL, "messages": [{"role": "user", "content": "x" * 4000}]}
    headers = {**_auth(gw), "anthropic-version": "2023-06-01"}
    ok = [_post(gw, "/v1/chat/completions", json.dumps(body).encode(), headers) for _ in range(30)]
    usage = gw.stop()
    upstream.stop()
    return {"calls_ok": ok.count(200), "served": _served(upstream), "recorded": usage.tokens}


def concurrency(tmp: Path) -> dict[str, Any]:
    """30 calls at once on a 100-token budget, against an upstream taking 0.5 s a call."""
    upstream = ScriptedUpstream([Turn(text="ok", tokens_in=1000, tokens_out=1000)] * 30).start()
    upstream.delay_s = 0.5
    gw = _gateway(tmp, upstream, 100)
    body = {"model": MODEL, "messages": [{"role": "user", "content": "x" * 4000}]}

    async def burst() -> list[int]:
        async with httpx.AsyncClient(timeout=120) as client:
            calls = [
                client.post(
                    f"http://127.0.0.1:{gw.tcp_port}/v1/chat/completions",
                    json=body,
                    headers=_auth(gw),
                )
                for _ in range(30)
            ]
            return [r.status_code for r in await asyncio.gather(*calls)]

    statuses = asyncio.run(burst())
    usage = gw.stop()
    upstream.stop()
    return {"calls_ok": statuses.count(200), "served": _served(upstream), "recorded": usage.tokens}


def refused_bodies(tmp: Path) -> dict[str, Any]:
    """12 refused 15 MiB bodies (wrong key, a model off the list): the transcript's size."""
    upstream = ScriptedUpstream([]).start()
    gw = _gateway(tmp, upstream, None)
    pad = "z" * (15 << 20)
    body = json.dumps({"model": "forbidden", "messages": [], "pad": pad}).encode()
    for i in range(12):
        _post(gw, "/v1/chat/completions", body, _auth(gw) if i % 2 else {})
    gw.stop()
    upstream.stop()
    return {"transcript_mb": round((tmp / "model_calls.jsonl").stat().st_size / 1e6, 3)}


_CHILD = """
import sys, time
from pathlib import Path
from ale_robotics.gateway import GatewayPolicy, ModelGateway
tmp = Path(sys.argv[2])
gw = ModelGateway(upstream=sys.argv[1], upstream_key="sk-operator",
                  policy=GatewayPolicy.of(["scripted-model"], None),
                  socket_path=tmp / "gw.sock", transcript=tmp / "model_calls.jsonl",
                  tcp=True).start()
print(gw.tcp_port, gw.token, flush=True)
time.sleep(3600)
"""


def _kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def memory(tmp: Path) -> dict[str, Any]:
    """12 concurrent 15 MiB bodies to a slow upstream: the growth of the gateway's peak
    RSS (the gateway alone in a process of its own, as in the harness's)."""
    upstream = ScriptedUpstream([Turn(text="ok")] * 12).start()
    upstream.delay_s = 1.0
    upstream.key = KEY
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, upstream.url + "/v1", str(tmp)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        port, token = child.stdout.readline().split()
        before = _kib(child.pid, "VmHWM")
        body = json.dumps({"model": MODEL, "messages": [], "pad": "z" * (15 << 20)}).encode()
        url = f"http://127.0.0.1:{port}/v1/chat/completions"

        def send() -> None:
            with contextlib.suppress(httpx.HTTPError):
                httpx.post(
                    url, content=body, headers={"authorization": f"Bearer {token}"}, timeout=120
                )

        threads = [threading.Thread(target=send) for _ in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        peak = _kib(child.pid, "VmHWM")
    finally:
        child.kill()
        child.wait()
        upstream.stop()
    return {
        "gateway_peak_rss_growth_mib": round((peak - before) / 1024),
        "bodies_upstream": len(upstream.received),
    }


def provider_tools(tmp: Path) -> dict[str, Any]:
    """A Responses call asking the provider to search the web, and a remote MCP server."""
    upstream = ScriptedUpstream([Turn(text="ok")] * 2).start()
    gw = _gateway(tmp, upstream, None)
    statuses = []
    for tool in ({"type": "web_search_preview"}, {"type": "mcp", "server_url": "https://x"}):
        body = {"model": MODEL, "input": "news", "tools": [tool]}
        statuses.append(_post(gw, "/v1/responses", json.dumps(body).encode(), _auth(gw)))
    gw.stop()
    upstream.stop()
    return {"statuses": statuses, "reached_upstream": len(upstream.received)}


def redirect(tmp: Path) -> dict[str, Any]:
    """An upstream answering 307 to another loopback port: does the key get there?"""
    got: list[bytes] = []
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(5)

    def serve() -> None:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(2)
            try:
                got.append(conn.recv(65536))
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}")
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    upstream = ScriptedUpstream([Turn(text="ok")]).start()
    upstream.redirect_to = f"http://127.0.0.1:{server.getsockname()[1]}"
    gw = _gateway(tmp, upstream, None)
    body = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    status = _post(gw, "/v1/messages", json.dumps(body).encode(), {"x-api-key": gw.token})
    gw.stop()
    upstream.stop()
    server.close()
    thread.join(6)
    return {"status": status, "key_reached_other_port": any(KEY.encode() in g for g in got)}


def query_string(tmp: Path) -> dict[str, Any]:
    upstream = ScriptedUpstream([Turn(text="ok")]).start()
    gw = _gateway(tmp, upstream, None)
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    _post(
        gw, "/v1/chat/completions?model=other&api-version=9", json.dumps(body).encode(), _auth(gw)
    )
    gw.stop()
    upstream.stop()
    return {"upstream_query": upstream.received[0].query if upstream.received else None}


def compressed(tmp: Path) -> dict[str, Any]:
    """The real openai SDK against an upstream that gzips its answers."""
    upstream = ScriptedUpstream([Turn(text="decoded", tokens_in=31, tokens_out=5)]).start()
    upstream.compress = "gzip"
    gw = _gateway(tmp, upstream, None)
    client = openai.OpenAI(
        base_url=f"http://127.0.0.1:{gw.tcp_port}/v1", api_key=gw.token, max_retries=0
    )
    try:
        r = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}]
        )
        outcome = r.choices[0].message.content
    except Exception as exc:
        outcome = f"{type(exc).__name__}"
    usage = gw.stop()
    upstream.stop()
    return {"sdk_got": outcome, "tokens": usage.tokens, "estimated": usage.estimated_calls}


ATTACKS = {
    "1 protocol confusion": protocol_confusion,
    "2 concurrency": concurrency,
    "3 refused bodies": refused_bodies,
    "3 memory": memory,
    "4 provider tools": provider_tools,
    "5 redirect": redirect,
    "6 query string": query_string,
    "7 compressed": compressed,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    for name, attack in ATTACKS.items():
        with tempfile.TemporaryDirectory(prefix="ale-gw-attack-") as tmp:
            results[name] = attack(Path(tmp))
        if not args.json:
            print(f"{name:<22} {json.dumps(results[name])}", flush=True)
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
