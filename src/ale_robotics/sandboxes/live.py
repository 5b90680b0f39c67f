"""The agent sandboxes running now on this host, and what each one shows of it.

A bubblewrap sandbox binds the workspace live: a directory made under it after the
sandbox started shows up inside, and an agent that once opened it keeps it however
it is covered later. A directory of the harness (a run directory, a runs root, a
submission or state dir) must therefore be hidden from the moment it exists, so the
harness makes one only where no running sandbox can see it. This module is how it
knows: each sandbox is registered here, with its mount plan
(:mod:`.mount_plan`), from before it starts until it has ended; :func:`watching`
answers "which running sandbox would show this path?".

Storage: one small JSON file per sandbox in ``STATE_HOME/sandboxes/`` (0700; no
sandbox shows the state home), written whole and renamed into place, removed when
the agent phase ends. An entry whose harness process is gone (killed outright; its
sandbox died with it, ``--die-with-parent``) is ignored and swept; the process is
recognised by its pid *and* its start time, so a reused pid does not keep a dead
entry alive. The docker sandbox is registered too: it shows only its own scratch,
submission and socket directories, so nothing is refused on its account unless a
directory is made inside those.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from ale_robotics.paths import state_home
from ale_robotics.sandboxes.mount_plan import Mount, shows

__all__ = ["LiveSandbox", "SandboxLease", "live_sandboxes", "register", "watching"]


def registry_dir() -> Path:
    """``STATE_HOME/sandboxes``: one file per running sandbox."""
    return state_home() / "sandboxes"


def _start_ticks(pid: int) -> int | None:
    """The process's start time (clock ticks since boot, /proc/PID/stat field 22); None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    try:  # the command name (field 2) may hold spaces and parentheses: split after it
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (IndexError, ValueError):
        return None


@dataclass(frozen=True)
class LiveSandbox:
    """One registered sandbox: whose it is, since when, and what it shows."""

    run_id: str
    pid: int
    """The harness process that runs it (the sandbox dies with it)."""
    pid_start: int
    started_at: str
    kind: str
    """``bwrap`` or ``docker``."""
    workspace: str
    mounts: tuple[Mount, ...]

    def alive(self) -> bool:
        if self.pid_start == -1:  # no /proc where it was registered: the pid alone
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                return True
            return True
        return _start_ticks(self.pid) == self.pid_start

    def shows(self, path: Path) -> bool:
        """Would the agent of this sandbox see ``path`` (as it is on the host now)?"""
        return shows(self.mounts, path)

    def describe(self) -> str:
        """How a message names it: run, process and workspace."""
        where = f", workspace {self.workspace}" if self.workspace else ""
        return (
            f"run {self.run_id} (its agent has been running in a {self.kind} sandbox since "
            f"{self.started_at}, harness pid {self.pid}{where})"
        )

    def to_json(self) -> str:
        doc = asdict(self)
        doc["mounts"] = [asdict(m) for m in self.mounts]
        return json.dumps(doc)

    @classmethod
    def from_json(cls, text: str) -> LiveSandbox:
        doc = json.loads(text)
        doc["mounts"] = tuple(Mount(**m) for m in doc["mounts"])
        return cls(**doc)


class SandboxLease:
    """A sandbox's registration; :meth:`update` rewrites its mounts, :meth:`close` ends it."""

    def __init__(self, path: Path, entry: LiveSandbox) -> None:
        self.path = path
        self.entry = entry
        self._write()

    def _write(self) -> None:
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, self.entry.to_json().encode("utf-8"))
        finally:
            os.close(fd)
        os.replace(tmp, self.path)  # readers see the old entry or the new one, whole

    def update(self, mounts: Sequence[Mount]) -> None:
        if tuple(mounts) != self.entry.mounts:
            self.entry = LiveSandbox(**{**self.entry.__dict__, "mounts": tuple(mounts)})
            self._write()

    def close(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


@contextlib.contextmanager
def register(
    run_id: str, kind: str, workspace: Path | None, mounts: Sequence[Mount]
) -> Iterator[SandboxLease]:
    """Register a sandbox about to start (this process runs it) until the block ends."""
    folder = registry_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    pid = os.getpid()
    start = _start_ticks(pid)
    entry = LiveSandbox(
        run_id=run_id,
        pid=pid,
        pid_start=start if start is not None else -1,
        started_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        kind=kind,
        workspace=str(workspace) if workspace is not None else "",
        mounts=tuple(mounts),
    )
    lease = SandboxLease(folder / f"{run_id}-{pid}-{uuid.uuid4().hex[:8]}.json", entry)
    try:
        yield lease
    finally:
        lease.close()


def live_sandboxes() -> list[LiveSandbox]:
    """Every registered sandbox whose harness process is still running; dead entries
    are removed (best effort: another harness may be removing them too)."""
    try:
        names = sorted(os.listdir(registry_dir()))
    except OSError:
        return []
    out = []
    for name in names:
        if not name.endswith(".json") or name.startswith("."):
            continue
        path = registry_dir() / name
        try:
            entry = LiveSandbox.from_json(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            continue  # ended while we listed
        except (OSError, ValueError, TypeError, KeyError):
            continue  # not ours to judge; it cannot name a live sandbox we could trust
        if entry.alive():
            out.append(entry)
        else:
            with contextlib.suppress(OSError):
                path.unlink()
    return out


def watching(paths: Sequence[Path]) -> tuple[LiveSandbox, Path] | None:
    """The first running sandbox that shows one of ``paths``, and that path; None if none."""
    for entry in live_sandboxes():
        for p in paths:
            if entry.shows(p):
                return entry, p
    return None
