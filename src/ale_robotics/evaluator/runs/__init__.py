"""Runs and their budgets: who a caller acts for, and what a run may still spend.

* :mod:`.registry`: the runs of a shared evaluator and their per-run agent tokens;
* :mod:`.service`: OpenRun and CloseRun;
* :mod:`.access`: which run a call acts for, and what of other runs it may see;
* :mod:`.training_budget`: practice steps counted and enforced against the manifest;
* :mod:`.checkpoints` and :mod:`.checkpoint_records`: checkpoints committed while a run
  trains, measured by the evaluator, and their signed records.
"""
