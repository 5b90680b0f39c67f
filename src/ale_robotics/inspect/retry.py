"""One ALE run per Inspect sample, however often Inspect runs the sample again.

Inspect runs a sample again in three ways: ``retry_on_error`` (in the same eval), a task's
retries (``eval_set``: a fresh log and eval id per attempt, in the same call or a later
one on the same log directory) and ``eval_retry`` (a new eval of a log's errored and
unfinished samples). Each calls the sandbox's ``sample_init`` again, and a new ALE run
draws new hidden seeds: an agent that saw its practice go badly could make its sample
fail and buy another draw. So a sample's run is *claimed* once its agent phase has
started (:meth:`Claims.claim`): a file under the runs root (``.inspect-samples/``, which
``runs list`` skips and no agent's sandbox shows), named by what all three keep of the
sample (:class:`SampleKey`): the eval's stable task id (Inspect's ``EvalSpec.task_id``;
each attempt's eval id is new), the sample's id and its epoch.

A later ``sample_init`` with the same key starts no run (:func:`earlier_outcome`): when
the claimed run was scored and its trajectory verifies, the sample reports that run's
verdict; otherwise (interrupted, failed, still running, lost) it fails with
:class:`RetryRefused`, saying which run it had and why. A new ``inspect eval`` (a new
task id) evaluates the task afresh. A sample whose run failed before its agent started
claims nothing, so its retry starts a run: its agent never saw the first.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pydantic
from inspect_ai.log._samples import ActiveSample
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from ale_robotics.errors import FailedPreconditionError
from ale_robotics.harness.report import StoppedRunReport, load_run_report
from ale_robotics.harness.run_lock import harness_alive
from ale_robotics.harness.verdict import RunOutcome
from ale_robotics.trajectory.verify import verified_events

__all__ = ["CLAIMS_DIR", "Claims", "RetryRefused", "SampleClaim", "SampleKey", "earlier_outcome"]

CLAIMS_DIR = ".inspect-samples"
"""The claims' directory in the runs root (a dot name: ``runs list`` does not read it)."""


class RetryRefused(FailedPreconditionError):
    """Inspect ran a sample again whose ALE run ended without a verdict to report."""


@dataclass(frozen=True)
class SampleKey:
    """What identifies one sample of one eval across every retry of it."""

    task_id: str
    """Inspect's ``EvalSpec.task_id``: kept by retry_on_error, eval_set and eval_retry."""
    sample_id: str
    epoch: int

    @classmethod
    def of(cls, active: ActiveSample) -> SampleKey:
        """The running sample's key."""
        # The stable task id of the attempt's eval id, from Inspect's registry of running
        # evals (every eval registers there); private in Inspect, whose release is pinned.
        from inspect_ai._control.eval_state import stable_task_id_for_eval

        return cls(stable_task_id_for_eval(active.eval_id), str(active.sample.id), active.epoch)

    @property
    def digest(self) -> str:
        text = json.dumps([self.task_id, self.sample_id, self.epoch], separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def describe(self) -> str:
        return f"sample {self.sample_id!r} (epoch {self.epoch}) of Inspect task {self.task_id}"


class SampleClaim(BaseModel):
    """A claim file: the sample and the one ALE run it has."""

    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    task_id: str = Field(description="Inspect's stable task id of the eval.")
    sample_id: str = Field(description="The sample's id in its dataset.")
    epoch: int = Field(description="The sample's epoch.")
    run_id: str = Field(description="The ALE run the sample has.")
    run_dir: str = Field(description="Its run directory (absolute).")
    claimed_at: AwareDatetime = Field(description="When its agent phase started (UTC).")


class Claims:
    """The claims of the runs under ``runs_root`` (module docstring)."""

    def __init__(self, runs_root: Path) -> None:
        self.dir = runs_root.resolve() / CLAIMS_DIR

    def path(self, key: SampleKey) -> Path:
        return self.dir / f"{key.digest}.json"

    def find(self, key: SampleKey) -> SampleClaim | None:
        """The sample's claim; None when it has none. RetryRefused for a claim that
        cannot be read (the sample had a run, and which one is unknown)."""
        path = self.path(key)
        try:
            return SampleClaim.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, pydantic.ValidationError) as exc:
            raise RetryRefused(
                f"{key.describe()} already had an ALE run, and its claim {path} cannot be "
                f"read ({exc}); Inspect's retries start no second run: start a new eval"
            ) from None

    def claim(self, key: SampleKey, run_id: str, run_dir: Path) -> SampleClaim | None:
        """Claim ``run_id`` for the sample; None when it has a claim already (then the
        run is not its). The file appears whole or not at all (a link of a written one)."""
        claim = SampleClaim(
            task_id=key.task_id,
            sample_id=key.sample_id,
            epoch=key.epoch,
            run_id=run_id,
            run_dir=str(run_dir.resolve()),
            claimed_at=dt.datetime.now(dt.UTC),
        )
        self.dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".claim-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(claim.model_dump_json(indent=2))
            try:
                os.link(tmp, self.path(key))
            except FileExistsError:
                return None
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        return claim


def earlier_outcome(key: SampleKey, claim: SampleClaim) -> RunOutcome:
    """The verdict of the sample's claimed run, for a retry to report; RetryRefused when
    it has none to report (module docstring)."""
    run_dir = Path(claim.run_dir)

    def refused(why: str) -> RetryRefused:
        return RetryRefused(
            f"{key.describe()} already had its ALE run {claim.run_id} ({run_dir}), which "
            f"{why}. Inspect's retries start no second run of a sample (new hidden seeds "
            "would give it another draw): to evaluate the task again, start a new eval "
            "(inspect eval, or eval-set with a new log directory)"
        )

    path = run_dir / "result.json"
    if not path.exists():
        alive = harness_alive(run_dir)
        raise refused("is still running" if alive else "has no result.json (its harness died)")
    try:
        report = load_run_report(path)
    except (OSError, ValueError) as exc:  # JSONDecodeError and ValidationError are ValueErrors
        raise refused(f"has a result.json that cannot be read ({exc})") from None
    if isinstance(report, StoppedRunReport):
        raise refused(f"was {report.state} without a score ({report.reason})")
    check, events = verified_events(
        run_dir / "trajectory.jsonl",
        expected_run_id=claim.run_id,
        expected_head=report.trajectory_head or None,
    )
    if events is None:
        raise refused(f"has a trajectory that does not verify ({check.reason})")
    lines = [str(e.payload.get("line", "")) for e in events if e.kind == "score"]
    return RunOutcome(
        run_id=claim.run_id,
        run_dir=run_dir,
        report=report,
        score_line=lines[-1] if lines else report.score.score_line(),
    )
