"""Building an engine: the tiny plug-in engine installed for real, from the registries.

One build per module (seconds: numpy, pydantic, safetensors into a fresh venv with the
evaluator's pip), then what the evaluator relies on: the build matches its pins and says
so in its record, the warm-up ran in it with ``ale_robotics`` importable, a second install
keeps it, and pins that are not a complete environment are refused with what is wrong.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import ClassVar

import pytest
from engine_tiny import PINS

from ale_robotics.engines import Engine, build_dir, engine_key, get_engine, install, installed
from ale_robotics.engines.build import parse_pins
from ale_robotics.engines.errors import EngineUnavailable
from ale_robotics.engines.record import InstalledEngine


@pytest.fixture(scope="module")
def built(tiny: Path) -> InstalledEngine:
    return install(get_engine("tiny"))


def test_the_build_is_the_pins_and_its_record_says_so(built: InstalledEngine) -> None:
    engine = get_engine("tiny")
    home = build_dir(engine)
    assert built.name == "tiny" and built.key == engine_key(engine)
    assert Path(built.python).parent == home / "venv" / "bin"
    assert built.versions == parse_pins(PINS)  # nothing more (no pip either), nothing less
    assert built.python_version.startswith(engine.python + ".")
    assert any(p.endswith("site-packages") and p.startswith(str(home)) for p in built.sys_path)
    assert built.size_bytes > 10_000_000  # numpy's wheel alone
    assert installed(engine) == built


def test_the_warm_up_ran_in_the_build_with_ale_robotics_importable(built: InstalledEngine) -> None:
    import ale_robotics

    warm = build_dir(get_engine("tiny")) / "warm.txt"  # TinyEngine.warm_up writes it
    seen = Path(warm.read_text())
    assert seen.resolve() == Path(ale_robotics.__file__).resolve()


def test_a_second_install_keeps_the_build(built: InstalledEngine) -> None:
    again = install(get_engine("tiny"))
    assert again.built_at == built.built_at


def test_pins_that_change_make_another_key(tmp_path: Path) -> None:
    pins = tmp_path / "engine-x.txt"

    class X(Engine):
        name = "x"
        python = "3.11"
        constraints = str(pins)
        modules: ClassVar[tuple[str, ...]] = ()
        reported: ClassVar[tuple[str, ...]] = ()

    pins.write_text("numpy==2.4.6\n")
    first = engine_key(X())
    pins.write_text("numpy==2.4.5\n")
    assert engine_key(X()) != first
    pins.write_text("numpy==2.4.6\n")
    assert engine_key(X()) == first


@pytest.mark.parametrize("line", ["numpy>=2", "numpy", "-e .", "numpy==2.4.6 --hash=sha256:00"])
def test_a_line_that_pins_nothing_is_refused(line: str) -> None:
    with pytest.raises(ValueError, match="is not 'name==version'"):
        parse_pins(f"# pins\n{line}\n", "engine-x.txt")


def test_pins_missing_a_dependency_fail_the_install(tiny: Path, tmp_path: Path) -> None:
    pins = tmp_path / "engine-partial.txt"
    pins.write_text("pydantic==2.14.4\n")  # without pydantic-core and the rest

    class Partial(Engine):
        name = "partial"
        python = f"{sys.version_info[0]}.{sys.version_info[1]}"
        constraints = str(pins)
        modules: ClassVar[tuple[str, ...]] = ("pydantic",)
        reported: ClassVar[tuple[str, ...]] = ()

    with pytest.raises(EngineUnavailable, match="pip check of partial") as info:
        install(Partial())
    assert "pydantic-core" in info.value.message
    assert installed(Partial()) is None  # no record: the next install starts again


def test_no_interpreter_of_the_version_says_how_to_get_one(
    tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ale_robotics.engines.pythons import find_python

    monkeypatch.setenv("PYENV_ROOT", os.devnull)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(EngineUnavailable) as info:
        find_python("3.99")
    assert "pyenv install 3.99" in info.value.message and "ALE_PYTHON_3_99" in info.value.message
    monkeypatch.setenv("ALE_PYTHON_3_99", "/bin/true")
    with pytest.raises(EngineUnavailable, match=r"ALE_PYTHON_3_99=/bin/true is not a Python 3\.99"):
        find_python("3.99")
