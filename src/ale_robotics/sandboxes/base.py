"""The sandbox interface: what the harness asks of any way of confining an agent.

A :class:`Sandbox` is one way of running the untrusted agent
(docs/architecture.md#the-parts-and-who-trusts-whom):
``bwrap`` (Linux namespaces on this host), ``docker`` (a container of the agent's
image), ``none`` (not confined at all). The harness never asks which one it has; it
asks the sandbox, in this order:

1. **before the run** (nothing exists yet): is it available here
   (:meth:`Sandbox.unavailable`, with what to install), does it take these options
   (:attr:`Sandbox.options`), and can the agent command start in it
   (:meth:`Sandbox.check_command`);
2. **prepare** (:meth:`Sandbox.prepare`, a context manager): register what it will
   show of the host (so that no directory of another run is made where it can see
   it), make what confines the agent (a cgroup with the run's limits, a container),
   and **wrap** the agent command into the command the harness starts
   (:attr:`Confinement.argv`, :attr:`Confinement.env`);
3. **while the agent runs**, through the :class:`Confinement`: ``attach`` the started
   process, ``sample`` its counters, ``freeze``/``thaw`` it (while a host-timed job is
   evaluated), ``kill_all`` that is left at its end, ``close`` for what it used;
4. **after**: its exit code as the sandbox saw it, and :meth:`Confinement.check_started`
   (did the sandbox run the agent at all, or fail to start: infrastructure, not a 0);
5. **describe** itself for the trajectory and the report: its :attr:`Sandbox.name`
   (``result.json``'s ``sandbox``), what confined the agent (:attr:`Confinement.cgroup`,
   with what was not capped in :attr:`Confinement.cgroup_warning`) and what else the
   ``agent_launched`` event records (:meth:`Confinement.describe`: an image and its id).

Implementations are registered by name (:mod:`.registry`) and all pass the same
contract tests (``tests/sandboxes/``).
"""

from __future__ import annotations

import contextlib
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Protocol

from ale_robotics.sandboxes.cgroups import Limits, Usage

__all__ = ["AGENT_HOME", "AgentCommand", "AgentLaunch", "AgentWrap", "Confinement", "Sandbox"]


class AgentWrap(Protocol):
    """Wraps the agent command to start it behind the model gateway's relay.

    By default for a sandbox that runs the host's files (the host's Python, the relay's
    file and the gateway's socket directory at their host paths); a container passes
    its image's ``python``, the relay's file in the image and where it mounts the
    socket directory.
    """

    def __call__(
        self,
        argv: Sequence[str],
        python: str = ...,
        *,
        relay: str | None = ...,
        socket_dir: str | None = ...,
    ) -> list[str]: ...


@dataclass(frozen=True)
class AgentCommand:
    """The agent command as the pre-run check sees it (:meth:`Sandbox.check_command`)."""

    text: str
    """The ``--agent`` command as given."""
    argv: tuple[str, ...]
    """For a sandbox that runs the host's files (:attr:`Sandbox.host_files`): the command
    with workspace paths made absolute; else as given."""
    workspace: Path
    program: str | None = None
    """The program it starts, found on the host (host sandboxes only)."""
    script: str | None = None
    """The file its interpreter is asked to run (``python x.py``: ``x.py``), if any."""
    tools: tuple[Path, ...] = ()
    """The run's ``--agent-tools`` directories (shown read-only, their bins on PATH)."""


AGENT_HOME = "home"
"""The agent's ``HOME``: a directory of this name in its scratch directory."""


@dataclass(frozen=True)
class AgentLaunch:
    """What a sandbox needs to start one run's agent; the harness fills it in."""

    run_id: str
    task_id: str
    agent_cmd: str
    """The ``--agent`` command as given."""
    endpoint: str
    """The agent channel's address (a sandbox without network needs ``unix://...``)."""
    token: str
    """The run's agent token."""
    workspace: Path
    """The agent's code and data, shown read-only (host sandboxes)."""
    scratch: Path
    """The agent's working directory (exists), writable."""
    submission: Path
    """The submission directory, writable."""
    limits: Limits
    """CPU, memory and process caps the sandbox applies."""
    disk_quota_bytes: int
    """The most any one file the agent writes may hold (the harness watches the total)."""
    hidden_modules: tuple[str, ...] = ()
    """Modules the agent must not import (``metaworld.policies``; a hidden simulator)."""
    private_dirs: tuple[Path, ...] = ()
    """Directories of the harness no agent may see (this run's directory and runs root,
    the evaluator's state dir); every recorded run directory and the state home are
    added by the sandbox itself (:mod:`.run_dirs`)."""
    task_dir: Path | None = None
    """The run's task packet (:mod:`ale_robotics.tasks.packet`), shown read-only and named
    by ``ALE_TASK_DIR`` (None: no packet)."""
    extra_env: Mapping[str, str] = field(default_factory=dict)
    """More variables for the agent (the model gateway's base URLs and run keys)."""
    extra_rw: tuple[Path, ...] = ()
    """More host directories to show writable at their own path (the model gateway's
    socket directory)."""
    wrap: AgentWrap | None = None
    """Wraps the agent command inside the sandbox (the model gateway's relay)."""
    tools: tuple[Path, ...] = ()
    """Directories of agent software (``--agent-tools``), shown read-only at their own
    path, each one's ``bin/`` (else itself) first on ``PATH``."""
    shown: tuple[Path, ...] = ()
    """More host directories shown read-only at their own path and put on no ``PATH``: an
    engine environment the agent trains with (its build and its interpreter's
    installation). Host sandboxes only; an agent image has its own software."""
    home: Path | None = None
    """The agent's ``HOME``: a writable directory of its own inside the scratch directory
    (so what its software keeps there counts against the disk quota); None: ``/tmp``."""


