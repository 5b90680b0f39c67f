"""What ``import ale_robotics.client`` loads: the SDK, gRPC and the task model, nothing more.

Every agent imports the SDK first, and on the ``make demo`` path its import was a third
of the agent's start (and a good part of its exit, which frees what was imported). The
task model (``tasks.spec``) is needed to read GetSpec; the release manifest, the task
registry, numpy (the rollout interface's array type is a string at run time), the strict
YAML loader and the whole evaluator are not, so they are loaded only when used. A
subprocess each, so that no other test's imports count.
"""

from __future__ import annotations

import json
import subprocess
import sys

NOT_LOADED_BY_THE_SDK = (
    "numpy",
    "yaml",
    "gymnasium",
    "matplotlib",
    "ale_robotics.tasks.manifest",
    "ale_robotics.tasks.registry",
    "ale_robotics.submission.yaml_strict",
    "ale_robotics.evaluator",
    "ale_robotics.harness",
    "ale_robotics.envs",
)
"""Top-level packages or modules (with their submodules) the SDK's import must not load."""


def _modules_after(code: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    mods: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return mods


def _loaded(mods: list[str], name: str) -> list[str]:
    return [m for m in mods if m == name or m.startswith(name + ".")]


def test_importing_the_sdk_loads_only_what_an_agent_needs() -> None:
    mods = _modules_after("import ale_robotics.client")
    assert "grpc" in mods and "ale_robotics.tasks.spec" in mods  # what it does need
    for name in NOT_LOADED_BY_THE_SDK:
        assert not _loaded(mods, name), f"import ale_robotics.client loads {name}"


def test_the_task_package_still_exports_every_name_on_use() -> None:
    code = (
        "import ale_robotics.tasks as t\n"
        "names = {n: getattr(t, n).__module__ for n in t.__all__}\n"
        "assert set(dir(t)) >= set(t.__all__)\n"
        "from ale_robotics.tasks import Registry, TaskSpec, default_registry, load_manifest\n"
        "assert default_registry().get('td3-inverted-pendulum-v1').id\n"
        "print(names)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr


def test_an_unknown_name_of_the_task_package_is_an_attribute_error() -> None:
    import ale_robotics.tasks as tasks

    try:
        tasks.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("no AttributeError")


def test_reading_a_task_spec_loads_no_simulator_or_evaluator() -> None:
    """GetSpec's task is validated in the agent, which asks the task's rollout kind: the
    kinds' modules load numpy, Gymnasium and the evaluator only to roll out."""
    for kind_task in ("td3-inverted-pendulum-v2", "td3-inverted-pendulum-v1"):
        code = (
            "from pathlib import Path\n"
            "import ale_robotics.tasks.spec as s\n"
            f"raw = (Path(s.__file__).parent / 'configs' / '{kind_task}.json').read_text()\n"
            "s.TaskSpec.model_validate_json(raw)\n"
        )
        mods = _modules_after(code)
        assert "ale_robotics.rollouts.policy" in mods  # the kind did check the task
        for name in NOT_LOADED_BY_THE_SDK:
            assert not _loaded(mods, name), f"validating {kind_task} loads {name}"
        assert not _loaded(mods, "mujoco") and "ale_robotics.rollouts.mlp" not in mods


def test_the_native_kind_names_every_family_it_steps() -> None:
    from ale_robotics.rollouts.mujoco_rollout import FAMILIES
    from ale_robotics.rollouts.mujoco_rollout.kind import FAMILY_GYM_IDS

    assert set(FAMILIES) == FAMILY_GYM_IDS
