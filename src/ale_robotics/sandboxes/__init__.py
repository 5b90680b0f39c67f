"""The agent sandboxes: one interface, registered implementations, chosen by name.

The seam for confining the untrusted agent (docs/architecture.md#layering-rules), shaped
like Inspect's
``@sandboxenv`` and pytest's plugin registry: a small abstract class
(:class:`Sandbox`, with the :class:`Confinement` it prepares for one run; see
:mod:`.base`), and a registry keyed by name (:mod:`.registry`: entry points of the
group ``ale_robotics.sandboxes``). Installed here:

* ``bwrap`` (:mod:`.bwrap`): Linux namespaces through bubblewrap, on this host;
* ``docker`` (:mod:`.docker`, the optional extra ``docker``): a container of the
  agent's image, and the evaluator's container of a run;
* ``none`` (:mod:`.none`): not confined at all.

``--sandbox auto`` is the registry's choice (the first available by
:attr:`Sandbox.auto_rank`). Nothing outside the registry compares a sandbox's name: the
harness asks the sandbox it got. Every implementation runs the same contract tests
(``tests/sandboxes/``).

What they share: the run's cgroup (:mod:`.cgroups`, made by :mod:`.cgroup_setup`), the
host process's environment (:mod:`.process`), what a bubblewrap sandbox shows
(:mod:`.mount_plan`), the running sandboxes (:mod:`.live`) and the directories no agent
may see (:mod:`.run_dirs`), where a hidden module is installed (:mod:`.hidden`), and the
errors (:mod:`.errors`).
"""

from ale_robotics.sandboxes.base import AgentCommand, AgentLaunch, Confinement, Sandbox
from ale_robotics.sandboxes.errors import HarnessError, SandboxError
from ale_robotics.sandboxes.registry import (
    AUTO,
    resolve_sandbox,
    sandbox_choices,
    sandbox_class,
    sandbox_names,
)

__all__ = [
    "AUTO",
    "AgentCommand",
    "AgentLaunch",
    "Confinement",
    "HarnessError",
    "Sandbox",
    "SandboxError",
    "resolve_sandbox",
    "sandbox_choices",
    "sandbox_class",
    "sandbox_names",
]