class Confinement(ABC):
    """One agent's prepared sandbox: the command to start, and its handle while it runs.

    The harness starts :attr:`argv` with :attr:`env` (and :attr:`pass_fds` open in the
    child), enters :attr:`procs_files` before exec, then calls :meth:`attach` with the
    process. ``close`` may be called more than once.
    """

    argv: list[str]
    env: dict[str, str]
    pass_fds: tuple[int, ...] = ()
    procs_files: list[Path]
    """The cgroup the agent's launcher enters before exec (empty: none to enter)."""
    cgroup: str = "none"
    """What measures and caps the agent: 'v1', 'v2' (the run's cgroup), 'docker' (its
    container's), 'none'."""
    cgroup_warning: str | None = None
    """What of the agent's CPU and memory is not capped or measured (final after close)."""

    def describe(self) -> dict[str, object]:
        """What the trajectory's ``agent_launched`` event records of it besides its name
        (e.g. the container image and its id)."""
        return {}

    @abstractmethod
    def attach(self, proc: subprocess.Popen[bytes]) -> None:
        """The agent's launcher was started as ``proc``: close what the child inherited,
        check that it is confined (its cgroup), remember it for freezing."""

    def sample(self) -> None:  # noqa: B027  (a hook: most need not sample)
        """Read the counters while the agent runs (some vanish with it)."""

    @abstractmethod
    def cpu_s(self) -> float | None:
        """CPU time the agent used so far (None: not measured)."""

    @abstractmethod
    def freeze(self) -> str:
        """Stop every process of the agent at once; returns how, in words."""

    @abstractmethod
    def thaw(self) -> None:
        """Undo :meth:`freeze`."""

    @abstractmethod
    def kill_all(self) -> None:
        """Kill whatever of the agent is still running (the harness killed its process
        group already: this is what left it)."""

    @abstractmethod
    def close(self) -> Usage | None:
        """Kill what is left, release what was made (cgroup, container); what it used
        (None: nothing measured it)."""

    def exit_code(self, launcher_code: int | None) -> int | None:
        """The agent's exit status, from the launcher's (its own, by default)."""
        return launcher_code

    def check_started(  # noqa: B027  (a hook: a process that was started did start)
        self, *, killed: bool, log_path: Path, oom: str | None
    ) -> None:
        """Raise :class:`~.errors.HarnessError` when the sandbox never ran the agent
        command (the agent's log holds the sandbox's own messages too). ``killed``: the
        harness stopped it at a limit, which is no failure to start; ``oom``: how the
        harness words an OOM kill of the agent, if there was one."""


class Sandbox(ABC):
    """One way of confining the agent; see the module docstring.

    Subclasses set :attr:`name` (the key it is registered under) and what the class
    attributes below say; an instance carries its options (:attr:`options`).
    """

    name: ClassVar[str]
    isolates: ClassVar[bool] = True
    """False for a sandbox that does not confine the agent at all (the CLI warns)."""
    auto_rank: ClassVar[int | None] = None
    """``--sandbox auto`` takes the available sandbox of the lowest rank; None: never
    (only when asked for by name)."""
    host_files: ClassVar[bool] = True
    """The agent command runs the host's files (its workspace, this Python); False: its
    own (an image), so the host-side checks of the command do not apply."""
    serves_model_gateway: ClassVar[bool] = True
    """It can show the agent the run's model gateway (:attr:`AgentLaunch.extra_env`,
    ``extra_rw`` and ``wrap``); False: a run with ``--model-upstream`` is refused."""
    options: ClassVar[frozenset[str]] = frozenset()
    """The run options it takes besides ``sandbox`` and ``workspace`` (e.g. ``agent_image``),
    passed to the constructor by keyword."""

    @classmethod
    def unavailable(cls) -> str | None:
        """None when it can start here; else why not and what to install or run."""
        return None

    def check_command(self, cmd: AgentCommand) -> None:  # noqa: B027  (a hook)
        """Refuse (``InvalidArgumentError``, saying what to do) an agent command that
        cannot start inside; warn on stderr about what it will not see."""

    @abstractmethod
    @contextlib.contextmanager
    def prepare(self, launch: AgentLaunch) -> Iterator[Confinement]:
        """The agent's confinement, registered and ready to start, until the block ends
        (then closed and unregistered, whatever happened)."""
