"""The sandbox registry: names, ``auto``, options, what to install; and that it is the only
place that knows a sandbox by its name."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.sandboxes import AUTO, SandboxError, registry
from ale_robotics.sandboxes.registry import (
    check_sandbox_name,
    resolve_sandbox,
    sandbox_choices,
    sandbox_class,
    sandboxes_taking,
    takes_option,
)

SRC = Path(__file__).resolve().parents[2] / "src" / "ale_robotics"


@pytest.fixture
def fresh_registry() -> object:
    registry.clear_cache()
    yield None
    registry.clear_cache()


def test_choices_are_auto_and_every_registered_name() -> None:
    assert sandbox_choices()[0] == AUTO
    assert set(sandbox_choices()[1:]) == set(registry.sandbox_names())


def test_an_unknown_name_lists_the_installed_ones_and_how_to_add_one() -> None:
    with pytest.raises(ValueError) as err:
        check_sandbox_name("bwarp")
    text = str(err.value)
    assert "did you mean 'bwrap'?" in text
    assert "'auto', 'bwrap', 'docker', 'none'" in text
    assert "ale_robotics.sandboxes" in text  # the entry-point group of a plug-in
    with pytest.raises(InvalidArgumentError, match="--sandbox 'gvisor': not a sandbox"):
        sandbox_class("gvisor")


def test_a_sandbox_whose_module_does_not_import_names_its_extra(
    fresh_registry: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As an optional extra that is not installed: the message says what to pip install."""
    real = registry._entry_points()["docker"]

    def load() -> object:
        raise ModuleNotFoundError("No module named 'docker_only_dependency'")

    broken = SimpleNamespace(name="docker", value=real.value, dist=real.dist, load=load)
    monkeypatch.setitem(registry._entry_points(), "docker", broken)
    with pytest.raises(SandboxError) as err:
        sandbox_class("docker")
    assert "docker_only_dependency" in err.value.message
    assert "pip install 'ale-robotics[docker]'" in err.value.message


def test_auto_takes_the_available_sandbox_of_the_lowest_rank(
    fresh_registry: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    bwrap = sandbox_class("bwrap")
    monkeypatch.setattr(bwrap, "unavailable", classmethod(lambda cls: "no bubblewrap here"))
    chosen = resolve_sandbox(AUTO)
    assert chosen.name == "none" and not chosen.isolates
    # Asked for by name, an unavailable sandbox says why; unchecked, it is made anyway.
    with pytest.raises(SandboxError, match="no bubblewrap here"):
        resolve_sandbox("bwrap")
    assert resolve_sandbox("bwrap", check=False).name == "bwrap"


def test_a_sandbox_gets_only_the_options_it_takes() -> None:
    assert takes_option("docker", "agent_image")
    assert not takes_option("bwrap", "agent_image") and not takes_option(AUTO, "agent_image")
    assert sandboxes_taking("agent_image") == ["docker"]
    docker = resolve_sandbox("docker", check=False, agent_image="mine:1")
    assert docker.image == "mine:1"  # type: ignore[attr-defined]
    resolve_sandbox("none", agent_image="mine:1")  # not passed to a sandbox that takes none


_NAMES = {AUTO, *registry.sandbox_names()}
_COMMON_WORDS = {"none"}
"""Names that are ordinary words too ("none" cells, "none" usage sources): flagged only
beside another sandbox name or compared with something about a sandbox."""


def _compared_names(path: Path) -> list[tuple[int, str]]:
    """Sandbox names as string literals in a comparison, ``match`` case or ``Literal``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        values: list[ast.expr] = []
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                values += side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
        elif isinstance(node, ast.MatchValue):
            values = [node.value]
        elif isinstance(node, ast.Subscript) and getattr(node.value, "id", "") == "Literal":
            sl = node.slice
            values = list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]
        names = {v.value for v in values if isinstance(v, ast.Constant) and v.value in _NAMES}
        about_sandbox = "sandbox" in ast.unparse(node).lower()
        if names - _COMMON_WORDS or (names and about_sandbox):
            found += [(node.lineno, n) for n in sorted(names)]
    return found


def test_no_sandbox_name_is_compared_outside_the_registry() -> None:
    """The harness, the command line and eval sets ask the sandbox they got (isolates,
    host_files, options...), never which one it is."""
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if "v1" in path.relative_to(SRC).parts:
            continue
        offenders += [f"{path.relative_to(SRC)}:{ln}: {v!r}" for ln, v in _compared_names(path)]
    assert offenders == []
