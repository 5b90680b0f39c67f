"""``ale-robotics trajectory verify`` checks the model transcript beside the trajectory."""

from __future__ import annotations

import json

import openai
from gateway_helpers import MODEL, Start
from scripted_upstream import Turn
from typer.testing import CliRunner

from ale_robotics.cli.trajectory import app


def test_verify_checks_model_calls_and_names_a_tampered_line(start_gateway: Start) -> None:
    gateway, _ = start_gateway([Turn(text="one"), Turn(text="two")])
    env = gateway.agent_env(f"http://127.0.0.1:{gateway.tcp_port}")
    client = openai.OpenAI(base_url=env["OPENAI_BASE_URL"], api_key=env["OPENAI_API_KEY"])
    for q in ("a", "b"):
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": q}])
    gateway.stop()
    run_dir = gateway.transcript.parent
    runner = CliRunner()
    ok = runner.invoke(app, ["verify", str(run_dir)])
    assert ok.exit_code == 0, ok.output
    assert "model_calls.jsonl matches its model_call events" in ok.output

    lines = gateway.transcript.read_text().splitlines(keepends=True)
    record = json.loads(lines[1])
    record["response"] = record["response"].replace("two", "TWO")
    lines[1] = json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n"
    gateway.transcript.write_text("".join(lines))
    bad = runner.invoke(app, ["verify", str(run_dir)])
    assert bad.exit_code == 1
    assert "FAIL: model_calls.jsonl line 2 (call 1)" in bad.output
    doc = json.loads(runner.invoke(app, ["verify", str(run_dir), "--json"]).stdout)
    assert doc["ok"] is True and doc["transcript"]["ok"] is False
