"""The agent sandbox: a bubblewrap command line that runs the agent offline and nearly blind.

The agent is untrusted (docs/architecture.md#the-parts-and-who-trusts-whom). On one
machine without containers
we isolate it with Linux namespaces through ``bwrap`` (Debian package
``bubblewrap``), which needs no privileges where unprivileged user namespaces
are enabled (the Debian/Ubuntu default). The sandbox gets:

* **no network**: ``--unshare-all`` includes a fresh network namespace with only a
  loopback device of its own, so the host's ``127.0.0.1`` ports (and abstract Unix
  sockets) are unreachable. The evaluator is reached through its agent Unix
  socket, bind-mounted in.
* **an unprivileged identity**: uid/gid 65534 ("nobody") in a new user namespace,
  no capabilities, no nested user namespaces (``--disable-userns``, where bwrap
  has it: less kernel attack surface), its own session (``--new-session``: no
  TIOCSTI into the harness's terminal), its own PID namespace, and it dies with
  the harness (``--die-with-parent``).
* **a minimal file system**: read-only ``/usr`` (and the ``/bin``, ``/lib*``
  links), a few files of ``/etc`` (:data:`ETC_FILES`; not ``shadow``), the Python
  installation and the project's environment read-only (so the agent can use
  the SDK and its ML libraries, but cannot plant code in the venv that the
  evaluator's workers import), a private ``/tmp`` (also ``HOME``) and ``/dev/shm``
  (RAM-backed, so capped at ``tmp_size_bytes`` where bwrap supports ``--size``),
  its own ``/proc`` and a minimal ``/dev``; the workspace **read-only** (the
  agent's code and data: an agent that could write it could plant a git hook,
  a ``conftest.py`` or a ``Makefile`` that the operator runs next, as root);
  read-write only the run's scratch directory (also the working directory) and
  the submission directory. Everything else (the evaluator's state dir with the
  secret and the signing key, every run directory, the harness socket, the rest
  of the host) does not exist inside. ``hide`` covers paths inside the
  workspace (run directories, a nested state dir) with an empty tmpfs.

Paths keep their host names inside, so ``ALE_ENDPOINT`` and
``ALE_SUBMISSION_DIR`` need no rewriting.

**Socket permissions.** bwrap maps the sandbox uid 65534 to the uid that runs
bwrap, and the kernel checks file permissions against that host uid. An agent
socket created by the same user (the embedded evaluator: socket ``srwx------``
under umask 077, in a 0700 directory) is therefore reachable with no change.
An evaluator running as another user must make its agent socket writable by
the harness's user (for example group-writable with a shared group) and its
directory searchable. The socket's directory is bound, not the socket file, so
the agent reconnects after an evaluator restart; it must therefore hold nothing
but the agent socket (never the state dir, never the harness socket), which
:func:`bwrap_command` checks.

**Failure to start** is an infrastructure error (:class:`SandboxError`), never a
zero score. Pass ``status_fd`` and read it with :func:`read_sandbox_status` once
bwrap has exited to tell "the sandbox or the agent command did not start" (no
exit code reported; bwrap's reason is the last ``bwrap: ...`` line of its
stderr) from "the agent ran and exited non-zero".
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ale_robotics.dataplane.layout import data_socket_name
from ale_robotics.sandboxes.errors import SandboxError
from ale_robotics.sandboxes.hidden import IMPORT_BLOCKER
from ale_robotics.sandboxes.mount_plan import Mount, plan_mounts

__all__ = [
    "ETC_FILES",
    "SANDBOX_GID",
    "SANDBOX_UID",
    "SandboxError",
    "SandboxStatus",
    "bwrap_command",
    "default_python_paths",
    "read_sandbox_status",
    "require_sandbox",
    "sandbox_available",
    "sandbox_mounts",
    "sandbox_visible",
    "shown_trees",
]

SANDBOX_UID = 65534
SANDBOX_GID = 65534

ETC_FILES = (
    "passwd",  # getpwuid(65534) -> nobody; getpass and torch ask
    "group",
    "nsswitch.conf",
    "hosts",
    "localtime",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",  # Debian's libblas/liblapack symlinks point here
    "fonts",  # matplotlib
    "os-release",  # the distribution: Inspect's sandbox tools pick their build by it
)
"""The entries of the host's ``/etc`` the sandbox sees (read-only), when present."""

_ROOT_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")


