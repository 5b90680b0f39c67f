"""``ale-robotics run`` before its run starts: usage errors cheaply, Ctrl-C in words (issue 48.12).

* A usage error (a missing script, ``--episodes`` out of range, a file where the state
  dir belongs) was found once the whole harness and evaluator were imported and the
  evaluator's workers started: 4-9 s under load, where an unknown task took 0.9 s. The
  checks now come first: the heavy modules are not even imported when one is reported
  (what is imported, not how long it took, so the test holds on any host).
* Ctrl-C in the first seconds printed nothing (or a traceback of the import it cut
  short). Now it says that the run was interrupted before it started and that nothing
  was created, and nothing was: no run directory, no runs root, no state dir, no run
  recorded in the harness's state home.

Real processes: ``python -X importtime`` for what a process imported; real signals,
sent while the process provably is where the test says (blocked reading a FIFO, or in
the import the test's import hook names).
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "ale_robotics"]
TASK = "td3-inverted-pendulum-v2"
ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "mujoco", "grpc", "gymnasium", "scipy", "cryptography", "matplotlib")
"""What a run needs once it starts, and a usage error never did (each was imported
before a usage error was reported: 2,161 modules then, 421 after)."""
NOTHING_CREATED = "before the run started; nothing created"


def _imported(stderr: str) -> set[str]:
    """The top-level packages ``python -X importtime`` says the process imported."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            names.add(name.split(".")[0])
    return names


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--agent", "python nosuchfile.py"], "the script nosuchfile.py does not exist"),
        (["--episodes", "99"], "--episodes 99: td3-inverted-pendulum-v2 evaluates 10 episode"),
        (["--state-dir", "{file}"], "is a file; the evaluator's state dir must be a directory"),
        (["--run-dir", "{file}/run"], "cannot be made: {file} is a file, not a directory"),
    ],
    ids=["no-script", "episodes", "state-dir-file", "run-dir-under-a-file"],
)
def test_a_usage_error_is_reported_before_the_heavy_modules_are_imported(
    tmp_path: Path, args: list[str], message: str
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    args = [a.replace("{file}", str(a_file)) for a in args]
    base = ["--agent", f"{sys.executable} -c pass", "--sandbox", "none"]
    if "--agent" in args:
        base = base[2:]
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "ale_robotics", "run", TASK, *base, *args],
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert len(errors) == 1 and message.replace("{file}", str(a_file)) in errors[0], errors
    loaded = sorted(_imported(proc.stderr) & set(HEAVY))
    assert not loaded, f"imported before the usage error was reported: {loaded}"
    assert not (tmp_path / "runs").exists()


def test_a_run_that_starts_imports_them_after_its_checks(tmp_path: Path) -> None:
    """The other side of the test above: the harness does import them, once it is past
    its checks (an unknown evaluator fails the run after that)."""
    args = ["--agent", f"{sys.executable} -c pass", "--sandbox", "none", "--episodes", "1"]
    dirs = ["--state-dir", str(tmp_path / "state"), "--run-dir", str(tmp_path / "run")]
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "ale_robotics", "run", TASK, *args, *dirs],
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert {"grpc", "mujoco", "gymnasium", "numpy"} <= _imported(proc.stderr)


_INTERRUPTED_IMPORT = """
import os, signal, sys
# Python's own Ctrl-C, as from a terminal: a test run started in the background (nohup, a
# non-interactive shell's &) inherits SIGINT ignored, and Python then keeps it ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)

class SigintOnImport:
    # Ctrl-C as the command line imports {module}: a real SIGINT to this process.
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.argv = ["ale-robotics", *sys.argv[1:]]
from ale_robotics.cli.main import main  # what the console script does
sys.meta_path.insert(0, SigintOnImport())
main()
"""


@pytest.mark.parametrize("module", ["typer", "pydantic", "ale_robotics.harness.options.flags"])
def test_ctrl_c_while_the_command_line_loads(tmp_path: Path, module: str) -> None:
    """Before any handler of the run's is installed: Python's KeyboardInterrupt, cutting an
    import short (a traceback of it, before)."""
    work = tmp_path / "work"
    work.mkdir()
    run_args = ["--agent", f"{sys.executable} -c pass", "--sandbox", "none"]
    run_args += ["--state-dir", str(tmp_path / "state")]
    proc = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_IMPORT.format(module=module), "run", TASK, *run_args],
        cwd=work,
        env={**os.environ, "COLUMNS": "200", "XDG_STATE_HOME": str(tmp_path / "xdg")},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.strip() == f"interrupted (SIGINT) {NOTHING_CREATED}"
    assert not [p.name for p in tmp_path.iterdir() if p.name != "work"]
    assert not list(work.iterdir())


def _reader_waits(fifo: Path, proc: subprocess.Popen[str]) -> int:
    """Open ``fifo`` for writing once a reader waits on it (the harness reading it as its
    harness token); the descriptor. Non-blocking opens fail (ENXIO) until then."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
        time.sleep(0.02)
    raise AssertionError(f"the harness never read its token file (exit {proc.poll()})")


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_the_checks_stops_the_run_before_anything_is_made(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    """The signal arrives while the harness checks its options: it reads the separate
    evaluator's harness token, a FIFO that the test writes only after the signal. Before,
    the checks went on and the run started (or said nothing); now the run stops at the
    next safe point, before it makes anything, and says so."""
    work, xdg = tmp_path / "work", tmp_path / "xdg"
    work.mkdir()
    fifo = tmp_path / "harness.token"
    os.mkfifo(fifo)
    run_dir = tmp_path / "run"
    args = ["--agent", f"{sys.executable} -c pass", "--sandbox", "none", "--run-dir", str(run_dir)]
    remote = ["--evaluator", f"unix://{tmp_path}/agent/agent.sock", "--harness-token-file"]
    proc = subprocess.Popen(
        [*CLI, "run", TASK, *args, *remote, str(fifo)],
        cwd=work,
        env={**os.environ, "COLUMNS": "200", "XDG_STATE_HOME": str(xdg)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        fd = _reader_waits(fifo, proc)
        proc.send_signal(sig)
        os.write(fd, b"t0ken\n")
        os.close(fd)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, err
    assert err.strip().splitlines()[-1] == f"interrupted ({sig.name}) {NOTHING_CREATED}", err
    assert "Traceback" not in err and out == ""
    assert not run_dir.exists() and not list(work.iterdir())
    assert not (xdg / "ale-robotics" / "run-dirs.jsonl").exists()
