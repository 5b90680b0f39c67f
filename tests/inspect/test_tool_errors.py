"""Whatever a tool call's arguments make fail in the sandbox comes back to the model as a
tool error, never as the sample's error: the ``ale`` sandbox's exec, read_file and
write_file against a real toolbox process, each failure judged by Inspect's own classifier
(``tool_call_error``: None means Inspect fails the sample)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from inspect_ai.model._call_tools import tool_call_error
from inspect_ai.tool import ToolError
from inspect_ai.util import LimitExceededError

from ale_robotics.harness.options import RunOptions
from ale_robotics.harness.report import InspectRecord
from ale_robotics.inspect.sample_run import SampleRun
from ale_robotics.inspect.sandbox import AleSandboxEnvironment, toolbox_error

RECORD = InspectRecord(log=None, model="m", task="t", eval_id="e", sample_id="s", epoch=1)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[AleSandboxEnvironment]:
    """The sandbox of a sample whose run's channel has a real toolbox connected (its run
    itself not started: what confines the toolbox is tested end to end elsewhere)."""
    run = SampleRun(RunOptions("td3-inverted-pendulum-v2", "toolbox"), RECORD)
    argv = run.channel.access.wrap([sys.executable, "-m", "ale_robotics.inspect.toolbox"])
    proc = subprocess.Popen(argv, cwd=tmp_path)
    assert run.channel.accept(30), "the toolbox did not connect"
    (tmp_path / "file.txt").write_text("text\n")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    try:
        yield AleSandboxEnvironment(run)
    finally:
        run.channel.close()
        proc.kill()
        proc.wait()


def _failure(call: Awaitable[Any]) -> Exception:
    """What the call raised (fails the test if it did not fail)."""

    async def attempt() -> Exception | None:
        try:
            await call
        except Exception as exc:
            return exc
        return None

    exc = anyio.run(attempt)
    assert exc is not None, "the call did not fail"
    return exc


def _tool_error(call: Awaitable[Any]) -> str:
    """The message Inspect shows the model for the call's failure (fails the test if the
    call did not fail, or if Inspect would fail the sample instead)."""
    exc = _failure(call)
    mapped = tool_call_error(exc, "bash")
    assert mapped is not None, f"{type(exc).__name__}: {exc} would error the sample"
    return mapped.error.message


NAME_TOO_LONG = "x" * 300


@pytest.mark.parametrize(
    ("what", "call", "says"),
    [
        ("a NUL in the command", lambda e: e.exec(["bash", "-c", "echo a\x00b"]), "null byte"),
        ("a NUL in the environment", lambda e: e.exec(["true"], env={"A": "x\x00"}), "null"),
        ("a NUL in the directory", lambda e: e.exec(["true"], cwd="a\x00b"), "null byte"),
        ("a bad variable name", lambda e: e.exec(["true"], env={"A=B": "1"}), "ValueError"),
        ("a lone surrogate in the command", lambda e: e.exec(["echo", "\ud800"]), "Unicode"),
        ("a lone surrogate as input", lambda e: e.exec(["cat"], input="\ud800"), "UTF-8"),
        ("a missing file", lambda e: e.read_file("no/such/file.txt"), "not found"),
        ("a file as a directory", lambda e: e.read_file("file.txt/inner"), "NotADirectory"),
        ("a name too long (OSError)", lambda e: e.read_file(NAME_TOO_LONG), "too long"),
        ("a symlink loop (OSError)", lambda e: e.read_file("loop"), "symbolic links"),
        ("a NUL in a path", lambda e: e.read_file("a\x00b"), "null byte"),
        ("binary read as text", lambda e: e.read_file("/proc/self/exe"), "decoding"),
        ("a directory read", lambda e: e.read_file("."), "directory"),
        ("a write under a file", lambda e: e.write_file("file.txt/x", "y"), "FileExists"),
        ("a write of a long name", lambda e: e.write_file(NAME_TOO_LONG, "y"), "too long"),
        ("a write to /proc (EIO)", lambda e: e.write_file("/proc/version", "y"), "Input/output"),
        ("a write of a lone surrogate", lambda e: e.write_file("f", "\ud800"), "UTF-8"),
    ],
)
def test_a_failing_tool_call_is_a_tool_error(
    env: AleSandboxEnvironment,
    what: str,
    call: Callable[[AleSandboxEnvironment], Awaitable[Any]],
    says: str,
) -> None:
    assert says in _tool_error(call(env)), what


def test_a_program_that_cannot_start_is_a_failed_command_not_an_error(
    env: AleSandboxEnvironment, tmp_path: Path
) -> None:
    (tmp_path / "script").write_text("no shebang, not executable\n")

    async def run(cmd: list[str]) -> tuple[int, str]:
        result = await env.exec(cmd)
        return result.returncode, result.stderr

    assert anyio.run(run, ["./no-such-program"])[0] == 127
    code, stderr = anyio.run(run, [str(tmp_path / "script")])
    assert code == 126 and "Permission denied" in stderr
    code, stderr = anyio.run(run, ["echo", "x" * 200_000])  # one argument past MAX_ARG_STRLEN
    assert code == 126 and "too long" in stderr


def test_the_sandbox_still_works_after_each_failure(env: AleSandboxEnvironment) -> None:
    async def calls() -> str:
        for bad in (["echo", "a\x00b"], ["echo", "\ud800"]):
            with pytest.raises((ValueError, ToolError)):
                await env.exec(bad)
        result = await env.exec(["bash", "-c", "echo still here"])
        return result.stdout

    assert anyio.run(calls) == "still here\n"


@pytest.mark.parametrize(
    "error",
    [
        {"type": "NotADirectoryError", "message": "m", "errno": 20, "strerror": "Not a dir"},
        {"type": "OSError", "message": "[Errno 28] No space left on device"},
        {"type": "BlockingIOError", "message": "m", "errno": 11},
        {"type": "KeyError", "message": "'cmd'"},
        {"type": "SomethingNew", "message": "a type no one listed"},
        {"type": "ValueError", "message": "other"},
        {"type": "FileNotFoundError", "message": "m"},
        {"type": "PermissionError", "message": "m", "errno": "not a number"},
        {},
    ],
)
def test_every_toolbox_error_maps_to_a_tool_error(error: dict[str, Any]) -> None:
    assert tool_call_error(toolbox_error(error), "bash") is not None


@pytest.mark.parametrize(
    "line",
    [b"[1, 2]\n", b'{"id": "x"}\n', b"not json\n", b"[" * 100_000 + b"\n", b'"just a string"\n'],
)
def _forged_toolbox(run: SampleRun) -> socket.socket:
    """A connection to the run's channel that greets as the toolbox does (what an agent
    writing to the toolbox's socket can send is what this one sends)."""
    forger = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    forger.connect(str(run.channel.access.socket_dir / "toolbox.sock"))
    forger.sendall(json.dumps({"ready": True, "cwd": "/", "pid": 1}).encode() + b"\n")
    assert run.channel.accept(10)
    return forger


