"""Reference agent for the planning tasks: hand over a prepared planner configuration.

* ``panda-planner-config-v2`` and ``-v1`` (batch): copy ``planning/planner.yaml`` (or
  ``--config FILE``) into the submission directory as ``planner.yaml``, submit, wait for
  the job.
* ``edmp-v2`` and ``-v1`` (read-from-task-config): the harness has already written the
  agent's copy of the planner settings, ``edmp_config.yaml``, into the submission
  directory; merge the keys of ``planning/edmp_config.yaml`` (or ``--config FILE``) into
  it and exit. The harness submits it when the agent exits; calling SubmitBatchEval would
  be refused.

Nothing is tuned at run time: these files were chosen offline (the README gives the numbers).
Exit status: 0 on success (batch: the job SUCCEEDED), 1 when the job ended otherwise, 2 on a
local problem. The agent never sees the score.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent / "planning"
DEFAULTS = {
    **dict.fromkeys(("panda-planner-config-v1", "panda-planner-config-v2"), HERE / "planner.yaml"),
    **dict.fromkeys(("edmp-v1", "edmp-v2"), HERE / "edmp_config.yaml"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--config", type=Path, help="YAML file to hand over instead")
    args = parser.parse_args(argv)

    from ale_robotics.client import AleClient

    client = AleClient.from_env()
    if client.submission_dir is None:
        print("error: ALE_SUBMISSION_DIR is not set; run this under the harness", file=sys.stderr)
        return 2
    spec = client.get_spec()
    task = spec.task
    source = args.config or DEFAULTS.get(task.id)
    if source is None or not source.is_file():
        print(f"error: no configuration for task {task.id} (use --config)", file=sys.stderr)
        return 2
    assert spec.contract is not None
    name = next(iter(spec.contract.files[0].names))
    target = client.submission_dir / name
    if task.mode.value == "task_config":
        copy = yaml.safe_load(target.read_text()) if target.is_file() else {}
        copy.update(yaml.safe_load(source.read_text()))
        target.write_text(yaml.safe_dump(copy, sort_keys=False))
        print(
            f"task {task.id}: updated {name} from {source.name}; exiting so the harness submits it",
            flush=True,
        )
        return 0
    target.write_bytes(source.read_bytes())
    print(f"task {task.id}: wrote {name} from {source}", flush=True)
    job_id = client.submit()
    status = client.wait(job_id)
    print(f"job {job_id}: {status.state} ({status.episodes_done}/{status.episodes_total})")
    if status.state != "SUCCEEDED":
        print(f"error: {status.failure_reason}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
