"""The toolbox and its channel, over a real Unix socket with the toolbox a real process
(no sandbox: what confines it is the run's sandbox, tested end to end in test_inspect_eval)."""

from __future__ import annotations

import base64
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ale_robotics.inspect.channel import SOCKET_NAME, ToolboxGone, ToolChannel, decode


@pytest.fixture
def toolbox(tmp_path: Path) -> Iterator[tuple[ToolChannel, subprocess.Popen[bytes]]]:
    channel = ToolChannel()
    access = channel.access
    argv = access.wrap([sys.executable, "-m", "ale_robotics.inspect.toolbox"])
    proc = subprocess.Popen(argv, cwd=tmp_path)
    assert channel.accept(30), "the toolbox did not connect"
    yield channel, proc
    channel.close()
    proc.kill()
    proc.wait()


def _exec(channel: ToolChannel, cmd: list[str], **extra: object) -> dict[str, object]:
    return channel.call({"op": "exec", "cmd": cmd, **extra}, timeout=60)


def test_exec_runs_in_the_toolbox_working_directory_with_input_and_env(
    toolbox: tuple[ToolChannel, subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    channel, _ = toolbox
    assert channel.ready["cwd"] == str(tmp_path)
    answer = _exec(
        channel,
        ["bash", "-c", 'pwd; echo "$GREETING"; cat; echo oops >&2; exit 3'],
        input=base64.b64encode(b"from stdin\n").decode(),
        env={"GREETING": "hello"},
    )
    assert answer["returncode"] == 3
    assert decode(str(answer["stdout"])).decode() == f"{tmp_path}\nhello\nfrom stdin\n"
    assert decode(str(answer["stderr"])).decode() == "oops\n"
    # the toolbox's own Python comes first on PATH: a tool's `python` has the SDK
    which = _exec(channel, ["bash", "-c", "command -v python"])
    assert decode(str(which["stdout"])).decode().strip() == str(
        Path(sys.executable).parent / "python"
    )


def test_a_missing_program_is_a_failed_command_and_a_slow_one_times_out(
    toolbox: tuple[ToolChannel, subprocess.Popen[bytes]],
) -> None:
    channel, _ = toolbox
    missing = _exec(channel, ["no-such-program-ale"])
    assert missing["returncode"] == 127 and b"no-such-program-ale" in decode(str(missing["stderr"]))
    assert _exec(channel, ["sleep", "30"], timeout=1) == {"timed_out": True}


def test_files_are_written_and_read_relative_to_the_working_directory(
    toolbox: tuple[ToolChannel, subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    channel, _ = toolbox
    data = base64.b64encode(b"\x00binary\r\n").decode()
    assert channel.call({"op": "write", "path": "sub/dir/f.bin", "data": data}) == {}
    assert (tmp_path / "sub/dir/f.bin").read_bytes() == b"\x00binary\r\n"
    assert (
        decode(channel.call({"op": "read", "path": "sub/dir/f.bin"})["data"]) == b"\x00binary\r\n"
    )
    missing = channel.call({"op": "read", "path": "nope.txt"})
    assert missing["error"]["type"] == "FileNotFoundError"
    assert channel.call({"op": "read", "path": "sub"})["error"]["type"] == "IsADirectoryError"
    assert channel.call({"op": "frobnicate"})["error"]["type"] == "ValueError"


def test_a_slow_command_does_not_hold_up_the_others(
    toolbox: tuple[ToolChannel, subprocess.Popen[bytes]],
) -> None:
    channel, _ = toolbox
    done = threading.Event()

    def slow() -> None:
        _exec(channel, ["sleep", "3"])
        done.set()

    threading.Thread(target=slow, daemon=True).start()
    fast = _exec(channel, ["echo", "quick"])
    assert decode(str(fast["stdout"])) == b"quick\n"
    assert not done.is_set(), "the quick command waited for the slow one"
    assert done.wait(30)


def test_exit_ends_the_toolbox_and_every_later_call_says_it_is_gone(
    toolbox: tuple[ToolChannel, subprocess.Popen[bytes]],
) -> None:
    channel, proc = toolbox
    assert channel.call({"op": "exit"}, timeout=30) == {}
    assert proc.wait(30) == 0
    with pytest.raises(ToolboxGone):
        _exec(channel, ["true"])


def test_a_killed_toolbox_fails_the_call_waiting_on_it(
    toolbox: tuple[ToolChannel, subprocess.Popen[bytes]],
) -> None:
    channel, proc = toolbox
    threading.Timer(0.5, proc.kill).start()
    with pytest.raises(ToolboxGone):
        _exec(channel, ["sleep", "30"])


def test_only_the_first_connection_is_heard(
    toolbox: tuple[ToolChannel, subprocess.Popen[bytes]],
) -> None:
    channel, _ = toolbox
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with pytest.raises(OSError):
        other.connect(str(channel.access.socket_dir / SOCKET_NAME))
    other.close()


def test_a_call_before_the_toolbox_connects_says_so() -> None:
    channel = ToolChannel()
    try:
        assert channel.accept(0.1) is False
        with pytest.raises(ToolboxGone, match="not connected"):
            channel.call({"op": "exec", "cmd": ["true"]})
    finally:
        channel.close()
    assert not channel.access.socket_dir.exists()


def test_a_connection_that_never_greets_is_dropped_and_the_toolbox_still_heard(
    tmp_path: Path,
) -> None:
    channel = ToolChannel()
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    proc = None
    try:
        silent.connect(str(channel.access.socket_dir / SOCKET_NAME))
        assert channel.accept(0.1) is False  # waited at most its greeting timeout
        argv = channel.access.wrap([sys.executable, "-m", "ale_robotics.inspect.toolbox"])
        proc = subprocess.Popen(argv, cwd=tmp_path)
        assert channel.accept(30)
        assert decode(str(_exec(channel, ["echo", "hi"])["stdout"])) == b"hi\n"
    finally:
        silent.close()
        channel.close()
        if proc is not None:
            proc.kill()
            proc.wait()
