"""Batch jobs, from a submission to its official result.

What this package owns, in the order a job meets it:

* :mod:`.jobs`: SubmitBatchEval and the job's look-ups (status, result, cancel);
* :mod:`.snapshot`: the submission frozen out of the agent's volume, with its SHA-256;
* :mod:`.plan` and :mod:`.smoke`: the artifact loaded from the snapshot and the episodes
  to run (all of the protocol, or a labelled smoke cut);
* :mod:`.runner`: the thread that takes queued jobs and runs them on an executor;
* :mod:`.pipeline`: one shard of episodes in a worker, by the task's rollout kind;
* :mod:`.evidence`: the evidence files the faithfulness gate reads;
* :mod:`.leases` and :mod:`.submission_faults`: jobs of a dead evaluator taken back, and
  submissions the evaluator's own storage failed.

Where the shards run is :mod:`ale_robotics.evaluator.execution`; how a result is built
and signed is :mod:`ale_robotics.evaluator.results`.
"""
