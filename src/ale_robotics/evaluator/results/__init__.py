"""Results: task metrics from episode outcomes, and the one builder of an ``EvalResult``.

Shared by batch jobs and eval sessions, so that a result means the same whichever mode
produced it: :mod:`.metrics` computes a task's metrics by name, :mod:`.builder` builds the
official result and its signed ``result`` event.
"""
