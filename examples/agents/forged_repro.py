"""A forged reproduction (issue 17): claims a full TD3 run without training at all.

It submits a random actor of exactly the contract's shapes, a ``meta.json`` that claims TD3
and 1,000,000 training steps, and a ``curve.csv`` ramping to a return of 4600 (plus the
matching ``final_eval_return``). It opens no practice session and commits no checkpoint.

Before issue 17 the faithfulness gate of ``td3-walker2d-repro-v1`` read only these files and
this agent passed all four checks. Now the gate rests on what the evaluator and the harness
observed, so the run scores 0 with the failing checks naming that evidence::

    ale-robotics run td3-walker2d-repro-v1 --agent "python examples/agents/forged_repro.py"
    score: 0.000 (faithfulness gate failed: budget: meta.json declares training_steps
    1,000,000, but the evaluator observed 0 practice steps)

and ``result.json``'s learning_curve check says "0 practice steps observed; 0 checkpoints
evaluated (at least 3 needed)". It is kept as the reference attack the tests run
(tests/harness/test_run_repro.py); ``--commit-checkpoint`` adds the next thing a forger would
try, committing the random actor as a single checkpoint without training, which fails too.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
from safetensors.numpy import save_file

from ale_robotics.client import AleClient

CLAIMED_STEPS = 1_000_000
CLAIMED_FINAL_RETURN = 4600.0


def forged_curve(points: int = 10) -> str:
    """A curve.csv ramping linearly to the claimed return at the claimed step count."""
    rows = ["step,eval_return"]
    for i in range(1, points + 1):
        step = CLAIMED_STEPS * i // points
        rows.append(f"{step},{CLAIMED_FINAL_RETURN * step / CLAIMED_STEPS:.1f}")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--commit-checkpoint",
        action="store_true",
        help="also commit the random actor as one checkpoint (still no training)",
    )
    args = parser.parse_args(argv)

    client = AleClient.from_env()
    if client.submission_dir is None:
        print("error: ALE_SUBMISSION_DIR is not set; run under the harness")
        return 2
    spec = client.get_spec()
    if spec.contract is None:
        print(f"error: task {spec.task.id} has no submission contract")
        return 2
    out = client.submission_dir
    rng = np.random.default_rng(args.seed)
    weights = {
        rule.key: (rng.standard_normal(rule.shape) * 0.1).astype(rule.dtype)
        for rule in spec.contract.tensors
    }
    save_file(weights, str(out / "policy.safetensors"))
    if args.commit_checkpoint and "checkpoints" in spec.raw.capabilities:
        ack = client.submit_checkpoint()
        print(f"committed checkpoint {ack.index} at {ack.practice_steps} practice steps")
    meta = {
        "algorithm": "TD3",
        "training_steps": CLAIMED_STEPS,
        "seeds": [args.seed],
        "final_eval_return": CLAIMED_FINAL_RETURN,
    }
    (out / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    (out / "curve.csv").write_text(forged_curve(), encoding="utf-8")
    status = client.wait(client.submit())
    print(f"job {status.job_id}: {status.state}")
    return 0 if status.state == "SUCCEEDED" else 1


if __name__ == "__main__":
    sys.exit(main())
