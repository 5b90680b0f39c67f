"""The ``ale`` sandbox environment of Inspect AI: each sample is one ordinary ALE run.

``sample_init`` starts the sample's run (:class:`.sample_run.SampleRun`: run id, run
directory, evaluator, hidden seeds, trajectory, the sandbox ``bwrap``/``docker``/``none``
with the run's limits) and returns once its agent, the toolbox, is connected. Inspect's
``exec``, ``read_file`` and ``write_file`` are then requests to the toolbox, done inside
the run's sandbox with the agent's variables (``ALE_ENDPOINT``, ``ALE_TOKEN``,
``ALE_SUBMISSION_DIR``, ``ALE_TASK_DIR``): what an agent of ``ale-robotics run`` cannot
see or reach, a tool call cannot either. Relative paths are the agent's scratch directory.

When the harness ends the agent phase (the wall-clock budget, the disk quota), the next
call raises Inspect's :class:`~inspect_ai.util.LimitExceededError`, so that the sample
goes on to its scorer, which reads the run's verdict (:mod:`.scorer`). A sample that ends
without being scored (an error, a cancellation) has its run stopped in ``sample_cleanup``.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any, Literal, overload

import anyio
from inspect_ai.log._samples import sample_active
from inspect_ai.util import (
    ExecResult,
    LimitExceededError,
    OutputLimitExceededError,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    sandboxenv,
)
from inspect_ai.util._sandbox.environment import SandboxUserUnsupportedError
from pydantic import BaseModel, ConfigDict, Field

from ale_robotics.harness.options import RunOptions, RunSettings, check_label
from ale_robotics.harness.report import InspectRecord
from ale_robotics.inspect.channel import ToolboxGone, decode, toolbox_command
from ale_robotics.inspect.sample_run import SampleRun, inspect_label
from ale_robotics.sandboxes.registry import resolve_sandbox

__all__ = ["TASK_ID_KEY", "AleSandboxConfig", "AleSandboxEnvironment"]

TASK_ID_KEY = "ale_task_id"
"""The sample metadata key naming the ALE task (set by :func:`.task.ale_task`)."""

AGENT_PHASE_OVER = (
    "The ALE run's agent phase is over: the harness stopped the agent (its wall-clock "
    "budget or disk quota) or the run ended. The run is evaluated as it stands."
)
"""The sample's limit message when its toolbox is gone."""

_ERRORS: dict[str, type[Exception]] = {
    "FileNotFoundError": FileNotFoundError,
    "PermissionError": PermissionError,
    "IsADirectoryError": IsADirectoryError,
    "NotADirectoryError": NotADirectoryError,
}


class AleSandboxConfig(BaseModel):
    """The ``ale`` sandbox's configuration: where runs go and how each is run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    runs_root: str | None = Field(
        default=None, description="Where each sample's run directory is made (default ./runs)."
    )
    label: str | None = Field(
        default=None,
        description="The runs' label (what groups them on the leaderboard); default the "
        "model's name.",
    )
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="The run options of every sample's run, by their eval-set SPEC keys "
        "(ale_robotics.harness.options.RunSettings: sandbox, episodes, budget_s, ...).",
    )

    def __hash__(self) -> int:  # Inspect keeps sandbox specs in sets; settings is a dict
        return hash(self.model_dump_json())

    def run_options(self, task_id: str) -> RunOptions:
        """One sample's run options (InvalidArgumentError: settings that cannot work)."""
        settings = RunSettings(**self.settings)
        settings.check()
        # Which Python runs the toolbox depends on the sandbox's kind alone: whether Docker
        # is up is the run's own check when it starts, not the config's.
        python = "python" if not resolve_sandbox(settings.sandbox, check=False).host_files else None
        return RunOptions(
            task_id,
            toolbox_command(python) if python else toolbox_command(),
            **settings.model_dump(exclude_unset=True),
            runs_root=Path(self.runs_root) if self.runs_root else None,
            label=check_label(self.label) if self.label is not None else None,
        )


