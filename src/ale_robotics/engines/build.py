"""Build an engine's environment once, from the package registries only, and check it.

:func:`install` makes ``<home>/<engine>/<key>/`` (:mod:`.home`): a venv of the engine's
Python (:mod:`.pythons`), ``pip install --no-deps -r constraints/<file>`` (every
distribution pinned, so nothing is resolved, only fetched), then the checks a build must
pass before it is used: ``pip check`` (the pins are complete and consistent), the
installed set equals the pins (nothing more, nothing less, but pip's own tools), the
engine's modules import. Then the engine's warm-up (Warp's kernel compiles, cached in
the build), and last ``engine.json`` (:mod:`.record`): a build that stopped half-way has
none and is removed and made again by the next install. Two installs of one engine wait
for each other (a lock file), so a build is never made twice at once.

pip runs with the host's own configuration (its index, its caches); ``pip_args`` adds to
it (``--no-index --find-links DIR`` for an offline image build).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from ale_robotics.engines import system
from ale_robotics.engines.base import Engine
from ale_robotics.engines.errors import EngineUnavailable
from ale_robotics.engines.home import build_dir, constraints_path, engine_key
from ale_robotics.engines.overlay import with_overlay
from ale_robotics.engines.pythons import find_python
from ale_robotics.engines.record import RECORD_NAME, InstalledEngine, read_record

__all__ = ["install", "installed", "parse_pins", "remove_stale"]

Log = Callable[[str], None]

_TOOLS = frozenset({"pip", "setuptools", "wheel"})
"""What a venv brings by itself, never pinned."""
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)\s*(?:#.*)?$")

_LIST = (
    "import importlib.metadata as m, json, re; "
    "print(json.dumps({re.sub(r'[-_.]+', '-', d.metadata['Name']).lower(): d.version "
    "for d in m.distributions()}))"
)
"""Every distribution the interpreter sees, by normalized name (PEP 503)."""


def normalize(name: str) -> str:
    """A distribution's name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_pins(text: str, source: str = "constraints") -> dict[str, str]:
    """``{normalized name: version}`` of a constraints file: ``name==version`` per line,
    comments and blank lines aside; ``ValueError`` naming a line that pins nothing."""
    pins: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _PIN.match(line)
        if m is None:
            raise ValueError(f"{source}:{number}: {line!r} is not 'name==version'")
        pins[normalize(m.group(1))] = m.group(2)
    return pins


def installed(engine: Engine) -> InstalledEngine | None:
    """The current build of ``engine`` (its key's), or None when it is not built."""
    record = read_record(build_dir(engine))
    if record is None or record.key != engine_key(engine):
        return None
    if not Path(record.python).exists():
        return None
    if engine.system_packages and system.missing_packages(engine):
        return None  # removed since: built again (their install first) by the same command
    return record


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _run(argv: Sequence[str], what: str, env: dict[str, str] | None = None) -> str:
    """Run ``argv``; its stdout, or :class:`EngineUnavailable` with the end of its output."""
    done = subprocess.run(
        list(argv), capture_output=True, text=True, env=env, check=False, stdin=subprocess.DEVNULL
    )
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-12:]
        raise EngineUnavailable(f"{what} failed (exit {done.returncode}):\n" + "\n".join(tail))
    return done.stdout


