"""What a submission is judged by, below the evaluator and the task model.

:class:`~ale_robotics.submission.rejected.SubmissionRejected` and the strict YAML
loader live here (not in :mod:`ale_robotics.evaluator`) so that task-side code
such as :mod:`ale_robotics.planning` can reject a file without importing the
evaluator, which imports the task model; this package imports nothing of ours.
"""
