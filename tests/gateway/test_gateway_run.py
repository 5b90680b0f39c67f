"""The model gateway end to end: real ``ale-robotics run`` processes in bubblewrap (and,
for the reference agent, in the docker sandbox too), the reference AI agent
(examples/agents/llm_agent.py, on the real ``openai`` SDK) driven by a scripted upstream on
loopback.

* the agent, told by its scripted model what to do, writes the shipped pendulum
  checkpoint's submission and scores 1.018 on td3-inverted-pendulum-v2; the operator's
  upstream key is nowhere in the sandbox (environment, files it can reach, ``/proc``) nor
  in the run directory; the sandbox reaches no other address (a host loopback listener,
  the upstream itself); ``result.json`` has the model usage, the score line shows it;
  the transcript verifies, and a tampered one fails;
* an agent past its token budget is refused (429) at the budget and the run completes;
* an agent asking for a model off the allow-list is refused (403).
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from docker_support import DOCKER, need_docker, sandbox_args
from scripted_upstream import UPSTREAM_KEY, ScriptedUpstream, ToolCall, Turn

from ale_robotics.sandboxes.bwrap.command import sandbox_available

needs_bwrap = pytest.mark.skipif(not sandbox_available(), reason="bubblewrap cannot start here")
BWRAP = pytest.param("bwrap", marks=needs_bwrap)

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "ale_robotics"]
TASK = "td3-inverted-pendulum-v2"
MODEL = "scripted-model"
CHECKPOINT = "examples/agents/checkpoints/td3-inverted-pendulum-v1/policy.safetensors"
AGENT = f"{sys.executable} examples/agents/llm_agent.py"
DOCKER_AGENT = "python examples/agents/llm_agent.py"  # the agent image's copy (/workspace)

PROBE = """
import glob, json, os, socket, sys
key = sys.argv[1][::-1]  # given reversed: its own command line must not hold the key
found = []
if any(key in v for v in os.environ.values()):
    found.append("environ")
for path in glob.glob("/proc/*/environ") + glob.glob("/proc/*/cmdline"):
    try:
        if key.encode() in open(path, "rb").read():
            found.append(path)
    except OSError:
        pass
roots = [os.getcwd(), "/tmp", os.environ.get("HOME", "/"), os.environ["ALE_SUBMISSION_DIR"],
         os.environ.get("ALE_TASK_DIR") or "/nonexistent"]
for root in roots:
    for d, _, files in os.walk(root):
        for f in files:
            try:
                if key.encode() in open(os.path.join(d, f), "rb").read(1 << 20):
                    found.append(os.path.join(d, f))
            except OSError:
                pass
reach = {}
for name, port in (("listener", int(sys.argv[2])), ("upstream", int(sys.argv[3]))):
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect(("127.0.0.1", port))
        reach[name] = "CONNECTED"
    except OSError as exc:
        reach[name] = type(exc).__name__
print("PROBE " + json.dumps({"found": found, "reach": reach,
      "base": os.environ["OPENAI_BASE_URL"], "model": os.environ["ALE_MODEL"]}))