def _size(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def install(
    engine: Engine,
    *,
    force: bool = False,
    pip_args: Sequence[str] = (),
    log: Log = lambda _: None,
) -> InstalledEngine:
    """The engine's build, made now unless it exists (``force``: made again)."""
    pins_file = constraints_path(engine)
    pins_text = pins_file.read_text()
    pins = parse_pins(pins_text, str(pins_file))
    target = build_dir(engine)
    with _locked(target.parent / ".lock"):
        if not force:
            done = installed(engine)
            if done is not None:
                log(f"{engine.name}: already installed in {target}")
                return done
        if target.exists():
            shutil.rmtree(target)
        system_versions = system.install_packages(engine, log)
        exe, version = (
            system.interpreter(engine) if engine.interpreter else find_python(engine.python)
        )
        log(f"{engine.name}: Python {version} ({exe}) -> {target}")
        started = time.monotonic()
        venv = target / "venv"
        host_pip = importlib.util.find_spec("pip") is not None
        make_venv = [exe, "-m", "venv", *(["--without-pip"] if host_pip else []), str(venv)]
        _run(make_venv, f"creating a Python {version} venv")
        python = str(venv / "bin" / "python")
        log(f"{engine.name}: installing {len(pins)} pinned distributions ({pins_file.name})")
        # This process's pip drives the venv's interpreter (pip --python): no pip of its own
        # to install in the venv first (ensurepip: 5-30 s here), and none in the build.
        pip = (
            [sys.executable, "-m", "pip", "--python", python] if host_pip else [python, "-m", "pip"]
        ) + ["--disable-pip-version-check", "--no-input"]
        _run(
            [*pip, "install", "--no-deps", *pip_args, "-r", str(pins_file)],
            f"pip install -r {pins_file.name}",
        )
        _pip_check(engine, pip, pins_file.name)
        got = json.loads(_run([python, "-I", "-c", _LIST], "listing the installed distributions"))
        _check_set(engine, pins, got, pins_file.name)
        if engine.system_site_packages:
            system.open_to_system(venv)
        _check_imports(engine, python)
        install_s = time.monotonic() - started
        sys_path = json.loads(
            _run([python, "-I", "-c", "import sys, json; print(json.dumps(sys.path))"], "sys.path")
        )
        warm_s = 0.0
        if engine.warm_up is not None:
            log(f"{engine.name}: warming up (compiling what its workers would compile first)")
            t0 = time.monotonic()
            env = {**os.environ, **engine.worker_env(target)}
            _run(
                [python, "-I", "-c", with_overlay(engine.warm_up)],
                f"the warm-up of {engine.name}",
                env,
            )
            warm_s = time.monotonic() - t0
        record = InstalledEngine(
            name=engine.name,
            key=engine_key(engine),
            python=python,
            python_version=version,
            sys_path=[p for p in sys_path if p],
            versions={k: v for k, v in sorted(got.items()) if k not in _TOOLS},
            constraints_sha256=hashlib.sha256(pins_text.encode()).hexdigest(),
            system_versions=system_versions,
            built_at=dt.datetime.now(dt.UTC),
            install_s=round(install_s, 1),
            warm_up_s=round(warm_s, 1),
            size_bytes=_size(target),
        )
        tmp = target / (RECORD_NAME + ".tmp")
        tmp.write_text(record.model_dump_json(indent=1) + "\n")
        os.replace(tmp, target / RECORD_NAME)
        log(f"{engine.name}: installed ({install_s:.0f} s, warm-up {warm_s:.0f} s)")
        return record


_NOT_INSTALLED = re.compile(r"^\S+ \S+ requires (\S+), which is not installed\.$")


def _pip_check(engine: Engine, pip: list[str], source: str) -> None:
    """``pip check``, allowing only the engine's omitted requirements to be missing."""
    done = subprocess.run(
        [*pip, "check"], capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL
    )
    if done.returncode == 0:
        return
    lines = [ln for ln in (done.stdout + done.stderr).strip().splitlines() if ln.strip()]
    left = []
    for line in lines:
        m = _NOT_INSTALLED.match(line.strip())
        if m is None or normalize(m.group(1)) not in engine.omitted_requirements:
            left.append(line)
    if left:
        raise EngineUnavailable(
            f"pip check of {engine.name} failed (a pin missing in {source}?):\n"
            + "\n".join(left[-12:])
        )


def _check_set(engine: Engine, pins: dict[str, str], got: dict[str, str], source: str) -> None:
    """The environment holds exactly the pins (and pip's own tools)."""
    wrong = [f"{n} {got[n]} (pinned {v})" for n, v in pins.items() if n in got and got[n] != v]
    missing = sorted(n for n in pins if n not in got)
    extra = sorted(n for n in got if n not in pins and n not in _TOOLS)
    if wrong or missing or extra:
        parts = [
            f"{label}: {', '.join(items)}"
            for label, items in (
                ("wrong versions", wrong),
                ("missing", missing),
                ("not pinned", extra),
            )
            if items
        ]
        raise EngineUnavailable(
            f"the {engine.name} environment does not match {source}: {'; '.join(parts)} "
            f"(pin every distribution of the environment there)"
        )


def _check_imports(engine: Engine, python: str) -> None:
    code = "import importlib, sys\nfor m in sys.argv[1:]: importlib.import_module(m)"
    _run([python, "-I", "-c", code, *engine.modules], f"importing {', '.join(engine.modules)}")


def remove_stale(engine: Engine) -> list[Path]:
    """Remove the engine's builds of other keys (older pins); the paths removed."""
    keep = engine_key(engine)
    parent = build_dir(engine).parent
    gone = []
    if parent.is_dir():
        for child in parent.iterdir():
            if child.is_dir() and child.name != keep:
                shutil.rmtree(child)
                gone.append(child)
    return gone