@dataclass(frozen=True)
class SandboxStatus:
    """What bwrap reported on its ``--json-status-fd``.

    bwrap writes ``child-pid`` as soon as it has cloned the sandbox (before the
    mounts are set up, so that alone proves little) and ``exit-code`` only when
    the agent command itself ran and exited (128+N for a signal). No exit code
    after bwrap is gone means the sandbox could not be set up or the agent
    command could not be executed inside it, unless the harness killed it.
    """

    child_pid: int | None
    exit_code: int | None

    @property
    def agent_ran(self) -> bool:
        """True when the agent command ran inside the sandbox and exited."""
        return self.exit_code is not None


def _bwrap_path(bwrap: str | None) -> str:
    found = shutil.which(bwrap or "bwrap")
    if found is None:
        raise SandboxError(
            "bubblewrap is not installed (no 'bwrap' on PATH): install it "
            "(apt-get install bubblewrap) or run with --sandbox none, which does not isolate "
            "the agent"
        )
    return found


@functools.lru_cache(maxsize=8)
def _options(exe: str) -> frozenset[str]:
    """The long options this bwrap knows (0.8 added --disable-userns and --size)."""
    try:
        text = subprocess.run(
            [exe, "--help"], capture_output=True, timeout=10, check=False
        ).stdout.decode("utf-8", "replace")
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    return frozenset(w for w in text.split() if w.startswith("--"))


