"""`ale-robotics run` with the bubblewrap sandbox: the agent works, and sees nothing else."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ale_robotics.harness.sandbox import sandbox_available

pytestmark = pytest.mark.skipif(not sandbox_available(), reason="bubblewrap cannot start here")

CLI = [sys.executable, "-m", "ale_robotics"]

PROBE_AGENT = """
import json, os, socket
from pathlib import Path
import numpy as np
from safetensors.numpy import save_file
from ale_robotics.client import AleClient

seen = {}
for name, path in {"secret": "STATE/secret", "harness_token": "STATE/harness.token",
                   "other_run": "OTHER/result.json"}.items():
    try:
        Path(path).read_bytes()
        seen[name] = "READ"
    except OSError as exc:
        seen[name] = type(exc).__name__
s = socket.socket()
s.settimeout(2)
try:
    s.connect(("127.0.0.1", PORT))
    seen["tcp"] = "CONNECTED"
except OSError as exc:
    seen["tcp"] = type(exc).__name__
seen["uid"] = os.getuid()
c = AleClient.from_env()
rng = np.random.default_rng(0)
w = {r.key: (rng.standard_normal(r.shape) * 0.1).astype(r.dtype)
     for r in c.get_spec().contract.tensors}
save_file(w, str(c.submission_dir / "policy.safetensors"))
seen["state"] = c.wait(c.submit()).state
print("PROBE " + json.dumps(seen))
"""


def test_sandboxed_agent_submits_but_cannot_reach_secrets_or_network(short_tmp: Path) -> None:
    listener = __import__("socket").socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    other = short_tmp / "runs" / "run-older"  # an earlier run, default layout
    other.mkdir(parents=True)
    (other / "result.json").write_text("{}")
    agent = short_tmp / "agent.py"
    agent.write_text(
        textwrap.dedent(PROBE_AGENT)
        .replace("STATE", str(short_tmp / "state"))
        .replace("OTHER", str(other))
        .replace("PORT", str(port))
    )
    try:
        proc = subprocess.run(
            [
                *CLI,
                "run",
                "td3-inverted-pendulum-v1",
                "--agent",
                f"{sys.executable} {agent}",
                "--state-dir",
                str(short_tmp / "state"),
                "--sandbox",
                "bwrap",
            ],
            capture_output=True,
            text=True,
            timeout=240,
            cwd=short_tmp,
        )
    finally:
        listener.close()
    assert proc.returncode == 0, proc.stderr
    (run,) = [p for p in (short_tmp / "runs").iterdir() if p != other]
    log = (run / "agent.log").read_text()
    probe = json.loads(log.split("PROBE ", 1)[1].splitlines()[0])
    assert probe["state"] == "SUCCEEDED"
    assert probe["secret"] != "READ" and probe["harness_token"] != "READ"
    assert probe["other_run"] != "READ", probe
    assert probe["tcp"] != "CONNECTED"
    assert probe["uid"] == 65534
    result = json.loads((run / "result.json").read_text())
    assert result["sandbox"] == "bwrap"
    assert "WITHOUT a sandbox" not in proc.stderr


def test_sandbox_that_cannot_start_the_agent_is_an_infrastructure_error(short_tmp: Path) -> None:
    proc = subprocess.run(
        [
            *CLI,
            "run",
            "td3-inverted-pendulum-v1",
            "--agent",
            "/nonexistent/agent",
            "--run-dir",
            str(short_tmp / "run"),
            "--state-dir",
            str(short_tmp / "state"),
            "--sandbox",
            "bwrap",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=short_tmp,
    )
    assert proc.returncode == 1
    assert "sandbox did not start" in proc.stderr
    assert "score:" not in proc.stdout


def test_sandbox_none_warns(short_tmp: Path) -> None:
    agent = short_tmp / "a.py"
    agent.write_text("print('hi')\n")
    proc = subprocess.run(
        [
            *CLI,
            "run",
            "td3-inverted-pendulum-v1",
            "--agent",
            f"{sys.executable} {agent}",
            "--run-dir",
            str(short_tmp / "run"),
            "--state-dir",
            str(short_tmp / "state"),
            "--sandbox",
            "none",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=short_tmp,
    )
    assert proc.returncode == 0, proc.stderr
    assert "WITHOUT a sandbox" in proc.stderr
    assert json.loads((short_tmp / "run" / "result.json").read_text())["sandbox"] == "none"
