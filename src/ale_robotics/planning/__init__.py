"""Motion planning for the Franka Panda on procedural MπNets-style scenes (PyBullet).

Shared by the two planning tasks: :mod:`.scenes` (problems from a hidden seed),
:mod:`.world` (PyBullet collision checking), :mod:`.validate` (dense path
validation, the only judge of a path), :mod:`.ompl_planner` with
:mod:`.planner_procs` (``panda-planner-config-v1``/``-v2``: OMPL in processes the
evaluator owns) and :mod:`.edmp` (``edmp-v1``/``-v2``: an ensemble-of-costs trajectory
generator on numpy), timed by the wall clock (v1) or in CPU seconds (v2,
:mod:`.cpu_clock`). Importing this package loads neither PyBullet nor OMPL;
the modules that need them import them when used.
"""