@sandboxenv(name="ale")
class AleSandboxEnvironment(SandboxEnvironment):
    """One sample's ALE run as Inspect's sandbox (module docstring)."""

    def __init__(self, run: SampleRun) -> None:
        super().__init__()
        self.run = run

    @classmethod
    def config_deserialize(cls, config: dict[str, Any]) -> BaseModel:
        return AleSandboxConfig(**config)

    @classmethod
    def default_concurrency(cls) -> int | None:
        # Each sample's run has its own evaluator and rollout workers.
        return max(1, (os.cpu_count() or 2) // 2)

    @classmethod
    async def sample_init(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        metadata: dict[str, str],
    ) -> dict[str, SandboxEnvironment]:
        cfg = config if isinstance(config, AleSandboxConfig) else AleSandboxConfig()
        task_id = metadata.get(TASK_ID_KEY)
        if not task_id:
            raise ValueError(
                f"the 'ale' sandbox needs the sample's metadata to name its task "
                f"({TASK_ID_KEY}); use ale_robotics.inspect.ale_task"
            )
        active = sample_active()
        model = active.model if active is not None else "unknown"
        record = InspectRecord(
            log=str(active.log_location) if active is not None else None,
            model=model,
            task=task_name,
            eval_id=active.eval_id if active is not None else "",
            sample_id=str(active.sample.id) if active is not None else "",
            epoch=active.epoch if active is not None else 1,
        )
        opts = cfg.run_options(task_id)
        if opts.label is None:
            opts = opts.model_copy(update={"label": inspect_label(model)})
        run = SampleRun(opts, record)
        await anyio.to_thread.run_sync(run.start, abandon_on_cancel=False)
        return {"default": cls(run)}

    @classmethod
    async def sample_cleanup(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        environments: dict[str, SandboxEnvironment],
        interrupted: bool,
    ) -> None:
        for env in environments.values():
            if isinstance(env, AleSandboxEnvironment):
                await anyio.to_thread.run_sync(env.run.abort)

    async def exec(
        self,
        cmd: list[str],
        input: str | bytes | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        timeout: int | None = None,
        timeout_retry: bool = True,
        concurrency: bool = True,
    ) -> ExecResult[str]:
        if user is not None:
            raise SandboxUserUnsupportedError("the 'ale' sandbox runs every command as its agent")
        data = input.encode() if isinstance(input, str) else input
        answer = await self._call(
            {
                "op": "exec",
                "cmd": cmd,
                "input": base64.b64encode(data).decode() if data is not None else None,
                "cwd": cwd,
                "env": env or {},
                "timeout": timeout,
            },
            None if timeout is None else timeout + 30,
        )
        if answer.get("timed_out"):
            raise TimeoutError(f"the command did not end in {timeout} s")
        code = int(answer["returncode"])
        return ExecResult(
            success=code == 0,
            returncode=code,
            stdout=decode(answer.get("stdout")).decode("utf-8", errors="replace"),
            stderr=decode(answer.get("stderr")).decode("utf-8", errors="replace"),
        )

    async def write_file(self, file: str, contents: str | bytes) -> None:
        data = contents.encode() if isinstance(contents, str) else contents
        await self._call({"op": "write", "path": file, "data": base64.b64encode(data).decode()})

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> str | bytes:
        answer = await self._call({"op": "read", "path": file})
        data = decode(answer.get("data"))
        return data.decode("utf-8") if text else data

    async def _call(self, request: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        """The toolbox's answer; its error as the exception Inspect expects."""
        try:
            # Abandoned when the sample is cancelled (an Inspect time limit): the command
            # itself ends with the run (sample_cleanup stops it), not the cancellation.
            answer = await anyio.to_thread.run_sync(
                self.run.call, request, timeout, abandon_on_cancel=True
            )
        except ToolboxGone:
            # Ends the sample as one of Inspect's own limits does (its working limit):
            # the sample's work is cancelled and its scorer runs.
            limit = LimitExceededError("custom", value=1, limit=1, message=AGENT_PHASE_OVER)
            active = sample_active()
            if active is not None:
                active.limit_exceeded(limit)
            raise limit from None
        error = answer.get("error")
        if error is None:
            return answer
        kind, message = str(error.get("type")), str(error.get("message"))
        if kind == "OutputLimitExceeded":
            raise OutputLimitExceededError("100 MiB", None)
        raise _ERRORS.get(kind, RuntimeError)(message)
