"""Audit a finished run once the evaluator's secret is revealed.

Everything the evaluator published is checked against what anyone can
recompute: the trajectory chain and signatures, the secret against its
commitment, every hidden seed against its commitment, the submission files
against their recorded SHA-256, and finally the metrics, by re-running the
evaluation on the recomputed seeds. An interactive eval session cannot be re-run
without the agent that drove it, so there the metrics are recomputed from the
episodes and those are checked against the signed ``episode_summary`` events.
Any mismatch is reported by name.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ale_robotics.evaluator.metrics import HOST_TIMED
from ale_robotics.evaluator.pipeline import EpisodeOutcome, summarize
from ale_robotics.evaluator.plan import episode_plan, load_artifact
from ale_robotics.evaluator.pool import RolloutPool
from ale_robotics.evaluator.result import EvalResult
from ale_robotics.evaluator.smoke import smoke_task
from ale_robotics.evaluator.snapshot import SubmissionRejected, snapshot_submission
from ale_robotics.seeds import derive_seeds
from ale_robotics.tasks.registry import Registry, default_registry
from ale_robotics.tasks.spec import TaskMode, TaskSpec
from ale_robotics.trajectory import COMMITMENT_EVENT_KIND, verify_file

__all__ = ["AuditCheck", "AuditReport", "audit_run", "read_secret"]


@dataclass
class AuditCheck:
    name: str
    ok: bool
    detail: str


@dataclass
class AuditReport:
    run_id: str
    checks: list[AuditCheck] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    def add(self, name: str, ok: bool, detail: str) -> bool:
        self.checks.append(AuditCheck(name, ok, detail))
        return ok


def read_secret(path: Path) -> bytes:
    """The secret as the evaluator stores it (32 raw bytes), or as 64 hex digits."""
    data = path.read_bytes()
    text = data.strip()
    if len(text) == 64:
        try:
            return bytes.fromhex(text.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            pass
    return data


def audit_run(
    run_dir: Path,
    secret: bytes,
    *,
    submission_dir: Path | None = None,
    public_key: str | None = None,
    registry: Registry | None = None,
    workers: int | None = None,
) -> AuditReport:
    reg = registry or default_registry()
    result_doc = json.loads((run_dir / "result.json").read_text(encoding="utf-8"))
    report = AuditReport(run_id=result_doc["run_id"])
    raw_result = result_doc.get("eval_result")
    if raw_result is None:
        report.add("result", False, "the run has no evaluator result to audit")
        return report
    result = EvalResult.model_validate(raw_result)

    traj = verify_file(
        run_dir / "trajectory.jsonl",
        public_key,
        expected_run_id=result.run_id,
        expected_head=result_doc.get("trajectory_head") or None,
    )
    report.add("trajectory", traj.ok, traj.summary())

    secret_sha = hashlib.sha256(secret).hexdigest()
    report.add(
        "secret commitment",
        secret_sha == result.secret_sha256,
        f"SHA256(secret) {'matches' if secret_sha == result.secret_sha256 else 'differs from'} "
        "the published secret_sha256",
    )

    task_entry = reg.entry(result.task_id)
    report.add(
        "task config",
        task_entry.sha256 == result.task_config_sha256,
        f"installed config sha256 {task_entry.sha256[:12]}..., evaluated "
        f"{result.task_config_sha256[:12]}...",
    )
    task = task_entry.spec
    if result.smoke_run is not None:  # the evaluator ran (and committed to) the first N only
        task = smoke_task(task, result.smoke_run.episodes)
        report.add(
            "smoke run",
            True,
            f"a smoke run of {result.smoke_run.episodes} of {result.smoke_run.of} episodes: "
            "checked as such, not an official result",
        )
    seeds = derive_seeds(task.eval.base_seeds, result.run_id, secret)
    published = _published_commitments(run_dir / "trajectory.jsonl")
    mine = [s.commitment for s in seeds]
    report.add(
        "seed commitments",
        published == mine
        and all(0 <= e.index < len(mine) for e in result.episodes)
        and all(e.seed_commitment == mine[e.index] for e in result.episodes),
        f"{len(mine)} recomputed seeds against the trajectory's seed_commitment event "
        "and the result's episodes",
    )
    if result.state != "SUCCEEDED":
        report.add("metrics", True, f"job {result.state}: no metrics to re-run")
        return report
    if task.mode is TaskMode.INTERACTIVE:
        _audit_eval_session(report, result, run_dir / "trajectory.jsonl", task)
        return report

    assert task.contract is not None
    source = submission_dir or run_dir / "submission"
    with tempfile.TemporaryDirectory(prefix="ale-audit-") as tmp:
        try:
            files = snapshot_submission(source, "", task.contract, Path(tmp) / "snap")
        except SubmissionRejected as exc:
            report.add("submission files", False, str(exc))
            return report
        hashes = {f.name: f.sha256 for f in files}
        same = hashes == result.submission_files
        report.add(
            "submission files",
            same,
            "identical to the evaluated snapshot"
            if same
            else f"{source} no longer holds the evaluated files: pass --submission with them",
        )
        if not same:
            return report
        artifact = load_artifact(files, task)
    runs = episode_plan(task, seeds)
    pool = RolloutPool(workers)
    try:
        outcomes = pool.run(
            task, artifact, [seed for _, seed in runs], indices=[i for i, _ in runs]
        )
    finally:
        pool.shutdown()
    again = summarize(outcomes, (m.name for m in task.metrics))
    exact = {k: v for k, v in again.items() if k not in HOST_TIMED}
    report.add(
        "metrics",
        exact == {k: v for k, v in result.metrics.items() if k not in HOST_TIMED},
        ", ".join(f"{k} {again[k]!r} vs {result.metrics.get(k)!r}" for k in sorted(exact)),
    )
    timed = sorted(k for k in again if k in HOST_TIMED)
    if timed:
        report.add(
            "timed metrics",
            True,
            "re-measured on this host, not compared (wall-clock, host-dependent): "
            + ", ".join(
                f"{k} {again[k]:.4g} vs {result.metrics.get(k, float('nan')):.4g}" for k in timed
            ),
        )
    return report


def _audit_eval_session(
    report: AuditReport, result: EvalResult, path: Path, task: TaskSpec
) -> None:
    signed: dict[int, tuple[float, int]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event.get("kind") == "episode_summary" and event.get("level") == "trusted_evaluator":
            p = event["payload"]
            signed[p["index"]] = (p["episode_return"], p["length"])
    mine = {e.index: (e.episode_return, e.length) for e in result.episodes}
    report.add(
        "episodes",
        signed == mine,
        f"{len(mine)} episodes against the trajectory's signed episode_summary events",
    )
    again = summarize(
        [
            EpisodeOutcome(e.index, e.episode_return, e.length, e.terminated, success=e.success)
            for e in result.episodes
        ],
        (m.name for m in task.metrics),
    )
    report.add(
        "metrics",
        again == result.metrics,
        ", ".join(f"{k} {again[k]!r} vs {result.metrics.get(k)!r}" for k in sorted(again)),
    )


def _published_commitments(path: Path) -> list[str]:
    for line in path.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event.get("kind") == COMMITMENT_EVENT_KIND and event.get("level") == "trusted_evaluator":
            return list(event["payload"]["seed_commitments"])
    return []
