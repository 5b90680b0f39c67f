"""The ``ale`` sandbox environment of Inspect AI: each sample is one ordinary ALE run.

``sample_init`` starts the sample's run (:class:`.sample_run.SampleRun`: run id, run
directory, evaluator, hidden seeds, trajectory, the sandbox ``bwrap``/``docker``/``none``
with the run's limits) and returns once its agent, the toolbox, is connected. Inspect's
``exec``, ``read_file`` and ``write_file`` are then requests to the toolbox, done inside
the run's sandbox with the agent's variables (``ALE_ENDPOINT``, ``ALE_TOKEN``,
``ALE_SUBMISSION_DIR``, ``ALE_TASK_DIR``): what an agent of ``ale-robotics run`` cannot
see or reach, a tool call cannot either. Relative paths are the agent's scratch directory.

Whatever a tool call's arguments make fail (a NUL byte, a missing or unreadable file, any
``OSError``, text that is not UTF-8) comes back to the model as a tool error, never as the
sample's error (:func:`toolbox_error` maps every failure to an exception Inspect reports
to the model). When the harness ends the agent phase (the wall-clock budget, the disk
quota), the next call raises Inspect's :class:`~inspect_ai.util.LimitExceededError`, so
that the sample goes on to its scorer, which reads the run's verdict (:mod:`.scorer`).

A sample that errors is ended in ``sample_cleanup`` as an agent that exits is: its run is
evaluated as it stands and scored; a cancelled one (Ctrl-C, the eval cancelled) has its
run stopped (``interrupted``). Either way the sample's run is its only one: Inspect's
retries find it (:mod:`.retry`) and report its verdict, or refuse, instead of drawing new
hidden seeds.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
from pathlib import Path
from typing import Any, Literal, overload

import anyio
from inspect_ai.log import transcript
from inspect_ai.log._samples import sample_active
from inspect_ai.tool import ToolError
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

from ale_robotics.errors import AleError
from ale_robotics.harness.options import RunOptions, RunSettings, check_label
from ale_robotics.harness.report import InspectRecord
from ale_robotics.harness.verdict import RunOutcome
from ale_robotics.inspect.accounting import UsageTally, record_transcript
from ale_robotics.inspect.channel import ToolboxGone, decode, toolbox_command
from ale_robotics.inspect.retry import Claims, RetryRefused, SampleKey, earlier_outcome
from ale_robotics.inspect.sample_run import SampleRun, inspect_label
from ale_robotics.sandboxes.registry import resolve_sandbox

__all__ = ["TASK_ID_KEY", "AleSandboxConfig", "AleSandboxEnvironment", "toolbox_error"]

logger = logging.getLogger(__name__)

TASK_ID_KEY = "ale_task_id"
"""The sample metadata key naming the ALE task (set by :func:`.task.ale_task`)."""

AGENT_PHASE_OVER = (
    "The ALE run's agent phase is over: the harness stopped the agent (its wall-clock "
    "budget or disk quota) or the run ended. The run is evaluated as it stands."
)
"""The sample's limit message when its toolbox is gone."""

RUN_ALREADY_ENDED = (
    "This sample's ALE run has already ended: Inspect ran the sample again (a retry), and "
    "a retry starts no new run. The sample's score is that run's."
)
"""The limit message of a retried sample whose run was scored (its every tool call)."""

_OS_ERRORS: dict[str, type[OSError]] = {
    "FileNotFoundError": FileNotFoundError,
    "PermissionError": PermissionError,
    "IsADirectoryError": IsADirectoryError,
}
"""The toolbox's failures that Inspect reports to the model by their own type."""


def toolbox_error(error: dict[str, Any]) -> Exception:
    """The exception for a toolbox's error answer: one Inspect turns into a tool error.

    Inspect reports a tool's ``FileNotFoundError``, ``PermissionError``,
    ``IsADirectoryError``, ``OutputLimitExceededError``, ``TimeoutError``,
    ``UnicodeDecodeError``, a ``ValueError`` for an embedded null byte and any
    :class:`~inspect_ai.tool.ToolError` to the model, and fails the sample on anything
    else. So those keep their type, and every other failure, whatever its type, is a
    ``ToolError`` with its type and message: nothing a tool call's arguments can do in the
    sandbox errors the sample.
    """
    kind, message = str(error.get("type")), str(error.get("message"))
    if kind == "OutputLimitExceeded":
        return OutputLimitExceededError("100 MiB", None)
    os_error = _OS_ERRORS.get(kind)
    if os_error is not None:
        errno, strerror, filename = error.get("errno"), error.get("strerror"), error.get("filename")
        if isinstance(errno, int) and isinstance(strerror, str):
            return os_error(errno, strerror, *([filename] if isinstance(filename, str) else []))
        return os_error(message)
    if kind == "ValueError" and "embedded null byte" in message:
        return ValueError("embedded null byte")  # Inspect's own tool error for a NUL
    return ToolError(f"{kind}: {message}")


