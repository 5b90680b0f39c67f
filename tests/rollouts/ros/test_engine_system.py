"""What an engine takes from the host system (ale_robotics/engines/system.py): Debian packages
by apt, Debian's own interpreter, a venv checked closed then opened to its site-packages.

The refusals are unit tests (a euid or an apt-get made to look missing); the build is real:
a small engine of Debian's /usr/bin/python3 with the project's numpy and pydantic pins,
whose exact-set check passes although Debian's site-packages hold many other
distributions, and whose venv then imports one of them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest

from ale_robotics.engines import system
from ale_robotics.engines.base import Engine
from ale_robotics.engines.build import install, installed
from ale_robotics.engines.errors import EngineUnavailable
from ale_robotics.engines.home import engine_key

DEBIAN = shutil.which("dpkg-query") is not None and Path("/usr/bin/python3").exists()


class _Apt(Engine):
    name = "apt-test"
    python = "3.11"
    constraints = "engine-ros.txt"
    modules: ClassVar[tuple[str, ...]] = ()
    reported: ClassVar[tuple[str, ...]] = ()
    system_packages: ClassVar[tuple[str, ...]] = ("ale-no-such-package-49",)


@pytest.mark.skipif(not DEBIAN, reason="not a Debian host (no dpkg-query)")
def test_a_missing_package_without_root_names_the_commands(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(system.os, "geteuid", lambda: 1000)
    assert system.missing_packages(_Apt()) == ["ale-no-such-package-49"]
    with pytest.raises(EngineUnavailable) as caught:
        system.install_packages(_Apt(), lambda line: None)
    message = caught.value.message
    assert "sudo ale-robotics engines install apt-test" in message
    assert "apt-get install --no-install-recommends ale-no-such-package-49" in message


def test_a_host_without_apt_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(system.shutil, "which", lambda name: None)
    monkeypatch.setattr(system, "package_versions", lambda packages: {})
    with pytest.raises(EngineUnavailable, match="no apt-get: build it on Debian or Ubuntu"):
        system.install_packages(_Apt(), lambda line: None)


def test_an_interpreter_of_another_version_is_refused() -> None:
    class Other(_Apt):
        python = "3.12"
        interpreter = sys.executable  # 3.11

    with pytest.raises(EngineUnavailable, match=r"pinned for Python 3\.12"):
        system.interpreter(Other())


def test_the_system_s_parts_are_in_the_build_key() -> None:
    """Another package list or interpreter is another build; an engine without them keeps
    the key it had before they existed."""

    class Plain(_Apt):
        system_packages: ClassVar[tuple[str, ...]] = ()

    class Opened(_Apt):
        system_site_packages = True

    keys = {engine_key(e) for e in (_Apt(), Plain(), Opened())}
    assert len(keys) == 3


def test_opening_a_venv_to_the_system(tmp_path: Path) -> None:
    cfg = tmp_path / "pyvenv.cfg"
    cfg.write_text("home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.11.2\n")
    system.open_to_system(tmp_path)
    assert cfg.read_text().splitlines()[1] == "include-system-site-packages = true"


PINS = """\
annotated-types==0.8.0
numpy==2.4.6
pydantic==2.14.4
pydantic_core==2.50.5
typing-inspection==0.4.5
typing_extensions==4.16.0
"""


@pytest.mark.ros  # the ros engine's packages are there: python3-yaml is one of them
def test_a_system_engine_builds_checked_closed_and_runs_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "constraints").mkdir()
    (tmp_path / "constraints" / "engine-system-test.txt").write_text(PINS)
    monkeypatch.setenv("ALE_ENGINE_CONSTRAINTS", str(tmp_path / "constraints"))
    monkeypatch.setenv("ALE_ENGINES_DIR", str(tmp_path / "home"))

    class Debian(Engine):
        name = "system-test"
        python = "3.11"
        constraints = "engine-system-test.txt"
        interpreter = "/usr/bin/python3"
        system_site_packages = True
        system_packages: ClassVar[tuple[str, ...]] = ("python3-yaml",)
        modules: ClassVar[tuple[str, ...]] = ("numpy", "pydantic", "yaml")  # yaml: Debian's
        reported: ClassVar[tuple[str, ...]] = ("numpy", "python3-yaml")

    record = install(Debian())
    assert set(record.versions) == {
        "annotated-types",
        "numpy",
        "pydantic",
        "pydantic-core",
        "typing-inspection",
        "typing-extensions",
    }  # the pins alone: Debian's distributions were not in the venv when it was checked
    assert record.system_versions.keys() == {"python3-yaml"}
    where = subprocess.run(
        [record.python, "-I", "-c", "import yaml, numpy; print(yaml.__file__, numpy.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert where[0].startswith("/usr/lib/python3/dist-packages/")  # the system's
    assert where[1].startswith(str(tmp_path / "home"))  # the pin, before any system numpy
    assert installed(Debian()) == record
    monkeypatch.setattr(system, "missing_packages", lambda engine: ["python3-yaml"])
    assert installed(Debian()) is None  # a package removed since: not current, built again
