"""The state dir's secret and tokens are created once, whoever starts first.

Replicas sharing a fresh state dir (one volume, several hosts) start together: each
finds no ``secret`` and makes one. Exactly one must win, and every replica must use
the winner's bytes, the ones on disk; none may read a half-written file.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ale_robotics.evaluator.state.directory import StateDir, create_private
from ale_robotics.seeds import SECRET_BYTES

_THREADS = 8
_ROUNDS = 10


def _race(fn: object, n: int = _THREADS) -> list[object]:
    """``fn()`` from ``n`` threads released together; their answers (or exceptions)."""
    go = threading.Barrier(n)
    out: list[object] = [None] * n

    def one(i: int) -> None:
        go.wait()
        try:
            out[i] = fn()  # type: ignore[operator]
        except BaseException as exc:  # compared below
            out[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_threads_on_a_fresh_state_dir_all_get_the_secret_on_disk(tmp_path: Path) -> None:
    for k in range(_ROUNDS):  # the race is short: run it several times
        root = tmp_path / f"state-{k}"
        got = _race(lambda root=root: StateDir(root).secret())
        on_disk = (root / "secret").read_bytes()
        assert len(on_disk) == SECRET_BYTES
        assert got == [on_disk] * _THREADS
        assert [p.name for p in root.iterdir() if p.name.startswith(".")] == []  # no temp left


def test_threads_on_a_fresh_state_dir_all_get_the_token_on_disk(tmp_path: Path) -> None:
    for k in range(_ROUNDS):
        root = tmp_path / f"state-{k}"
        got = _race(lambda root=root: StateDir(root).token("agent"))
        assert got == [(root / "agent.token").read_text().strip()] * _THREADS


_CHILD = """
import sys
from pathlib import Path
from ale_robotics.evaluator.state.directory import StateDir
sys.stdout.write("ready\\n"); sys.stdout.flush()
sys.stdin.readline()  # go
sys.stdout.write(StateDir(Path(sys.argv[1])).secret().hex() + "\\n")
"""


def test_processes_on_a_fresh_state_dir_all_get_the_secret_on_disk(tmp_path: Path) -> None:
    root = tmp_path / "state"
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    try:
        for child in children:
            assert child.stdout is not None and child.stdout.readline() == "ready\n"
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        answers = []
        for child in children:
            out, _ = child.communicate(timeout=60)
            assert child.returncode == 0
            answers.append(bytes.fromhex(out.strip()))
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
    assert answers == [(root / "secret").read_bytes()] * len(children)


def test_an_existing_file_is_kept_and_the_new_data_dropped(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    assert create_private(path, b"first") is True
    assert create_private(path, b"second") is False
    assert path.read_bytes() == b"first"
    assert path.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["secret"]


def test_a_secret_of_the_wrong_size_is_refused(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    (state.root / "secret").write_bytes(b"short")
    with pytest.raises(ValueError, match=f"exactly {SECRET_BYTES} bytes"):
        state.secret()
