"""One Inspect sample's ALE run: an ordinary run whose agent is the sample's tool calls.

:class:`SampleRun` starts :func:`ale_robotics.harness.run.run_task` on a thread of its
own, with the toolbox (:mod:`.toolbox`) as the agent command and the toolbox channel
(:mod:`.channel`) as a service its sandbox shows it. Everything else is the harness's,
unchanged: the run id and directory, the embedded (or external) evaluator, the task
packet, the sandbox and its limits, the wall-clock budget, hidden seeds, the trajectory,
the evaluation, the score and ``result.json``. The sample's sandbox calls go through the
channel (:meth:`SampleRun.call`); the scorer ends the agent phase
(:meth:`SampleRun.finish`: the toolbox exits 0, as an agent that is done) and gets the
run's verdict, and so does the sandbox's cleanup for a sample that errored; a sample that
is cancelled stops the run (:meth:`SampleRun.abort`: ``result.json`` says
``interrupted``). What the sample used of its model is Inspect's account, which the
sample's side keeps in :attr:`SampleRun.model_usage` and the run reads once its agent
phase ended (``result.json``'s ``model_usage``).
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from pathlib import Path
from typing import Any

from ale_robotics.gateway.usage import ModelUsage
from ale_robotics.harness.interrupt import StopRequest
from ale_robotics.harness.options import LABEL_MAX_LEN, RunOptions
from ale_robotics.harness.report import InspectRecord
from ale_robotics.harness.run import run_task
from ale_robotics.harness.verdict import RunOutcome
from ale_robotics.inspect.channel import ToolboxGone, ToolChannel
from ale_robotics.sandboxes.errors import HarnessError
from ale_robotics.tasks.registry import Registry
from ale_robotics.trajectory import TrajectoryWriter

__all__ = ["SampleRun", "inspect_label"]

START_TIMEOUT_S = 300.0
"""How long a run may take to reach its agent phase (the evaluator started, the sandbox
made, the toolbox connected) before the sample fails."""


def inspect_label(model: str) -> str:
    """The run label of an Inspect sample: its model's name as a label may hold it
    (``openai/gpt-5`` -> ``openai-gpt-5``); result.json's ``inspect`` says it was Inspect."""
    cleaned = re.sub(r"[^A-Za-z0-9._+-]+", "-", model).strip("-.+_") or "model"
    return cleaned[:LABEL_MAX_LEN]


class SampleRun:
    """The run behind one sample (module docstring)."""

    def __init__(
        self, opts: RunOptions, record: InspectRecord, *, registry: Registry | None = None
    ) -> None:
        self.opts = opts
        self.inspect_record = record
        self.registry = registry
        self.channel = ToolChannel()
        self.stop = StopRequest()
        self.run_id: str | None = None
        self.run_dir: Path | None = None
        self.trajectory: TrajectoryWriter | None = None
        self.outcome: RunOutcome | None = None
        self.error: BaseException | None = None
        self.model_usage: ModelUsage | None = None
        """Inspect's account of the sample's model use so far (set on the sample's side)."""
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ale-inspect-run", daemon=True)

    @property
    def cwd(self) -> str:
        """The agent's working directory as the toolbox sees it (its scratch directory)."""
        return str(self.channel.ready.get("cwd", ""))

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start the run and wait until its toolbox is connected.

        Raises the run's own error (:class:`~ale_robotics.errors.AleError`: options that
        cannot work, a sandbox that did not start) when it ended before its agent phase,
        and :class:`HarnessError` when it did not get there in ``timeout`` s (it is stopped).
        """
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.channel.accept(0.2):
            if self._done.is_set():
                self.channel.close()
                if self.error is not None:
                    raise self.error
                raise HarnessError("the run ended before its agent (the toolbox) started")
            if time.monotonic() > deadline:
                self.abort()
                raise HarnessError(f"the run did not start its agent in {timeout:.0f} s")

    def call(self, request: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        """One request to the toolbox (:meth:`.ToolChannel.call`); ToolboxGone once the
        agent phase is over (the budget, the disk quota, or the run's end)."""
        return self.channel.call(request, timeout)

    def record(self, kind: str, payload: dict[str, Any]) -> None:
        """A harness event in the run's trajectory (any thread; the writer locks the file)."""
        if self.trajectory is not None and not self._done.is_set():
            self.trajectory.append("harness", kind, payload)

    def finish(self) -> RunOutcome:
        """End the agent phase (the toolbox exits 0) and wait for the run's verdict.

        Raises the run's error when it ended without one (:class:`HarnessError`: the
        infrastructure failed, ``result.json`` says ``failed``).
        """
        # Gone already (its budget), or not answering: the harness ends it either way.
        with contextlib.suppress(ToolboxGone, TimeoutError):
            self.channel.call({"op": "exit"}, timeout=30)
        self._done.wait()
        self.channel.close()
        if self.outcome is None:
            raise self.error or HarnessError("the run ended without a verdict")
        return self.outcome

    def abort(self, why: str = "Inspect (the sample ended without scoring)") -> None:
        """Stop the run (its agent, its jobs) and wait: ``result.json`` says ``interrupted``."""
        if not self._done.is_set():
            self.stop.request(why)
            self._done.wait()
        self.channel.close()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def _started(self, run_id: str, run_dir: Path) -> None:
        self.run_id, self.run_dir = run_id, run_dir
        self.trajectory = TrajectoryWriter(run_dir / "trajectory.jsonl", run_id)

    def _run(self) -> None:
        try:
            self.outcome = run_task(
                self.opts,
                registry=self.registry,
                on_start=self._started,
                stop=self.stop,
                agent_access=self.channel.access,
                inspect=self.inspect_record,
                model_usage=lambda: self.model_usage,
            )
        except BaseException as exc:  # handed to whoever waits (start, finish)
            self.error = exc
        finally:
            self._done.set()
