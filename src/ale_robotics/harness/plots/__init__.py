"""A run's figures, drawn into its run directory with the report.

* :mod:`.episodes`        ``episodes.png``: the primary metric per evaluated episode
* :mod:`.learning_curve`  ``learning_curve.png``: the measured learning curve against the paper's
* :mod:`.canvas`          what both share: matplotlib at its built-in defaults, colours, the task

A sub-package of the harness because each figure is a module of its own (its data, then
its drawing) and both share the canvas; the report (:mod:`ale_robotics.harness.report`)
and the run index (:mod:`ale_robotics.runs`) import the figure they need.
"""

__all__: list[str] = []