"""


def _run(
    tmp: Path, upstream: ScriptedUpstream, *extra: str, agent: str = AGENT, sandbox: str = "bwrap"
) -> tuple[subprocess.CompletedProcess[str], Path]:
    run_dir = tmp / "run"
    proc = subprocess.run(
        [
            *CLI,
            "run",
            TASK,
            "--agent",
            agent,
            *sandbox_args(sandbox),
            "--workers",
            "1",
            "--run-dir",
            str(run_dir),
            "--state-dir",
            str(tmp / "state"),
            "--model-upstream",
            upstream.url + "/v1",
            "--model",
            MODEL,
            *extra,
        ],
        env={**os.environ, "ALE_MODEL_API_KEY": UPSTREAM_KEY},
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        check=False,
    )
    return proc, run_dir


def _probe_output(upstream: ScriptedUpstream) -> dict[str, object]:
    for got in upstream.received:
        for message in got.body.get("messages", []):
            content = message.get("content")
            if message.get("role") == "tool" and isinstance(content, str) and "PROBE " in content:
                return dict(json.loads(content.split("PROBE ", 1)[1].splitlines()[0]))
    raise AssertionError("the probe's output never reached the model")


@pytest.mark.parametrize("sandbox", [BWRAP, DOCKER])
def test_the_reference_agent_scores_through_the_gateway(short_tmp: Path, sandbox: str) -> None:
    if sandbox == "docker":
        need_docker()
    python, agent = ("python", DOCKER_AGENT) if sandbox == "docker" else (sys.executable, AGENT)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    upstream = ScriptedUpstream([]).start()
    probe_cmd = f"{python} probe.py {UPSTREAM_KEY[::-1]} {port} {upstream.port}"
    copy = f'cp "$ALE_WORKSPACE/{CHECKPOINT}" "$ALE_SUBMISSION_DIR/policy.safetensors"'
    upstream.turns = [
        Turn(tool_calls=(ToolCall("write_file", {"path": "probe.py", "content": PROBE}),)),
        Turn(tool_calls=(ToolCall("run", {"command": f"{probe_cmd} && {copy}"}),)),
        Turn(tool_calls=(ToolCall("submit", {}),)),
        Turn(tool_calls=(ToolCall("status", {"wait": True}),)),
        Turn(text="Submitted the checkpoint; done."),
    ]
    try:
        proc, run_dir = _run(short_tmp, upstream, agent=agent, sandbox=sandbox)
    finally:
        upstream.stop()
        listener.close()
    log = (run_dir / "agent.log").read_text() if (run_dir / "agent.log").exists() else ""
    assert proc.returncode == 0, proc.stderr[-3000:] + log[-3000:]
    score_line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("score: "))
    assert score_line.startswith("score: 1.018"), score_line
    assert "model: 5 calls, 600 tokens" in proc.stdout

    probe = _probe_output(upstream)
    assert probe["found"] == []  # the upstream key: not in its environment, files or /proc
    assert probe["reach"] == {
        "listener": "ConnectionRefusedError",
        "upstream": "ConnectionRefusedError",
    }
    assert probe["model"] == MODEL and str(probe["base"]).startswith("http://127.0.0.1:")
    for got in upstream.received:  # the upstream saw the operator's key, never the agent's
        assert got.headers["Authorization"] == f"Bearer {UPSTREAM_KEY}"
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert UPSTREAM_KEY.encode() not in path.read_bytes(), path

    result = json.loads((run_dir / "result.json").read_text())
    usage = result["model_usage"]
    assert (usage["calls"], usage["tokens_in"], usage["tokens_out"]) == (5, 500, 100)
    assert usage["per_model"][MODEL]["calls"] == 5
    events = [json.loads(ln) for ln in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    calls = [e["payload"] for e in events if e["kind"] == "model_call"]
    assert [c["call"] for c in calls] == [0, 1, 2, 3, 4]
    assert len((run_dir / "model_calls.jsonl").read_text().splitlines()) == 5

    verify = subprocess.run(
        [*CLI, "trajectory", "verify", str(run_dir)], capture_output=True, text=True, check=False
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    lines = (run_dir / "model_calls.jsonl").read_text().splitlines(keepends=True)
    lines[2] = lines[2].replace("submit", "SUBMIT")
    (run_dir / "model_calls.jsonl").write_text("".join(lines))
    tampered = subprocess.run(
        [*CLI, "trajectory", "verify", str(run_dir)], capture_output=True, text=True, check=False
    )
    assert tampered.returncode == 1
    assert "model_calls.jsonl line 3 (call 2)" in tampered.stdout


@needs_bwrap
def test_an_agent_past_its_budget_is_refused_and_the_run_completes(short_tmp: Path) -> None:
    echo = Turn(tool_calls=(ToolCall("run", {"command": "echo working"}),))
    upstream = ScriptedUpstream([echo] * 10).start()
    try:
        proc, run_dir = _run(short_tmp, upstream, "--model-budget-tokens", "200")
    finally:
        upstream.stop()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(upstream.received) == 2  # 120, then 240 >= 200: the third call is refused
    log = (run_dir / "agent.log").read_text()
    assert "model token budget of 200 used" in log
    result = json.loads((run_dir / "result.json").read_text())
    assert result["state"] == "completed" and result["job_state"] == "NO_SUBMISSION"
    usage = result["model_usage"]
    assert usage["budget_exhausted"] and usage["refused_calls"] == 1
    assert usage["budget_tokens"] == 200 and usage["tokens_in"] + usage["tokens_out"] == 240


@needs_bwrap
def test_a_model_off_the_allow_list_is_refused(short_tmp: Path) -> None:
    upstream = ScriptedUpstream([Turn(text="never sent")]).start()
    try:
        proc, run_dir = _run(short_tmp, upstream, agent=f"{AGENT} --model gpt-forbidden")
    finally:
        upstream.stop()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert upstream.received == []
    log = (run_dir / "agent.log").read_text()
    assert "'gpt-forbidden' is not allowed in this run; allowed: scripted-model" in log
    record = json.loads((run_dir / "model_calls.jsonl").read_text())
    assert (record["status"], record["refused"]) == (403, "model")


FLOOD = """
import os, sys, time, openai
client = openai.OpenAI(max_retries=0)
for i in range(60):
    try:
        client.chat.completions.create(
            model=os.environ["ALE_MODEL"],
            messages=[{"role": "user", "content": "q" * 100_000}],
        )
    except openai.APIStatusError as exc:
        print("refused", exc.status_code, exc.message, flush=True)
        if exc.status_code == 507:
            time.sleep(60)  # the harness stops it now