def _system_args(exe: str, tmp_size_bytes: int | None = None) -> list[str]:
    """Read-only system directories, the root links, /etc subset, proc, dev, tmp."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in _ROOT_LINKS:
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for name in ETC_FILES:
        path = Path("/etc") / name
        if path.exists():
            args += ["--ro-bind", str(path), str(path)]
    args += ["--proc", "/proc", "--dev", "/dev"]
    for tmp in ("/dev/shm", "/tmp"):
        if tmp_size_bytes is not None and "--size" in _options(exe):
            args += ["--size", str(tmp_size_bytes)]
        args += ["--tmpfs", tmp]
    return args


def default_python_paths() -> list[Path]:
    """What the agent needs read-only to run this Python with this project's environment.

    The virtual environment (``sys.prefix``), the interpreter installation it was
    made from (``sys.base_prefix``), and the directory holding the
    ``ale_robotics`` package when it is not inside them (an editable install).
    """
    import ale_robotics

    paths = [Path(sys.prefix), Path(sys.base_prefix)]
    package_root = Path(ale_robotics.__file__).resolve().parent.parent
    paths.append(package_root)
    out: list[Path] = []
    for p in paths:
        real = p.resolve()
        if not any(real == q or q in real.parents for q in out):
            out = [q for q in out if real not in q.parents]
            out.append(real)
    return out


def shown_trees(
    workspace: Path, python_paths: Sequence[Path] | None = None, extra_ro: Sequence[Path] = ()
) -> list[Path]:
    """Every host tree a sandbox shows read-only: /usr and the root links, the /etc
    files, the Python paths (default :func:`default_python_paths`), the workspace and
    ``extra_ro``. What lies below one of them is visible unless it is hidden."""
    roots = [Path("/usr"), *(Path("/") / n for n in _ROOT_LINKS)]
    roots += [Path("/etc") / n for n in ETC_FILES]
    python = default_python_paths() if python_paths is None else python_paths
    return [r for r in [*roots, *python, workspace, *extra_ro] if r.exists()]


def sandbox_mounts(
    *,
    workspace: Path,
    scratch_dir: Path,
    submission_dir: Path,
    agent_socket: Path,
    python_paths: Sequence[Path] | None = None,
    extra_ro: Sequence[Path] = (),
    extra_rw: Sequence[Path] = (),
    hide: Sequence[Path] = (),
) -> list[Mount]:
    """What :func:`bwrap_command` with these arguments shows of the host's file trees,
    the system's included (what :mod:`ale_robotics.sandboxes.live` records for a running
    sandbox)."""
    return plan_mounts(
        shown_trees(workspace, python_paths, extra_ro),
        hide,
        [scratch_dir, submission_dir, agent_socket.parent, *extra_rw],
    )


def sandbox_visible(workspace: Path, extra: Sequence[Path] = ()) -> Callable[[Path], bool]:
    """A predicate: does the agent's sandbox show this host path (read-only or not)?

    The same trees :func:`bwrap_command` binds: /usr and the root links, the /etc
    files, this Python environment, the workspace, and ``extra`` (the run's scratch
    and submission directories). Used to explain, before a run starts, why a command
    or file the host has would be missing inside.
    """
    resolved = [r.resolve() for r in [*shown_trees(workspace), *extra] if r.exists()]

    def visible(path: Path) -> bool:
        real = path.resolve()
        return any(real == r or r in real.parents for r in resolved)

    return visible


def _check_dir(path: Path, what: str) -> Path:
    if not path.is_absolute():
        raise SandboxError(f"the {what} must be an absolute path, not {path}")
    if not path.is_dir():
        raise SandboxError(f"the {what} {path} is not a directory")
    if path.resolve() == Path("/"):
        raise SandboxError(f"the {what} cannot be '/': that would show the agent the whole host")
    return path


def _check_socket(sock: Path) -> Path:
    if not sock.is_absolute():
        raise SandboxError(f"the agent socket must be an absolute path, not {sock}")
    try:
        mode = os.stat(sock).st_mode
    except OSError as exc:
        raise SandboxError(f"the agent socket {sock} cannot be reached: {exc.strerror}") from None
    if not stat.S_ISSOCK(mode):
        raise SandboxError(f"{sock} is not a Unix socket; the sandboxed agent has no network")
    # the evaluator's shared-memory data plane listens beside its agent socket
    mine = {sock.name, data_socket_name(sock.name)}
    others = sorted(e for e in os.listdir(sock.parent) if e not in mine)
    if others:
        raise SandboxError(
            f"the agent socket's directory {sock.parent} also holds {others[:5]}; the sandbox "
            "binds that whole directory (so the agent can reconnect after an evaluator "
            "restart), so give the agent socket a directory of its own, e.g. "
            f"unix://{sock.parent / 'agent' / sock.name}"
        )
    return sock.parent


def bwrap_command(
    agent_argv: Sequence[str],
    *,
    workspace: Path,
    scratch_dir: Path,
    submission_dir: Path,
    agent_socket: Path,
    python_paths: Sequence[Path] | None = None,
    extra_ro: Sequence[Path] = (),
    extra_rw: Sequence[Path] = (),
    hide: Sequence[Path] = (),
    block_imports: Sequence[Path] = (),
    status_fd: int | None = None,
    tmp_size_bytes: int | None = 2 * 1024**3,
    bwrap: str | None = None,
    home: Path | None = None,
) -> list[str]:
    """The argv that runs ``agent_argv`` inside the sandbox (see the module docstring).

    ``workspace`` is bound read-only; ``scratch_dir`` (the working directory) and
    ``submission_dir`` are the host directories the agent can write, with ``extra_rw``
    (the model gateway's socket directory).
    ``python_paths`` defaults to :func:`default_python_paths`; ``extra_ro`` adds
    read-only paths (another interpreter, a dataset); ``hide`` lays an empty, read-only
    tmpfs over paths inside those trees that the agent must not see (run directories
    with the harness's log and trajectory, runs roots, a state dir); the scratch and
    submission directories are bound after them, so they stay visible even inside a
    hidden run directory. The order of these mounts is
    :func:`ale_robotics.sandboxes.mount_plan.plan_mounts`'s, which the harness also keeps
    for every live sandbox (:mod:`ale_robotics.sandboxes.live`).
    ``block_imports`` are installed Python
    packages (directories) or modules (``.py`` files) the agent must not import, typically
    inside the read-only Python paths: each is covered, after those are mounted, by an empty
    tmpfs holding only an ``__init__.py`` that raises ``ImportError`` (a module file is
    replaced by it), so their files cannot be read either (see
    :mod:`ale_robotics.harness.agent.hidden_modules`). ``tmp_size_bytes`` caps each of the
    RAM-backed ``/tmp`` and ``/dev/shm`` (None: no cap). Run it with the harness's curated
    environment; the sandbox sets ``TMPDIR`` to its private ``/tmp``, and ``HOME`` to
    ``home`` (a writable directory the mounts show, the agent's own in its scratch
    directory) or else to ``/tmp``.

    Raises :class:`SandboxError` when bwrap is missing or a path is unusable.
    """
    if not agent_argv:
        raise SandboxError("no agent command to run")
    exe = _bwrap_path(bwrap)
    workspace = _check_dir(workspace, "workspace")
    scratch_dir = _check_dir(scratch_dir, "scratch directory")
    submission_dir = _check_dir(submission_dir, "submission directory")
    socket_dir = _check_socket(agent_socket)
    ro = list(default_python_paths() if python_paths is None else python_paths)
    for p in [*ro, *extra_ro]:
        if not p.exists():
            raise SandboxError(f"read-only path {p} does not exist")
    args = [
        exe,
        "--unshare-all",
        "--unshare-user",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_GID),
        "--cap-drop",
        "ALL",
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "ale-sandbox",
    ]
    if "--disable-userns" in _options(exe):
        args.append("--disable-userns")
    if status_fd is not None:
        args += ["--json-status-fd", str(status_fd)]
    args += _system_args(exe, tmp_size_bytes)
    # Order matters: a later mount covers an earlier one at the same place (see
    # mount_plan). The writable directories are bound after the covers, so they stay
    # visible even inside a hidden run directory.
    mounts = plan_mounts(
        [workspace, *ro, *extra_ro],
        hide,
        [scratch_dir, submission_dir, socket_dir, *(_check_dir(p, "directory") for p in extra_rw)],
    )
    flag = {"ro": "--ro-bind", "rw": "--bind"}
    for m in mounts:
        args += ["--tmpfs", m.dest] if m.kind == "hide" else [flag[m.kind], m.src, m.dest]
    for m in mounts:  # read-only once the writable mounts inside them exist: no decoys either
        if m.kind == "hide":
            args += ["--remount-ro", m.dest]
    for p in block_imports:  # after the read-only trees, or those would cover it again
        args += _block_import_args(p)
    args += [
        "--setenv",
        "HOME",
        str(home) if home is not None else "/tmp",
        "--setenv",
        "TMPDIR",
        "/tmp",
        "--chdir",
        str(scratch_dir),
        "--",
        *agent_argv,
    ]
    return args


def _block_import_args(path: Path) -> list[str]:
    """Mounts that make the package directory or module file ``path`` unimportable.

    An empty directory alone would not do: Python imports it as an empty
    namespace package. The tmpfs is then made read-only, so that nothing can be
    planted where the hidden package was (not even Python's own ``__pycache__``).
    Paths that do not exist need nothing.
    """
    if not path.is_absolute():
        raise SandboxError(f"a module to block must be an absolute path, not {path}")
    if path.is_dir():
        blocker = ["--ro-bind", str(IMPORT_BLOCKER), str(path / "__init__.py")]
        return ["--tmpfs", str(path), *blocker, "--remount-ro", str(path)]
    if path.is_file():
        return ["--ro-bind", str(IMPORT_BLOCKER), str(path)]
    return []


def read_sandbox_status(fd: int) -> SandboxStatus:
    """Read bwrap's ``--json-status-fd`` to the end (after bwrap exited) and close it."""
    chunks = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    child_pid: int | None = None
    exit_code: int | None = None
    for line in b"".join(chunks).decode("utf-8", "replace").splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            if isinstance(obj.get("child-pid"), int):
                child_pid = obj["child-pid"]
            if isinstance(obj.get("exit-code"), int):
                exit_code = obj["exit-code"]
    return SandboxStatus(child_pid=child_pid, exit_code=exit_code)


@functools.lru_cache(maxsize=8)
def _probe(exe: str) -> str | None:
    """None when a minimal sandbox starts; else why not (bwrap's own message)."""
    cmd = [
        exe,
        "--unshare-all",
        "--unshare-user",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_GID),
        "--die-with-parent",
        "--new-session",
        *_system_args(exe),
        "--",
        "true",
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{exe} could not run: {exc}"
    if proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        return msg[-1] if msg else f"{exe} exited with {proc.returncode}"
    return None


def require_sandbox(bwrap: str | None = None) -> str:
    """The bwrap path, after checking that a sandbox really starts on this host.

    Raises :class:`SandboxError` saying why not (bwrap missing, user namespaces
    disabled, a seccomp profile refusing them...). The check is cached.
    """
    exe = _bwrap_path(bwrap)
    reason = _probe(exe)
    if reason is not None:
        raise SandboxError(
            f"the agent sandbox cannot start on this host: {reason}. Enable unprivileged "
            "user namespaces (sysctl kernel.unprivileged_userns_clone=1, or an AppArmor "
            "profile for bwrap on Ubuntu 24.04+), or run with --sandbox none"
        )
    return exe


def sandbox_available(bwrap: str | None = None) -> bool:
    """True when bwrap is installed and can start a sandbox here (the default's test)."""
    try:
        require_sandbox(bwrap)
    except SandboxError:
        return False
    return True
