"""Where an eval set's runs live, and what each run directory already holds.

Every run of the grid has one deterministic directory,
``RUNS_ROOT/SET/TASK/LABEL/rep<k>/`` (the ``--run-dir`` of its ``ale-robotics run``),
and its output log beside it, ``rep<k>.log`` (beside, because ``run`` wants its
directory new or empty). Deterministic paths are what make a set resumable: the
second invocation finds the first one's runs without any state file of its own.

A slot is *done* when its ``result.json`` is a completed run report of the same task,
agent command and smoke setting; it is never run again. An interrupted or failed
report, a directory without a report (a run killed outright), or one that cannot be
read as a report is redone from an empty directory. A completed report of another
command or episode count is refused (:class:`InvalidArgumentError`) rather than
mixed into the aggregate or deleted: the SPEC changed under an existing set.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import ValidationError

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.evalset.spec import EvalSetSpec
from ale_robotics.harness.report import RunReport, StoppedRunReport, load_run_report

__all__ = [
    "RunSlot",
    "SetPlace",
    "SlotStatus",
    "clear_run_dir",
    "inspect_slot",
    "plan_slots",
    "set_dir",
    "set_place",
]

_REP = re.compile(r"rep(0|[1-9][0-9]{0,5})")


@dataclass(frozen=True)
class RunSlot:
    """One cell of the grid: agent ``label`` on ``task_id``, repetition ``rep`` (0-based)."""

    task_id: str
    label: str
    cmd: str
    rep: int
    run_dir: Path

    @property
    def log_path(self) -> Path:
        """The ``ale-robotics run`` output (stdout and stderr), next to the run directory."""
        return self.run_dir.with_name(f"{self.run_dir.name}.log")

    @property
    def key(self) -> str:
        """``TASK/LABEL/rep<k>``: how messages name the slot."""
        return f"{self.task_id}/{self.label}/rep{self.rep}"


@dataclass(frozen=True)
class SlotStatus:
    """What a slot's directory holds now: ``done`` (a matching completed report),
    ``redo`` (a stopped, partial or unreadable run: it is cleared and run again) or
    ``new`` (nothing there yet)."""

    slot: RunSlot
    state: Literal["done", "redo", "new"]
    report: RunReport | None = None
    reason: str = ""


@dataclass(frozen=True)
class SetPlace:
    """Where a run sits in an eval set: the set's name and its repetition (0-based)."""

    set_name: str
    rep: int


def set_place(relative: PurePosixPath | str, task_id: str, label: str) -> SetPlace | None:
    """The eval set and repetition of the run at ``relative`` (its directory, relative to
    the runs root) whose report says ``task_id`` and ``label``: the run sits at
    ``SET/TASK/LABEL/rep<k>`` (:func:`plan_slots`); None for a run outside any set."""
    parts = PurePosixPath(relative).parts
    if len(parts) != 4 or parts[1] != task_id or parts[2] != label:
        return None
    match = _REP.fullmatch(parts[3])
    if match is None or parts[0].startswith("."):
        return None
    return SetPlace(parts[0], int(match.group(1)))


def set_dir(runs_root: Path, name: str) -> Path:
    """The set's directory under ``runs_root``."""
    return runs_root / name


def plan_slots(spec: EvalSetSpec, runs_root: Path, name: str) -> list[RunSlot]:
    """Every run of the set, repetition-major (rep 0 of every task and agent, then rep 1...).

    That order makes an interrupted set's partial results balanced: every cell has
    about as many runs as any other, instead of the first task having all of its.
    """
    root = set_dir(runs_root, name)
    return [
        RunSlot(task, agent.label, agent.cmd, rep, root / task / agent.label / f"rep{rep}")
        for rep in range(spec.repetitions)
        for task in spec.tasks
        for agent in spec.agents
    ]


def inspect_slot(slot: RunSlot, spec: EvalSetSpec) -> SlotStatus:
    """Classify ``slot``'s directory (see the module docstring); raises
    :class:`InvalidArgumentError` for a completed run that is not this slot's run."""
    if not slot.run_dir.exists():
        return SlotStatus(slot, "new")
    if not slot.run_dir.is_dir():
        raise InvalidArgumentError(
            f"{slot.run_dir} is a file, where the eval set keeps the run {slot.key}; "
            "move it away and run the set again"
        )
    result = slot.run_dir / "result.json"
    if not result.exists():
        if not any(slot.run_dir.iterdir()):
            return SlotStatus(slot, "new")
        return SlotStatus(slot, "redo", reason="no result.json (the run never finished)")
    try:
        report = load_run_report(result)
    except (OSError, ValueError, ValidationError) as exc:
        return SlotStatus(slot, "redo", reason=f"result.json unreadable ({type(exc).__name__})")
    if isinstance(report, StoppedRunReport):
        return SlotStatus(slot, "redo", reason=report.state)
    mismatch = _mismatch(report, slot, spec)
    if mismatch:
        raise InvalidArgumentError(
            f"{slot.run_dir} holds a completed run of {mismatch}: the SPEC changed since "
            "that run. Give the set a new name ('name:' in the SPEC) to keep both, or "
            f"remove {slot.run_dir.parents[2]} to start the set over"
        )
    return SlotStatus(slot, "done", report=report)


def _mismatch(report: RunReport, slot: RunSlot, spec: EvalSetSpec) -> str:
    if report.task_id != slot.task_id:
        return f"task {report.task_id!r}, not {slot.task_id!r}"
    if report.agent_cmd != slot.cmd:
        return f"agent command {report.agent_cmd!r}, not {slot.cmd!r}"
    episodes = report.smoke_run.episodes if report.smoke_run is not None else None
    if episodes != spec.episodes:
        shown = "the full protocol" if episodes is None else f"{episodes} smoke episode(s)"
        wanted = "the full protocol" if spec.episodes is None else f"{spec.episodes}"
        return f"{shown}, not {wanted}"
    return ""


def clear_run_dir(path: Path) -> None:
    """Remove a stopped or partial run directory, so ``ale-robotics run`` gets it empty.

    Agents may leave read-only files and directories in their scratch directory, so a
    permission error is answered by making the entry writable and trying again.
    """

    def retry(func: Callable[..., object], p: str, _exc: object) -> None:
        parent = os.path.dirname(p)
        os.chmod(parent, os.stat(parent).st_mode | stat.S_IWUSR | stat.S_IXUSR)
        if os.path.isdir(p) and not os.path.islink(p):
            os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR | stat.S_IXUSR | stat.S_IRUSR)
        func(p)

    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path, onerror=retry)
