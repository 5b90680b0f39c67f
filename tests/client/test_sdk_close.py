"""AleClient after close, and at interpreter shutdown (issue 15, points 2 and 5)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from ale_robotics.client import AleClient
from ale_robotics.errors import FailedPreconditionError
from ale_robotics.evaluator import RunningEvaluator


def test_a_call_after_close_is_a_typed_error(evaluator: RunningEvaluator) -> None:
    client = AleClient(evaluator.agent_address, evaluator.agent_token)
    client.get_spec()
    client.close()
    with pytest.raises(FailedPreconditionError, match="is closed: make a new one"):
        client.get_spec()
    client.close()  # twice is fine


def test_closing_a_client_during_interpreter_shutdown_does_not_hang(
    evaluator: RunningEvaluator,
) -> None:
    """A client closed from a module global's __del__ at exit: grpc's channel close can
    block forever once the interpreter is finalizing; the process must simply exit."""
    code = textwrap.dedent(
        f"""
        from ale_robotics.client import AleClient

        class Holder:
            def __init__(self):
                self.c = AleClient({evaluator.agent_address!r}, {evaluator.agent_token!r})
                self.c.get_spec()
            def __del__(self):
                self.c.close()

        holder = Holder()
        print("ok", flush=True)
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