print("never stopped", flush=True)
"""


@needs_bwrap
def test_the_transcript_counts_against_the_disk_quota_and_stops_the_run(short_tmp: Path) -> None:
    """Calls with 100 KB bodies under a 1 MiB quota: the transcript reaches it, the gateway
    refuses the next call (507) and the harness stops the agent as for any quota breach."""
    upstream = ScriptedUpstream([Turn(text="ok")] * 60).start()
    try:
        proc, run_dir = _run(
            short_tmp,
            upstream,
            "--disk-quota-mib",
            "1",
            agent=shlex.join([sys.executable, "-c", FLOOD]),
        )
    finally:
        upstream.stop()
    log = (run_dir / "agent.log").read_text()
    assert "refused 507" in log and "never stopped" not in log, log[-2000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["agent_disk_quota_exceeded"] is True, proc.stdout[-2000:]
    assert "model transcript" in proc.stdout + proc.stderr
    # at most one call's record past the quota: its request was within it, its answer not
    assert (run_dir / "model_calls.jsonl").stat().st_size <= 1024**2 + 110_000
    assert len(upstream.received) < 12
    assert result["model_usage"]["refusals"].get("quota", 0) >= 1


WEB = """
import os, openai
client = openai.OpenAI(max_retries=0)
model = os.environ["ALE_MODEL"]
client.responses.create(model=model, input="news?", tools=[{"type": "web_search"}])
print("web_search passed", flush=True)
try:
    client.responses.create(model=model, input="x", tools=[{"type": "code_interpreter",
                            "container": {"type": "auto"}}])
except openai.BadRequestError as exc:
    print("refused:", exc.message, flush=True)
"""


@needs_bwrap
def test_a_tool_the_operator_allows_is_recorded_and_others_refused(short_tmp: Path) -> None:
    upstream = ScriptedUpstream([Turn(text="ok")] * 3).start()
    try:
        proc, run_dir = _run(
            short_tmp,
            upstream,
            "--model-allow-tool",
            "web_search",
            agent=shlex.join([sys.executable, "-c", WEB]),
        )
    finally:
        upstream.stop()
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = (run_dir / "agent.log").read_text()
    assert "web_search passed" in log
    assert "provider-side tool 'code_execution'" in log, log
    assert len(upstream.received) == 1
    result = json.loads((run_dir / "result.json").read_text())
    assert result["model_usage"]["tools_allowed"] == ["web_search"]
    assert result["model_usage"]["refusals"] == {"tool": 1}
    events = [json.loads(ln) for ln in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    (started,) = [e["payload"] for e in events if e["kind"] == "model_gateway_started"]
    assert started["tools_allowed"] == ["web_search"]
