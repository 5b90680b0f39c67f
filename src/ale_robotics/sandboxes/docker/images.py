"""What the harness asks of a Docker image before a run: its id, where its command is.

The agent's command runs inside its image, so it is resolved there
(:func:`resolve_in_image`: a bare command on the image's ``PATH``, relative
arguments against its working directory) and so are the task's hidden modules
(:func:`modules_in_image`), each by a short-lived probe container with no network,
as the agent's uid, on a read-only root; both are cached per image id.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from dataclasses import dataclass

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.sandboxes.docker.cli import (
    LABEL_ROLE,
    MAKE_IMAGES,
    DockerError,
    docker,
    last_line,
    require_docker,
)

__all__ = [
    "AGENT_UID",
    "ImageInfo",
    "ResolvedCommand",
    "agent_user",
    "modules_in_image",
    "require_image",
    "resolve_in_image",
]

AGENT_UID = 65534


@dataclass(frozen=True)
class ImageInfo:
    """What the harness needs of an image: its id (pinned for the run) and working dir."""

    ref: str
    id: str
    working_dir: str
    path: str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    """The image's ``PATH`` (Docker's default when it sets none)."""


def require_image(image: str, role: str = "agent") -> ImageInfo:
    """The image ``image`` as this daemon has it; :class:`DockerError` saying how to get it."""
    require_docker()
    proc = docker("image", "inspect", image, check=False)
    if proc.returncode != 0:
        raise DockerError(
            f"the {role} image {image!r} is not there: build it with {MAKE_IMAGES}, or give "
            f"--{role}-image with an image this Docker daemon has ('docker image ls')"
        )
    doc = json.loads(proc.stdout)[0]
    config = doc.get("Config") or {}
    env = dict(e.partition("=")[::2] for e in config.get("Env") or [] if isinstance(e, str))
    info = ImageInfo(ref=image, id=str(doc["Id"]), working_dir=config.get("WorkingDir") or "/")
    return dataclasses.replace(info, path=env["PATH"]) if env.get("PATH") else info


@dataclass(frozen=True)
class ResolvedCommand:
    """The agent command as the image runs it: absolute executable, absolute file args."""

    argv: tuple[str, ...]
    working_dir: str
    in_image: tuple[bool, ...] = ()
    """For each argument, whether it names a file or directory of the image."""


# Prints, NUL-separated: the working dir, OK or MISSING, then for each argument its
# resolved form and 1 or 0 (whether it names a file or directory of the image).
_RESOLVE = r"""
base=$PWD; [ "$base" = / ] && base=
printf '%s\0' "$PWD"
first=1
for a do
  if [ "$first" = 1 ]; then
    first=0
    case "$a" in
      /*) p=$a ;;
      */*) p=$base/$a ;;
      *) p=$(command -v -- "$a" 2>/dev/null) || p= ;;
    esac
    case "$p" in /*) ;; *) printf 'MISSING\0'; exit 0 ;; esac
    [ -f "$p" ] && [ -x "$p" ] || { printf 'MISSING\0'; exit 0; }
    printf 'OK\0%s\0%s\0' "$p" 1
  else
    case "$a" in
      ''|-*) p=$a ;;
      /*) p=$a ;;
      *) if [ -e "$a" ]; then p=$base/$a; else p=$a; fi ;;
    esac
    if [ -n "$p" ] && [ -e "$p" ]; then e=1; else e=0; fi
    printf '%s\0%s\0' "$p" "$e"
  fi
done
"""


@functools.lru_cache(maxsize=32)
def resolve_in_image(image: ImageInfo, argv: tuple[str, ...], user: str) -> ResolvedCommand:
    """``argv`` resolved inside ``image`` (see the module doc); cached per image id.

    Raises :class:`InvalidArgumentError` when the image has no such command, and
    :class:`DockerError` when the image cannot be probed (no ``/bin/sh``).
    """
    if not argv:
        raise InvalidArgumentError("--agent is empty: give the command that starts the agent")
    proc = docker(
        "run", "--rm", "--network", "none", "--read-only", "--user", user,
        "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
        "--label", f"{LABEL_ROLE}=probe", "--entrypoint", "/bin/sh",
        image.id, "-c", _RESOLVE, "ale-resolve", *argv,
        check=False, timeout=120,
    )  # fmt: skip
    fields = proc.stdout.split("\0")
    if proc.returncode != 0 or len(fields) < 2:
        raise DockerError(
            f"cannot look up the agent command in the image {image.ref!r} "
            f"({last_line(proc.stderr)}): an agent image needs /bin/sh (build it FROM "
            "ale-robotics/agent)"
        )
    working_dir, status, rest = fields[0], fields[1], fields[2:]
    if status != "OK":
        where = "not an executable file" if "/" in argv[0] else "not on its PATH"
        raise InvalidArgumentError(
            f"command not found in the agent image {image.ref!r}: {argv[0]!r} is {where} "
            f"(relative paths start at its working directory {working_dir}); the agent's code "
            "must be in its image (build one FROM ale-robotics/agent with your files)"
        )
    pairs = list(zip(rest[0::2], rest[1::2], strict=False))[: len(argv)]
    return ResolvedCommand(
        argv=tuple(p for p, _ in pairs),
        working_dir=working_dir,
        in_image=tuple(e == "1" for _, e in pairs),
    )


# module_path() of ale_robotics.sandboxes.hidden, run by the image's Python: where
# each named module is installed there, found without importing it or its parents.
_FIND_MODULES = r"""
import importlib.util, sys
from pathlib import Path
def module_path(name):
    top, *rest = name.split(".")
    spec = importlib.util.find_spec(top)
    if spec is None:
        return None
    if not spec.submodule_search_locations:
        return Path(spec.origin) if not rest and spec.origin else None
    bases = [Path(p) for p in spec.submodule_search_locations]
    for i, part in enumerate(rest):
        found = None
        for base in bases:
            if (base / part).is_dir():
                found = base / part
                break
            if i == len(rest) - 1 and (base / f"{part}.py").is_file():
                return base / f"{part}.py"
        if found is None:
            return None
        bases = [found]
    return bases[0]
for name in sys.argv[1:]:
    path = module_path(name)
    print(path.resolve() if path is not None else "")
"""


@functools.lru_cache(maxsize=32)
def modules_in_image(image: ImageInfo, names: tuple[str, ...], user: str) -> tuple[str, ...]:
    """Where ``names`` are installed in ``image`` (outermost paths only; cached per image).

    An image without ``python3`` imports nothing: nothing to hide.
    """
    proc = docker(
        "run", "--rm", "--network", "none", "--read-only", "--user", user,
        "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
        "--label", f"{LABEL_ROLE}=probe", "--entrypoint", "python3",
        image.id, "-c", _FIND_MODULES, *names,
        check=False, timeout=120,
    )  # fmt: skip
    if proc.returncode != 0:
        if "executable file not found" in proc.stderr:
            return ()
        raise DockerError(
            f"cannot look up the task's hidden modules in the agent image {image.ref!r} "
            f"({last_line(proc.stderr)})"
        )
    found = [p for p in proc.stdout.splitlines() if p.startswith("/")]
    outer = [p for p in found if not any(q != p and p.startswith(q + "/") for q in found)]
    return tuple(dict.fromkeys(outer))


def agent_user() -> tuple[int, int]:
    """The uid/gid the agent runs as: 65534 when the harness is root, else the harness's."""
    if os.geteuid() == 0:
        return AGENT_UID, AGENT_UID
    return os.geteuid(), os.getegid()
