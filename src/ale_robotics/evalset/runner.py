"""Running an eval set's grid: ``ale-robotics run`` subprocesses, a few at a time.

Each run is a separate ``ale-robotics run`` process (``python -m ale_robotics run``
with this interpreter), exactly what a person would type: the same preflight, the
same embedded evaluator, sandbox, budget, signed trajectory and ``result.json``.
Nothing here scores anything or talks to an evaluator; the set only starts runs,
watches them, and reads their reports afterwards (the import contract in
``.importlinter`` holds it to that).

Each child gets a session of its own, so a terminal's Ctrl-C reaches only this
process, which then stops the set in order: no new run starts, every running child
gets the same signal (SIGINT or SIGTERM) and stops the way ``run`` always does (its
jobs cancelled, ``result.json`` saying ``interrupted``), and the set returns with the
signal's name; the command line exits 130 (143). A second signal, or a child still
running ``grace_s`` later, gets SIGKILL. Either way the next invocation redoes those
runs and skips the completed ones (:mod:`.layout`).

Two invocations on the same set would run the same slots, so the set's directory is
locked (``flock`` on ``.eval-set.lock``) while one runs; the second is refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Literal

from pydantic import ValidationError

from ale_robotics.errors import FailedPreconditionError
from ale_robotics.evalset.layout import (
    RunSlot,
    SlotStatus,
    clear_run_dir,
    inspect_slot,
    plan_slots,
    set_dir,
)
from ale_robotics.evalset.spec import EvalSetSpec
from ale_robotics.harness.report import RunReport, StoppedRunReport, load_run_report
from ale_robotics.sandboxes.run_dirs import new_private_dirs

__all__ = [
    "LOCK_FILE",
    "EvalSetRunner",
    "RunEvent",
    "RunOutcome",
    "SetOutcome",
    "default_jobs",
    "prepare",
]

LOCK_FILE = ".eval-set.lock"

OutcomeState = Literal["skipped", "completed", "failed", "interrupted", "not_run"]


def agent_seed(set_name: str, task_id: str, label: str, rep: int) -> int:
    """The training seed a slot's run gives its agent (``ALE_SEED``): the first 31 bits of
    SHA-256 of ``set/task/label/rep``, so that each repetition trains differently and a
    rerun of the set trains the same way again."""
    digest = hashlib.sha256(f"{set_name}/{task_id}/{label}/{rep}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1


def default_jobs() -> int:
    """Runs at once by default: ``min(cores, 2)``. Each run has its own evaluator and
    rollout workers, so more parallel runs mostly fight over the same cores."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, 2))


@dataclass(frozen=True)
class RunOutcome:
    """How one slot ended in this invocation (``skipped``: done before it)."""

    slot: RunSlot
    state: OutcomeState
    run_id: str | None = None
    score: float | None = None
    score_status: str | None = None
    exit_code: int | None = None
    wall_s: float = 0.0
    message: str = ""
    agent_failure: str | None = None
    """A completed (or skipped) run whose agent ended in error without submitting: how
    (:attr:`RunReport.agent_failure`); it is scored all the same."""


@dataclass(frozen=True)
class RunEvent:
    """Progress for the caller to show: a run ``start``-ed or ``end``-ed, or the set is
    ``stopping``; ``done`` and ``total`` count slots finished (skipped included)."""

    kind: Literal["start", "end", "stopping"]
    done: int
    total: int
    slot: RunSlot | None = None
    outcome: RunOutcome | None = None
    message: str = ""


@dataclass
class SetOutcome:
    """Every slot's outcome, in grid order, and the signal that stopped the set."""

    name: str
    root: Path
    outcomes: list[RunOutcome]
    stopped_by: str | None = None
    skipped: int = 0

    @property
    def completed(self) -> list[RunOutcome]:
        return [o for o in self.outcomes if o.state in ("completed", "skipped")]

    @property
    def not_completed(self) -> list[RunOutcome]:
        return [o for o in self.outcomes if o.state not in ("completed", "skipped")]

    @property
    def agent_failed(self) -> list[RunOutcome]:
        """Completed runs (skipped ones too) whose agent ended in error without submitting."""
        return [o for o in self.completed if o.agent_failure is not None]


