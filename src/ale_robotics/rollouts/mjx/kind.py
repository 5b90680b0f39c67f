"""The ``mjx`` kind: the contract's MLP and a shard's MuJoCo physics as one JAX program (MJX).

Installed with the optional extra ``mjx`` (``pip install 'ale-robotics[mjx]'``: mujoco-mjx
and JAX). The kind is registered whether or not the extra is installed, because its
module imports neither: every task-config parse loads its kind (the task model calls
:meth:`check_task`), including in processes that never run a shard (an agent's client
reading GetSpec), so JAX is imported inside :meth:`MjxKind.run_shard` only, and a
missing extra is reported there, naming what to install.

Resources: XLA reserves virtual address space far beyond what it uses (measured on a
2-core CPU-only host: about 2.2 GiB peak for 0.8 GiB resident; a 1.5 GiB ``RLIMIT_AS``
fails with ``MemoryError``). Its thread pools, and with them glibc's malloc arenas, grow
with the core count, and CUDA maps device and host memory into the process, so the
4 GiB ``RLIMIT_AS`` of an evaluation worker, which fits on 2 cores, is expected to break
it on a large host and on any GPU one (not measured here: no such host was available).
:attr:`MjxKind.worker_needs` declares that, for the executor to start this kind's
workers without the address-space limit (the other limits stay) and only one of them
per host; see :class:`WorkerNeeds`.

Before the first JAX import in a process, :func:`configure_xla` sets defaults
(``setdefault``: an operator's own settings win) that keep several worker processes
on one GPU workable and results repeatable: no 75 % preallocation of GPU memory per
process, and XLA's deterministic GPU reductions (scatter-adds otherwise use atomics,
whose order, and so whose float32 rounding, varies from run to run).
"""

from __future__ import annotations

import os
import sys
from typing import ClassVar

from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.model.rollout_kind import Artifact, EpisodeCallback, Shard, WorkerNeeds
from ale_robotics.rollouts.policy import PolicyRolloutKind
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["FAMILY_IDS", "MjxKind", "MjxUnavailable", "WorkerNeeds", "configure_xla"]

FAMILY_IDS = frozenset({"HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "InvertedPendulum-v5"})
"""Env ids with a JAX step here (the keys of :data:`.families.FAMILIES`, which imports JAX;
a test keeps the two equal)."""

INSTALL_HINT = "pip install 'ale-robotics[mjx]' (mujoco-mjx and jax, see constraints/dev.txt)"


class MjxUnavailable(ImportError):
    """The ``mjx`` extra is not installed in this process's environment."""


XLA_DEFAULTS = {
    # Each worker process would otherwise grab 75% of a GPU's memory when JAX starts.
    "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
}
XLA_FLAGS = ("--xla_gpu_deterministic_ops=true",)
"""Appended to ``XLA_FLAGS`` unless already named there."""


def configure_xla() -> None:
    """Set this kind's XLA defaults in ``os.environ``, if JAX is not imported yet here."""
    if "jax" in sys.modules:
        return  # too late to matter; the process's JAX keeps what it started with
    for name, value in XLA_DEFAULTS.items():
        os.environ.setdefault(name, value)
    flags = os.environ.get("XLA_FLAGS", "").split()
    for flag in XLA_FLAGS:
        if not any(f.split("=")[0] == flag.split("=")[0] for f in flags):
            flags.append(flag)
    os.environ["XLA_FLAGS"] = " ".join(flags)


class MjxKind(PolicyRolloutKind):
    """The env families in :data:`FAMILY_IDS`, stepped by MJX on JAX's default device."""

    name = "mjx"
    worker_needs: ClassVar[WorkerNeeds] = WorkerNeeds(unlimited_address_space=True, max_workers=1)
    """No ``RLIMIT_AS`` (see the module docstring), and one worker per host: one process
    drives the accelerator (each would compile the shard's program and hold a device
    context of its own), and on a CPU XLA spreads one program over the cores itself."""
    env_ids = FAMILY_IDS
    step_name = "JAX step"

    def run_shard(
        self,
        task: TaskSpec,
        artifact: Artifact,
        seeds: Shard,
        on_episode: EpisodeCallback | None = None,
    ) -> list[EpisodeOutcome]:
        """The shard as one jitted, vmapped program (:func:`.rollout.run_task`); episodes
        that terminate leave the batch, the others run to the task's step limit."""
        configure_xla()
        try:
            from ale_robotics.rollouts.mjx import rollout
        except ImportError as exc:
            raise MjxUnavailable(
                f"the 'mjx' rollout kind needs mujoco-mjx and jax ({exc}); {INSTALL_HINT}"
            ) from exc
        return rollout.run_task(task, artifact, seeds, on_episode)
