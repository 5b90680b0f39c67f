"""Reference agent for ``make demo``: submit the shipped, pre-trained TD3 checkpoint.

It does no training, so a full evaluator round trip (spec, submission, validation, hidden-seed
rollouts, report) can be exercised in seconds. The checkpoint is found relative to this file, not
the working directory, so the agent works from wherever the harness starts it.

Exit status: 0 when the job succeeded; 1 when it ended in any other terminal state (REJECTED,
FAILED, TIMED_OUT, CANCELLED), with the evaluator's reason printed; 2 on a local problem (missing
checkpoint, a format the contract does not accept). The official score is never printed: the
agent does not see it, the harness reports it.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ale_robotics.client import JobStatus

#: Produced by ``td3_train.py``; see ``checkpoints/td3-inverted-pendulum-v1/meta.json``.
DEFAULT_CHECKPOINT = (
    Path(__file__).resolve().parent
    / "checkpoints"
    / "td3-inverted-pendulum-v1"
    / "policy.safetensors"
)

#: Contract format per file suffix, to pick the accepted name the contract gives that format.
FORMAT_BY_SUFFIX: dict[str, str] = {".safetensors": "safetensors", ".pt": "torch_state_dict"}


def destination_name(checkpoint: Path, accepted: dict[str, str] | None) -> str:
    """The submission file name for ``checkpoint``: the contract's name for its format.

    Without a contract, fall back to ``policy<suffix>`` (the TD3 task's names).
    """
    fmt = FORMAT_BY_SUFFIX.get(checkpoint.suffix)
    if fmt is None:
        raise ValueError(
            f"{checkpoint}: unknown format; expected one of {sorted(FORMAT_BY_SUFFIX)}"
        )
    if accepted is None:
        return f"policy{checkpoint.suffix}"
    for name, name_fmt in accepted.items():
        if str(name_fmt) == fmt:
            return name
    raise ValueError(f"the contract accepts {sorted(accepted)}; none is a {fmt} file")


def stage(checkpoint: Path, submission_dir: Path, accepted: dict[str, str] | None) -> Path:
    """Copy the checkpoint into the submission dir as the only policy file there.

    The contract wants exactly one of its accepted names, so any other accepted policy file
    (left by an earlier attempt) is removed; anything else in the directory is left alone.
    """
    name = destination_name(checkpoint, accepted)
    source = checkpoint.resolve()  # a symlink in the submission dir is replaced below
    submission_dir.mkdir(parents=True, exist_ok=True)
    others = set(accepted or {}) | {f"policy{s}" for s in FORMAT_BY_SUFFIX}
    for other in others - {name}:
        stale = submission_dir / other
        if stale.exists() or stale.is_symlink():
            stale.unlink()
    target = submission_dir / name
    if target.is_symlink():  # the evaluator rejects symlinks; write a real file
        target.unlink()
    elif target.exists() and target.samefile(source):
        return target  # already in place (e.g. written there by a training agent)
    shutil.copyfile(source, target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--checkpoint",
        type=Path,
        default=DEFAULT_CHECKPOINT,
        help="policy file to submit (.safetensors or .pt); default: the shipped TD3 checkpoint",
    )
    args = parser.parse_args(argv)
    checkpoint: Path = args.checkpoint
    if not checkpoint.is_file():
        print(f"error: checkpoint {checkpoint} not found", file=sys.stderr)
        return 2

    from ale_robotics.client import AleClient  # the SDK is only needed once there is a harness

    client = AleClient.from_env()
    if client.submission_dir is None:
        print("error: ALE_SUBMISSION_DIR is not set; run this under the harness", file=sys.stderr)
        return 2
    spec = client.get_spec()
    print(f"task {spec.task.id}: submitting {checkpoint}", flush=True)
    contract = spec.contract if spec.contract is not None else spec.task.contract
    accepted: dict[str, str] | None = None
    if contract is not None:
        accepted = {name: str(fmt) for name, fmt in contract.file_for_role("policy").names.items()}
    try:
        target = stage(checkpoint, client.submission_dir, accepted)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"staged as {target} ({target.stat().st_size} bytes)", flush=True)

    job_id = client.submit()
    print(f"submitted job {job_id}; waiting for the evaluator ...", flush=True)
    last: list[tuple[str, int, int]] = []

    def progress(status: JobStatus) -> None:
        """Print a line whenever the state or the episode count changes (not every poll)."""
        key = (status.state, status.episodes_done, status.episodes_total)
        if not last or last[-1] != key:
            last.append(key)
            print(f"  {status.state} {status.episodes_done}/{status.episodes_total}", flush=True)

    status = client.wait(job_id, on_progress=progress)
    print(
        f"job {job_id} finished: {status.state} "
        f"({status.episodes_done}/{status.episodes_total} episodes)",
        flush=True,
    )
    if status.state == "SUCCEEDED":
        print("evaluation complete; the harness reports the score")
        return 0
    source = f" [{status.failure_source}]" if status.failure_source else ""
    reason = status.failure_reason or "(no reason given)"
    print(f"error: job {job_id} ended {status.state}{source}: {reason}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
