"""The scripted upstream speaks what real agent software parses (issue 45).

Codex CLI builds its turn from the Responses stream's ``response.output_item.done`` events
(a stream of only ``response.created`` and ``response.completed`` shows it nothing: it
prints no answer and runs no tool), and calls ``apply_patch`` as a custom (freeform) tool.
These tests read the scripted streams with the real ``openai`` SDK, through the gateway as
agents do, and run the upstream as the process the recipes' manual runs use.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
from gateway_helpers import MODEL, Start
from scripted_upstream import COPY_CHECKPOINT, SUBMIT_AND_WAIT, ToolCall, Turn

PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n"


def _client(start: Start, turns: list[Turn]) -> openai.OpenAI:
    gateway, _ = start(turns)
    return openai.OpenAI(
        base_url=f"http://127.0.0.1:{gateway.tcp_port}/v1", api_key=gateway.token, max_retries=0
    )


def test_streamed_response_has_each_item_added_streamed_and_done(start_gateway: Start) -> None:
    turn = Turn(text="copying it", tool_calls=(ToolCall("exec_command", {"cmd": "ls -l"}),))
    client = _client(start_gateway, [turn, turn])
    events = list(client.responses.create(model=MODEL, input="go", stream=True))
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert [i.type for i in done] == ["message", "function_call"]
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "copying it"
    args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    assert args == '{"cmd": "ls -l"}' == done[1].arguments  # type: ignore[union-attr]
    assert done[1].name == "exec_command"  # type: ignore[union-attr]
    added = [e.output_index for e in events if e.type == "response.output_item.added"]
    assert added == [0, 1]
    # the same items as the answer of a call that does not stream
    whole = client.responses.create(model=MODEL, input="go")
    assert [_fields(i.model_dump()) for i in whole.output] == [
        _fields(i.model_dump()) for i in done
    ]


def _fields(item: dict[str, object]) -> dict[str, object]:
    """An output item without its ids (numbered per call)."""
    return {k: v for k, v in item.items() if k not in ("id", "call_id")}


def test_custom_tool_call_streamed_and_whole(start_gateway: Start) -> None:
    call = Turn.from_json(
        {"tool_calls": [{"name": "apply_patch", "arguments": {"input": PATCH}, "kind": "custom"}]}
    )
    assert call.tool_calls[0].kind == "custom"
    client = _client(start_gateway, [call, call])
    events = list(client.responses.create(model=MODEL, input="go", stream=True))
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert len(done) == 1 and done[0].type == "custom_tool_call"
    assert done[0].name == "apply_patch" and done[0].input == PATCH  # type: ignore[union-attr]
    streamed = [e.delta for e in events if e.type == "response.custom_tool_call_input.delta"]
    assert "".join(streamed) == PATCH
    whole = client.responses.create(model=MODEL, input="go").output
    assert whole[0].type == "custom_tool_call" and whole[0].input == PATCH


def _process(script: str, port_file: Path, key: str) -> subprocess.Popen[bytes]:
    """The scripted upstream as a process, once its port is written."""
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("scripted_upstream.py")), script, port_file],
        env={**os.environ, "ALE_MODEL_API_KEY": key},
    )
    while not port_file.exists() or not port_file.read_text():
        assert proc.poll() is None, "the scripted upstream exited"
        time.sleep(0.05)
    return proc


def test_process_takes_the_key_from_ale_model_api_key(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text('[{"text": "one"}, {"text": "two"}]')
    port_file = tmp_path / "port"
    key = "sk-test-process-key"
    proc = _process(str(script), port_file, key)
    try:
        url = f"http://127.0.0.1:{port_file.read_text()}/v1/chat/completions"
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
        other = httpx.post(url, json=body, headers={"authorization": "Bearer sk-other"})
        assert other.status_code == 401
        ok = httpx.post(url, json=body, headers={"authorization": f"Bearer {key}"})
        assert ok.status_code == 200
        assert ok.json()["choices"][0]["message"]["content"] == "one"
    finally:
        proc.terminate()
        proc.wait(10)


def test_process_serves_an_agents_submit_script_by_name(tmp_path: Path) -> None:
    """``@codex``: Codex's two exec_command calls (copy, submit and wait), then the end."""
    port_file = tmp_path / "port"
    proc = _process("@codex", port_file, "sk-test-codex")
    client = openai.OpenAI(
        base_url=f"http://127.0.0.1:{port_file.read_text()}/v1", api_key="sk-test-codex"
    )
    try:
        calls = []
        for _ in range(3):
            events = list(client.responses.create(model=MODEL, input="go", stream=True))
            calls += [e.item for e in events if e.type == "response.output_item.done"]
        assert [c.type for c in calls] == ["function_call", "function_call", "message"]
        assert [c.name for c in calls[:2]] == ["exec_command", "exec_command"]  # type: ignore[union-attr]
        cmds = [json.loads(c.arguments)["cmd"] for c in calls[:2]]  # type: ignore[union-attr]
        assert cmds == [COPY_CHECKPOINT, SUBMIT_AND_WAIT]
    finally:
        proc.terminate()
        proc.wait(10)
