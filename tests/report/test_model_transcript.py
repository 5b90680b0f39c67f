"""A run page shows the run's model usage and its model transcript, escaped and checked.

One real ``ale-robotics run`` in bubblewrap of the reference AI agent
(examples/agents/llm_agent.py) through the run's model gateway, driven by the gateway
tests' scripted upstream, whose model answers with markup (a script tag) both as a tool
call's argument (so it comes back in the next request) and as text; then the site, and
the site of a copy whose transcript has one line edited.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ale_robotics.report import build_site
from ale_robotics.sandboxes.bwrap.command import sandbox_available

if str(Path(__file__).parents[1] / "gateway") not in sys.path:
    sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))

from scripted_upstream import UPSTREAM_KEY, ScriptedUpstream, ToolCall, Turn

pytestmark = pytest.mark.skipif(not sandbox_available(), reason="bubblewrap cannot start here")

ROOT = Path(__file__).resolve().parents[2]
TASK = "td3-inverted-pendulum-v2"
MODEL = "scripted-model"
EVIL = "<script>alert(1)</script>"


@dataclass(frozen=True)
class Sites:
    run_dir: Path
    page: str
    tampered_page: str


def _page(out: Path) -> str:
    pages = sorted((out / "runs").glob("*.html"))
    assert len(pages) == 1, pages
    return pages[0].read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def sites() -> Iterator[Sites]:
    base = Path(tempfile.mkdtemp(prefix="ale-mt-"))
    upstream = ScriptedUpstream(
        [
            Turn(tool_calls=(ToolCall("run", {"command": f"echo '{EVIL}'"}),)),
            Turn(text=f"All done {EVIL} bye", tokens_in=150, tokens_out=30),
        ]
    ).start()
    run_dir = base / "runs" / "llm"
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "ale_robotics",
                "run",
                TASK,
                "--agent",
                f"{sys.executable} examples/agents/llm_agent.py",
                "--workers",
                "1",
                "--run-dir",
                str(run_dir),
                "--state-dir",
                str(base / "state"),
                "--model-upstream",
                upstream.url + "/v1",
                "--model",
                MODEL,
                "--model-budget-tokens",
                "5000",
            ],
            env={**os.environ, "ALE_MODEL_API_KEY": UPSTREAM_KEY, "XDG_STATE_HOME": str(base)},
            capture_output=True,
            text=True,
            timeout=300,
            cwd=ROOT,
            check=False,
        )
    finally:
        upstream.stop()
    try:
        assert proc.returncode == 0, proc.stderr[-3000:]
        page = _page(build_site(base / "runs", base / "site").out)
        copied = list((base / "site" / "runs").glob("*/model_calls.jsonl"))
        assert [c.read_bytes() for c in copied] == [(run_dir / "model_calls.jsonl").read_bytes()]
        # A copy of the run whose transcript's second line says something else.
        copy = base / "tampered" / "llm"
        shutil.copytree(run_dir, copy)
        transcript = copy / "model_calls.jsonl"
        lines = transcript.read_text(encoding="utf-8").splitlines(keepends=True)
        record = json.loads(lines[1])
        record["response"] = record["response"].replace("All done", "All DONE")
        lines[1] = json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n"
        transcript.write_text("".join(lines), encoding="utf-8")
        tampered = _page(build_site(base / "tampered", base / "site2").out)
        yield Sites(run_dir, page, tampered)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_model_text_is_escaped(sites: Sites) -> None:
    html = sites.page
    assert "<script" not in html.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    section = html.split('id="model-transcript"', 1)[1].split("</section>", 1)[0]
    # In the response text, in the tool call's arguments and in the request that carries
    # the tool's output back.
    assert "All done &lt;script&gt;alert(1)&lt;/script&gt; bye" in section
    assert section.count("alert(1)") >= 3


def test_the_usage_and_each_call_are_shown(sites: Sites) -> None:
    result = json.loads((sites.run_dir / "result.json").read_text())
    usage = result["model_usage"]
    assert usage["calls"] == 2 and usage["tokens_in"] == 250 and usage["tokens_out"] == 50
    html = sites.page
    block = html.split('id="model-usage"', 1)[1].split("</section>", 1)[0]
    assert "model: 2 calls, 300 tokens of 5,000" in block
    assert re.search(r"<td class=\"mono\">scripted-model</td><td class=\"num\">2</td>"
                     r"<td class=\"num\">250</td><td class=\"num\">50</td>", block)  # fmt: skip
    assert "5,000" in block
    section = html.split('id="model-transcript"', 1)[1].split("</section>", 1)[0]
    assert 'id="call-0"' in section and 'id="call-1"' in section
    assert "150 in / 30 out" in section
    assert "→ run(" in section  # the tool call
    assert 'data-ok="true"' in section and "OK: model_calls.jsonl matches" in section
    link = re.search(r'href="([^"]+model_calls\.jsonl)"', section)
    assert link is not None


def test_a_tampered_transcript_is_flagged(sites: Sites) -> None:
    section = sites.tampered_page.split('id="model-transcript"', 1)[1].split("</section>", 1)[0]
    assert 'data-ok="false"' in section
    assert "FAIL: model_calls.jsonl line 2 (call 1)" in section
    assert "All DONE" in section  # what the file now says is shown, as failed