def prepare(spec: EvalSetSpec, name: str, runs_root: Path) -> list[SlotStatus]:
    """Every slot's status, checked before anything runs (a completed run of another
    command or episode count raises :class:`InvalidArgumentError` here)."""
    return [inspect_slot(slot, spec) for slot in plan_slots(spec, runs_root, name)]


def _outcome_of_done(status: SlotStatus) -> RunOutcome:
    report = status.report
    assert report is not None
    return RunOutcome(
        status.slot,
        "skipped",
        run_id=report.run_id,
        score=report.score.score,
        score_status=report.score.status,
        exit_code=0,
        wall_s=report.wall_s,
        agent_failure=report.agent_failure,
    )


def _last_line(path: Path) -> str:
    """The log's last line that says something, preferring an ``error:`` line."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 16384))
            tail = fh.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    lines = [ln.strip() for ln in tail if ln.strip()]
    errors = [ln for ln in lines if ln.lower().startswith("error")]
    return (errors or lines or [""])[-1][:300]


@dataclass
class _Child:
    slot: RunSlot
    proc: subprocess.Popen[bytes]
    log: IO[bytes]
    started: float
    killed: bool = False


@dataclass
class _Signals:
    """The first signal stops the set; a second one kills what is still stopping."""

    first: str | None = None
    kill: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, signum: int, _frame: FrameType | None) -> None:
        with self._lock:
            if self.first is None:
                self.first = signal.Signals(signum).name
            else:
                self.kill = True


@contextlib.contextmanager
def _signals_to(state: _Signals) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # no handlers off the main thread: KeyboardInterrupt stays Python's
        return
    previous = {s: signal.signal(s, state.handle) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
            raise FailedPreconditionError(
                f"another eval-set is running the set in {root} (pid {holder}); wait for it "
                "to finish or stop it (Ctrl-C), then run this again"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


class EvalSetRunner:
    """Runs the slots of a set that are not done, at most ``jobs`` at a time."""

    def __init__(
        self,
        spec: EvalSetSpec,
        name: str,
        runs_root: Path,
        *,
        jobs: int | None = None,
        cli: Sequence[str] | None = None,
        on_event: Callable[[RunEvent], None] | None = None,
        grace_s: float = 60.0,
        poll_s: float = 0.1,
    ) -> None:
        if jobs is not None and jobs < 1:
            raise ValueError("jobs must be at least 1")
        self.spec = spec
        self.name = name
        self.runs_root = runs_root.absolute()
        self.jobs = jobs or default_jobs()
        self.cli = list(cli) if cli is not None else [sys.executable, "-m", "ale_robotics"]
        self.on_event = on_event or (lambda _e: None)
        self.grace_s = grace_s
        self.poll_s = poll_s

    @property
    def root(self) -> Path:
        return set_dir(self.runs_root, self.name)

    def command(self, slot: RunSlot) -> list[str]:
        """The ``ale-robotics run`` command line of ``slot``: its own options (its
        repetition and training seed, :func:`agent_seed`, included), then the set's
        (:meth:`~.spec.EvalSetSpec.run_flags`)."""
        cmd = [*self.cli, "run", slot.task_id, "--agent", slot.cmd]
        cmd += ["--run-dir", str(slot.run_dir), "--label", slot.label]
        seed = agent_seed(self.name, slot.task_id, slot.label, slot.rep)
        cmd += ["--repetition", str(slot.rep), "--agent-seed", str(seed)]
        return cmd + self.spec.run_flags()

    def run(self) -> SetOutcome:
        """Run what is not done yet; returns when every slot ended or the set stopped.

        The runs root and the set's directory are recorded before they are made, so that
        every sandbox started afterwards (this set's runs' included) hides each of them
        whole: a run of the set made later, its submission and ``result.json``, never
        shows in another's sandbox. A sandbox already running that would see the set's
        directory refuses the set (:class:`~ale_robotics.sandboxes.run_dirs.VisibleToSandboxError`).
        """
        with new_private_dirs([(self.runs_root, "root"), (self.root, "root")]):
            self.root.mkdir(parents=True, exist_ok=True)
        with _locked(self.root):
            statuses = prepare(self.spec, self.name, self.runs_root)
            return self._run(statuses)

    def _run(self, statuses: list[SlotStatus]) -> SetOutcome:
        outcomes: dict[RunSlot, RunOutcome] = {
            s.slot: _outcome_of_done(s) for s in statuses if s.state == "done"
        }
        total = len(statuses)
        skipped = len(outcomes)
        pending = deque(s for s in statuses if s.state != "done")
        running: list[_Child] = []
        sig = _Signals()
        stopping_since: float | None = None
        with _signals_to(sig):
            try:
                while running or (pending and sig.first is None):
                    if sig.first is not None and stopping_since is None:
                        stopping_since = time.monotonic()
                        self._forward(running, sig.first)
                        self.on_event(
                            RunEvent(
                                "stopping",
                                len(outcomes),
                                total,
                                message=f"{sig.first}: stopping {len(running)} run(s); "
                                "rerun the same command to resume",
                            )
                        )
                    if stopping_since is not None and (
                        sig.kill or time.monotonic() - stopping_since > self.grace_s
                    ):
                        self._kill(running)
                    while sig.first is None and pending and len(running) < self.jobs:
                        running.append(self._start(pending.popleft(), len(outcomes), total))
                    for child in list(running):
                        if child.proc.poll() is None:
                            continue
                        running.remove(child)
                        outcome = self._finish(child, stopped=sig.first is not None)
                        outcomes[child.slot] = outcome
                        self.on_event(RunEvent("end", len(outcomes), total, child.slot, outcome))
                    if running:
                        time.sleep(self.poll_s)
            finally:
                self._kill(running)  # only after an unexpected error: nothing outlives us
                for child in running:
                    child.proc.wait()
                    child.log.close()
        ordered = [
            outcomes.get(s.slot, RunOutcome(s.slot, "not_run", message="not started"))
            for s in statuses
        ]
        return SetOutcome(self.name, self.root, ordered, stopped_by=sig.first, skipped=skipped)

    def _start(self, status: SlotStatus, done: int, total: int) -> _Child:
        slot = status.slot
        if status.state == "redo":
            clear_run_dir(slot.run_dir)
        slot.run_dir.parent.mkdir(parents=True, exist_ok=True)
        log = slot.log_path.open("wb")
        try:
            proc = subprocess.Popen(
                self.command(slot),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches us; we forward it (module doc)
            )
        except BaseException:
            log.close()
            raise
        redo = f" (redo: {status.reason})" if status.state == "redo" else ""
        self.on_event(RunEvent("start", done, total, slot, message=redo.strip()))
        return _Child(slot, proc, log, time.monotonic())

    @staticmethod
    def _forward(running: Sequence[_Child], signal_name: str) -> None:
        signum = signal.Signals[signal_name]
        for child in running:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.proc.pid, signum)

    @staticmethod
    def _kill(running: Sequence[_Child]) -> None:
        for child in running:
            if not child.killed and child.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(child.proc.pid, signal.SIGKILL)
                child.killed = True

    def _finish(self, child: _Child, *, stopped: bool) -> RunOutcome:
        child.log.close()
        slot, rc = child.slot, child.proc.returncode
        wall = time.monotonic() - child.started
        report: RunReport | StoppedRunReport | None = None
        try:
            report = load_run_report(slot.run_dir / "result.json")
        except (OSError, ValueError, ValidationError):
            report = None
        if isinstance(report, RunReport):
            return RunOutcome(
                slot,
                "completed",
                run_id=report.run_id,
                score=report.score.score,
                score_status=report.score.status,
                exit_code=rc,
                wall_s=wall,
                agent_failure=report.agent_failure,
            )
        run_id = report.run_id if report is not None else None
        if stopped or (isinstance(report, StoppedRunReport) and report.state == "interrupted"):
            return RunOutcome(
                slot,
                "interrupted",
                run_id=run_id,
                exit_code=rc,
                wall_s=wall,
                message="interrupted; the next invocation redoes it",
            )
        if isinstance(report, StoppedRunReport):
            why = report.reason
        else:
            why = _last_line(slot.log_path) or f"exited with code {rc} and no result.json"
        return RunOutcome(
            slot,
            "failed",
            run_id=run_id,
            exit_code=rc,
            wall_s=wall,
            message=f"{why} (log: {slot.log_path})",
        )
