"""`ale-robotics run` sandboxed: the agent works, and sees nothing else.

The probe runs in bubblewrap and in the agent container (``--sandbox docker``, skipped
without Docker and the images unless ``ALE_REQUIRE_DOCKER=1``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from docker_support import DOCKER, agent_cmd, sandbox_args

from ale_robotics.sandboxes.bwrap.command import sandbox_available

needs_bwrap = pytest.mark.skipif(not sandbox_available(), reason="bubblewrap cannot start here")

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


@pytest.mark.parametrize("sandbox", [pytest.param("bwrap", marks=needs_bwrap), DOCKER])
def test_sandboxed_agent_submits_but_cannot_reach_secrets_or_network(
    short_tmp: Path, sandbox: str
) -> None:
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
                agent_cmd(sandbox, agent),
                "--state-dir",
                str(short_tmp / "state"),
                *sandbox_args(sandbox),
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
    assert result["sandbox"] == sandbox
    assert "WITHOUT a sandbox" not in proc.stderr


@needs_bwrap
def test_a_missing_agent_command_is_a_usage_error_not_an_infrastructure_one(
    short_tmp: Path,
) -> None:
    """A typo in --agent is the user's to fix: refused before the run, never blamed on
    the sandbox (no advice to turn it off)."""
    proc = subprocess.run(
        [*CLI, "run", "td3-inverted-pendulum-v1", "--agent", "/nonexistent/agent",
         "--run-dir", str(short_tmp / "run"), "--state-dir", str(short_tmp / "state"),
         "--sandbox", "bwrap"],
        capture_output=True, text=True, timeout=120, cwd=short_tmp,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "command not found: '/nonexistent/agent'" in proc.stderr
    assert "--sandbox none" not in proc.stderr and "infrastructure" not in proc.stderr
    assert "score:" not in proc.stdout
    assert not (short_tmp / "run").exists()


@needs_bwrap
def test_a_command_that_cannot_start_inside_the_sandbox_says_what_the_sandbox_shows(
    short_tmp: Path,
) -> None:
    """The host check passes (the script is in the workspace) but its interpreter is not
    there inside: bwrap's execvp fails. The message says what the sandbox shows; the run
    ends 'failed' with a result.json saying why."""
    ws = short_tmp / "ws"
    ws.mkdir()
    script = ws / "agent"
    script.write_text("#!/nonexistent/interpreter\n")
    script.chmod(0o755)
    proc = subprocess.run(
        [*CLI, "run", "td3-inverted-pendulum-v1", "--agent", str(script), "--workspace",
         str(ws), "--run-dir", str(short_tmp / "run"), "--state-dir", str(short_tmp / "state"),
         "--sandbox", "bwrap"],
        capture_output=True, text=True, timeout=120, cwd=short_tmp,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    err = proc.stderr.replace("\n", " ")
    assert "could not start inside the sandbox" in err
    assert f"only the workspace {ws}" in err
    assert "--sandbox none" not in err
    assert "score:" not in proc.stdout
    result = json.loads((short_tmp / "run" / "result.json").read_text())
    assert result["state"] == "failed" and "execvp" in result["reason"]


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
