"""The defaults work together, as the README says, with no path flags at all.

* ``evaluator serve`` (no flags) and ``run --evaluator ADDR`` (the agent address it
  prints, nothing else): the harness socket and token are found next to it, the
  volume defaults to ``STATE_DIR/submissions``, and the sandboxed agent can reach
  its socket (it sits in a directory of its own).
* ``run`` with the embedded evaluator and ``evaluator public-key`` share one
  default state dir: the key printed is the one that signed the run's events.

Every process inherits the test's private ``XDG_STATE_HOME`` (tests/conftest.py),
so "default" here is a temp dir, never the user's.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ale_robotics.paths import state_home

CLI = [sys.executable, "-m", "ale_robotics"]
ROOT = Path(__file__).resolve().parents[2]
AGENT = f"{sys.executable} examples/agents/submit_checkpoint.py"
TASK = "td3-inverted-pendulum-v1"


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_serve_with_no_flags_and_run_with_only_its_agent_address(tmp_path: Path) -> None:
    serve = subprocess.Popen(
        [*CLI, "evaluator", "serve"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        sock = state_home() / "evaluator" / "agent" / "agent.sock"
        deadline = time.monotonic() + 60
        while not sock.is_socket() and time.monotonic() < deadline:
            assert serve.poll() is None, serve.stderr.read() if serve.stderr else ""
            time.sleep(0.1)
        run = _cli("run", TASK, "--agent", AGENT, "--evaluator", f"unix://{sock}",
                   "--run-dir", str(tmp_path / "run"))  # fmt: skip
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip().splitlines()[-1].startswith("score: 1.0"), run.stdout
        assert "Traceback" not in run.stderr
    finally:
        serve.send_signal(signal.SIGINT)
        _, err = serve.communicate(timeout=30)
    assert serve.returncode == 0, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "evaluator stopped"


def test_public_key_default_is_the_key_of_a_default_run(tmp_path: Path) -> None:
    run = _cli("run", TASK, "--agent", AGENT, "--run-dir", str(tmp_path / "run"))
    assert run.returncode == 0, run.stderr
    key = _cli("evaluator", "public-key", "--json")
    assert key.returncode == 0, key.stderr
    doc = json.loads(key.stdout)
    assert Path(doc["state_dir"]) == state_home() / "evaluator"
    verify = _cli("trajectory", "verify", str(tmp_path / "run"), "--public-key", doc["public_key"])
    assert verify.returncode == 0, verify.stdout + verify.stderr
    other = (  # a different key does not verify: the pin is real
        Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        .hex()
    )
    bad = _cli("trajectory", "verify", str(tmp_path / "run"), "--public-key", other)
    assert bad.returncode == 1