@pytest.mark.parametrize(
    "line",
    [b"[1, 2]\n", b'{"id": "x"}\n', b"not json\n", b"[" * 100_000 + b"\n", b'"a string"\n'],
)
def test_a_line_on_the_channel_that_is_no_answer_ends_it_as_the_toolbox_end_does(
    line: bytes,
) -> None:
    """The agent can write to the toolbox's socket too: a forged line neither hangs nor
    errors the sample; the channel is over, as when the toolbox is gone (the sample's
    limit: its scorer then ends the run)."""
    run = SampleRun(RunOptions("td3-inverted-pendulum-v2", "toolbox"), RECORD)
    forger = _forged_toolbox(run)
    try:
        forger.sendall(line)
        exc = _failure(AleSandboxEnvironment(run).exec(["true"]))
        assert isinstance(exc, LimitExceededError) and "agent phase is over" in str(exc.message)
    finally:
        forger.close()
        run.channel.close()


@pytest.mark.parametrize(
    ("answer", "op"),
    [
        ({}, "exec"),
        ({"returncode": "zero"}, "exec"),
        ({"returncode": 0, "stdout": 5}, "exec"),
        ({"data": 5}, "read"),
        ({"error": "not an object"}, "read"),
    ],
)
def test_a_malformed_answer_is_a_tool_error(answer: dict[str, Any], op: str) -> None:
    run = SampleRun(RunOptions("td3-inverted-pendulum-v2", "toolbox"), RECORD)
    forger = _forged_toolbox(run)

    def answer_the_request() -> None:
        request = json.loads(forger.makefile("rb").readline())
        forger.sendall(json.dumps({"id": request["id"], **answer}).encode() + b"\n")

    thread = threading.Thread(target=answer_the_request, daemon=True)
    thread.start()
    env = AleSandboxEnvironment(run)
    try:
        call = env.exec(["true"]) if op == "exec" else env.read_file("f")
        exc = _failure(call)
        assert tool_call_error(exc, "bash") is not None, repr(exc)
    finally:
        thread.join(10)
        forger.close()
        run.channel.close()
