"""``ale_task``: any ALE task as an Inspect AI task, scored by the evaluator on hidden seeds.

One sample: its input is the task's brief (:func:`ale_robotics.tasks.brief.render_brief`,
what ``$ALE_TASK_DIR/brief.md`` holds), with a short account of how the agent works here
(its tools run in the run's sandbox; the SDK and the variables). Its sandbox is ``ale``
(:mod:`.sandbox`: the sample's ALE run), its scorer :func:`.scorer.ale_scorer`. Each
epoch is a sample of its own, so its own run with its own hidden seeds.

From the ``inspect`` command line::

    inspect eval ale_robotics/ale_task -T task_id=td3-hopper-v1 --model openai/gpt-5
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inspect_ai import Task, task
from inspect_ai.agent import Agent, react
from inspect_ai.dataset import Sample
from inspect_ai.solver import Solver
from inspect_ai.tool import bash, python, text_editor
from inspect_ai.util import SandboxEnvironmentSpec

from ale_robotics.inspect.sandbox import TASK_ID_KEY, AleSandboxConfig
from ale_robotics.inspect.scorer import ale_scorer
from ale_robotics.tasks.brief import render_brief
from ale_robotics.tasks.registry import Registry, default_registry

__all__ = ["AGENT_NOTES", "ale_agent", "ale_task"]

AGENT_NOTES = """\
## How you work here

Your tools run inside the run's sandbox, as the run's agent: the working directory is
your scratch directory; `$ALE_SUBMISSION_DIR` is where a batch submission goes;
`$ALE_TASK_DIR` holds this brief, the task config and the submission contract;
`$ALE_ENDPOINT` and `$ALE_TOKEN` reach the evaluator (`from ale_robotics.client import
AleClient`: `AleClient.from_env()`). There is no network. When you are done, say so
(submit): the run then ends, the evaluator measures your submission on hidden seeds and
that measurement is your score. Nothing you say is scored.
"""


def ale_agent(timeout: int | None = None) -> Agent:
    """The default solver: Inspect's ReAct agent with its bash, python and text editor tools
    (the editor is Inspect's sandbox-tools program, which Inspect copies into the run's
    sandbox on its first use and runs there as the agent)."""
    return react(
        tools=[bash(timeout=timeout), python(timeout=timeout), text_editor(timeout=timeout)]
    )


@task
def ale_task(
    task_id: str,
    sandbox: str = "auto",
    episodes: int | None = None,
    budget_s: float | None = None,
    runs_root: str | None = None,
    label: str | None = None,
    solver: Solver | Agent | None = None,
    settings: dict[str, Any] | None = None,
    registry: Registry | None = None,
) -> Task:
    """The ALE task ``task_id`` as an Inspect task (module docstring).

    ``sandbox``: how each run confines the agent (``auto``, ``bwrap``, ``docker``,
    ``none``); ``episodes``: a smoke run of the first N episodes (not official);
    ``budget_s``: the agent's wall-clock budget (default: the task's); ``runs_root``:
    where the runs go (default ``./runs``); ``label``: what groups the runs on the
    leaderboard (default the model's name, ``openai-gpt-5``); ``settings``: any other run
    option, by its eval-set SPEC key (``workers``, ``cpus``, ``agent_image``, ...);
    ``solver``: another agent (default :func:`ale_agent`).
    """
    reg = registry or default_registry()
    spec = reg.entry(task_id).spec
    brief = render_brief(spec, reg.manifest_entry(spec.id))
    run_settings: dict[str, Any] = {"sandbox": sandbox, **(settings or {})}
    if episodes is not None:
        run_settings["episodes"] = episodes
    if budget_s is not None:
        run_settings["budget_s"] = budget_s
    # The runs root as an absolute path, where the task is made: the sandbox's config is
    # in the eval's log, so a retry of the eval from another directory still finds the
    # samples' runs (and their claims, .retry) where they are.
    root = str(Path(runs_root or "runs").resolve())
    config = AleSandboxConfig(runs_root=root, label=label, settings=run_settings)
    return Task(
        dataset=[
            Sample(
                id=spec.id,
                input=f"{brief}\n\n{AGENT_NOTES}",
                metadata={TASK_ID_KEY: spec.id},
            )
        ],
        solver=solver if solver is not None else ale_agent(),
        scorer=ale_scorer(),
        sandbox=SandboxEnvironmentSpec("ale", config),
        name=spec.id,
    )
