"""``ale-robotics run`` leaves without tearing its modules down, and loses nothing by it.

:func:`exit_without_teardown` ends the process with ``os._exit`` after doing what
Python's own exit does first: it joins the non-daemon threads, runs the ``atexit``
handlers and flushes stdout and stderr, and the exit status is the command's.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent(
    """
    import atexit, sys, threading, time
    from pathlib import Path
    from ale_robotics.cli.main import exit_without_teardown

    out = Path(sys.argv[1])
    atexit.register(lambda: (out / "atexit").write_text("ran"))

    def late() -> None:
        time.sleep(0.3)
        (out / "thread").write_text("joined")

    threading.Thread(target=late).start()  # not a daemon: exit waits for it
    sys.stdout.write("no newline, still flushed")
    sys.stderr.write("stderr too")
    exit_without_teardown(int(sys.argv[2]) if sys.argv[2] != "none" else None)
    print("not reached")
    """
)


@pytest.mark.parametrize(("code", "status"), [("3", 3), ("0", 0), ("none", 0)])
def test_it_exits_with_the_status_after_threads_atexit_and_flushing(
    tmp_path: Path, code: str, status: int
) -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path), code],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == status, out.stderr
    assert out.stdout == "no newline, still flushed"
    assert out.stderr == "stderr too"
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "thread").read_text() == "joined"


def test_a_code_that_is_not_a_status_is_left_to_python(tmp_path: Path) -> None:
    code = (
        "from ale_robotics.cli.main import exit_without_teardown\n"
        "exit_without_teardown('a message')\n"
        "raise SystemExit('a message')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and out.stderr.strip() == "a message"
