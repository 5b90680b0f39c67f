"""What a task's agent must not be able to import, as paths the sandbox blocks.

Some simulator packages ship solutions to their own tasks: Meta-World bundles
scripted expert policies (``metaworld.policies``) for every task. An agent that
imports them would be scored on Meta-World's controller, not on its own. A task
lists such modules in its config (``env.agent_hidden_modules``, covered by the
config hash like the rest of its protocol); :func:`sandbox_hidden_paths` finds
where they are installed (:mod:`ale_robotics.sandboxes.hidden`), and the sandbox
lays an empty tmpfs over each package with an ``__init__.py`` that raises
``ImportError``, so the files cannot be imported, read or listed inside.

A task whose simulator runs only in the evaluator (``training.simulator``
``"evaluator"``) hides the simulator itself the same way: every installed
package of its simulator family (:data:`SIMULATOR_PACKAGES`: for MuJoCo the
``mujoco`` bindings, whose directory also holds ``libmujoco.so``, and the
suites built on them), so that inside the sandbox ``import mujoco`` fails and
the shared library cannot be loaded by its host path either (the tmpfs covers
the file). The agent can then take training steps only in practice sessions,
which the evaluator counts against the task's budget. What this does not cover:
a copy the agent's own workspace brings (a vendored wheel); the hiding is of
what this Python environment has installed.

The modules are located without importing them or the packages above them:
importing a simulator in the harness would be slow and would run its code.
"""

from __future__ import annotations

from pathlib import Path

from ale_robotics.sandboxes.hidden import install_paths, module_path
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["SIMULATOR_PACKAGES", "hidden_module_names", "module_path", "sandbox_hidden_paths"]

_MUJOCO_FAMILY = ("mujoco", "mujoco_mjx", "dm_control", "metaworld", "gymnasium_robotics")

SIMULATOR_PACKAGES: dict[str, tuple[str, ...]] = {
    "mujoco": _MUJOCO_FAMILY,
    "dm_control": _MUJOCO_FAMILY,  # dm_control simulates with the same MuJoCo bindings
    "pybullet": (
        "pybullet",
        "pybullet_data",
        "pybullet_envs",
        "pybullet_utils",
        "pybullet_robots",
        "pybullet_examples",
    ),
    # Isaac Lab lives in its engine's environment alone (docs/engines.md), never in this one,
    # and its tasks' agents train with that engine: nothing here to hide.
    "isaaclab": (),
}
"""Top-level packages hidden from the agent of a task whose simulator runs only in the
evaluator, by the task's ``simulator.name``: the simulator and every package that embeds
or drives it (a suite built on MuJoCo would hand the agent MuJoCo again). Those not
installed here are skipped."""


def hidden_module_names(task: TaskSpec) -> list[str]:
    """The modules ``task``'s agent must not import: its ``env.agent_hidden_modules``, then,
    when its simulator runs only in the evaluator, its simulator family's packages."""
    names = list(task.env.agent_hidden_modules)
    if task.simulator_in_evaluator:
        names += [n for n in SIMULATOR_PACKAGES[task.simulator.name] if n not in names]
    return names


def sandbox_hidden_paths(task: TaskSpec) -> list[Path]:
    """The resolved install paths of :func:`hidden_module_names` that exist here (the
    outermost ones: :func:`ale_robotics.sandboxes.hidden.install_paths`)."""
    return install_paths(hidden_module_names(task))
