"""Interactive sessions: the envs an agent drives over gRPC (Reset/Step), in the evaluator.

* :mod:`.manager`: opens, finds, serializes, reaps and closes sessions, within the task's
  ``session`` limits;
* :mod:`.vector`: one session, ``num_envs`` Gymnasium envs stepped together;
* :mod:`.envs`: how a session's envs are built and stepped, and the null action;
* :mod:`.types`: a session's kind, the autoreset modes, what a Reset or Step returns;
* :mod:`.inputs`: a call's action and seeds checked before any env moves;
* :mod:`.limits`: which sessions a task offers and how many a run and the evaluator hold;
* :mod:`.rendering`: frames of a session's envs (``rgb_array``);
* :mod:`.eval_record`: the trusted record of an eval session (its job row, signed
  events and ``EvalResult``), stored like a batch job's.
"""
