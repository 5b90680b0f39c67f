"""Mounted by the agent sandbox in place of a module the task hides from agents.

Never imported on purpose: :func:`ale_robotics.sandboxes.bwrap.command.bwrap_command`
binds this file read-only over the ``__init__.py`` of a hidden package (or over
a hidden module file), so that inside the sandbox ``import`` of that module
fails with a message that says why, instead of silently finding an empty
namespace package. See :mod:`ale_robotics.harness.agent.hidden_modules`.
"""

raise ImportError(
    f"{__name__} is hidden from agents: the task forbids importing it in the agent "
    "sandbox (task config env.agent_hidden_modules, or training.simulator 'evaluator': "
    "the simulator runs only in the evaluator, so train through practice sessions)"
)