def _utf8(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate: not text any program can get
        raise ToolError(f"the {what} is not valid UTF-8 text ({exc.reason})") from None


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
    """One sample's ALE run as Inspect's sandbox (module docstring).

    ``run``: the sample's run and ``usage`` Inspect's account of its model use, or, for a
    sample Inspect ran again after its run was scored, ``earlier``: that run's verdict
    (every call then ends the sample, whose scorer reports it).
    """

    def __init__(
        self,
        run: SampleRun | None,
        usage: UsageTally | None = None,
        *,
        earlier: RunOutcome | None = None,
    ) -> None:
        super().__init__()
        self.run = run
        self.usage = usage
        self.earlier = earlier

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
        key = SampleKey.of(active) if active is not None else None
        claims = Claims(opts.runs_root or Path("runs"))
        claimed = claims.find(key) if key is not None else None
        if key is not None and claimed is not None:  # Inspect runs this sample again
            outcome = await anyio.to_thread.run_sync(earlier_outcome, key, claimed)
            return {"default": cls(None, earlier=outcome)}
        usage = UsageTally(
            budget_tokens=active.token_limit if active is not None else None, log=record.log
        )
        run = SampleRun(opts, record)
        run.model_usage = usage.update()
        await anyio.to_thread.run_sync(run.start, abandon_on_cancel=False)
        assert run.run_id is not None and run.run_dir is not None  # set before its agent
        if key is not None and claims.claim(key, run.run_id, run.run_dir) is None:
            await anyio.to_thread.run_sync(run.abort)  # another process runs this sample
            raise RetryRefused(f"{key.describe()} has an ALE run already (another attempt)")
        return {"default": cls(run, usage)}

    @classmethod
    async def sample_cleanup(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        environments: dict[str, SandboxEnvironment],
        interrupted: bool,
    ) -> None:
        for env in environments.values():
            if not isinstance(env, AleSandboxEnvironment) or env.run is None:
                continue
            if interrupted or env.run.done:  # cancelled: stopped; done: its channel closed
                await anyio.to_thread.run_sync(env.run.abort)
                continue
            # The sample errored (or was not scored): its run ends as an agent that exits.
            try:
                await env.end_run()
            except AleError as exc:  # the run failed: result.json says so, and why
                logger.warning("the sample's ALE run %s failed: %s", env.run.run_id, exc)

    async def end_run(self) -> RunOutcome:
        """End the run's agent phase as an agent that is done and wait for its verdict,
        the sample's calls and model use recorded first (the scorer, the cleanup)."""
        assert self.run is not None and self.usage is not None
        record_transcript(self.run, transcript().events)
        self.run.model_usage = self.usage.update()
        return await anyio.to_thread.run_sync(self.run.finish)

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
        data = _utf8(input, "input") if isinstance(input, str) else input
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
        try:
            code = int(answer["returncode"])
            out, err = decode(answer.get("stdout")), decode(answer.get("stderr"))
        except (KeyError, TypeError, ValueError, binascii.Error):
            raise ToolError(
                f"the sandbox's toolbox gave no command result: {answer!r:.200}"
            ) from None
        return ExecResult(
            success=code == 0,
            returncode=code,
            stdout=out.decode("utf-8", errors="replace"),
            stderr=err.decode("utf-8", errors="replace"),
        )

    async def write_file(self, file: str, contents: str | bytes) -> None:
        data = _utf8(contents, "file's text") if isinstance(contents, str) else contents
        await self._call({"op": "write", "path": file, "data": base64.b64encode(data).decode()})

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> str | bytes:
        answer = await self._call({"op": "read", "path": file})
        try:
            data = decode(answer.get("data"))
        except (TypeError, ValueError, binascii.Error):
            raise ToolError(f"the sandbox's toolbox gave no file: {answer!r:.200}") from None
        return data.decode("utf-8") if text else data

    async def _call(self, request: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        """The toolbox's answer; its error as an exception Inspect reports to the model."""
        if self.run is None:  # a retried sample whose run is over: the scorer reports it
            raise self._limit(RUN_ALREADY_ENDED)
        if self.usage is not None:  # what the run reads if the harness ends it first
            self.run.model_usage = self.usage.update()
        try:
            # Abandoned when the sample is cancelled (an Inspect time limit): the command
            # itself ends with the run (sample_cleanup stops it), not the cancellation.
            answer = await anyio.to_thread.run_sync(
                self.run.call, request, timeout, abandon_on_cancel=True
            )
        except ToolboxGone:
            raise self._limit(AGENT_PHASE_OVER) from None
        error = answer.get("error")
        if error is None:
            return answer
        raise toolbox_error(error if isinstance(error, dict) else {"message": error})

    @staticmethod
    def _limit(message: str) -> LimitExceededError:
        """Ends the sample as one of Inspect's own limits does (its working limit): the
        sample's work is cancelled and its scorer runs."""
        limit = LimitExceededError("custom", value=1, limit=1, message=message)
        active = sample_active()
        if active is not None:
            active.limit_exceeded(limit)
        return limit
