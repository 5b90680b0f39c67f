"""What both of a run's figures share: matplotlib loaded and kept to its built-in defaults,
the colours, and the task a result belongs to.

Apart from the figures (:mod:`.episodes`, :mod:`.learning_curve`) because the harness
imports matplotlib ahead of drawing (:func:`import_matplotlib`, on a thread while its
agent runs) without needing either figure, and so that both figures are drawn alike.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager

from ale_robotics.model.result import EvalResult
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["COLOR", "builtin_defaults", "import_matplotlib", "task_for"]

COLOR = {"ok": "#4c72b0", "success": "#55a868", "failed": "#c44e52", "abandoned": "#8c8c8c"}
"""The bars' and marks' colours: a plain bar, a success, a failure, an abandoned episode."""


def task_for(result: EvalResult) -> TaskSpec | None:
    """The task of ``result`` in the bundled registry; None for a task it does not hold."""
    from ale_robotics.tasks import default_registry

    registry = default_registry()
    return registry.get(result.task_id) if result.task_id in registry else None


_MATPLOTLIB_MODULES = (
    "matplotlib",
    "matplotlib.backends.backend_agg",
    "matplotlib.figure",
    "matplotlib.font_manager",
    "matplotlib.patches",
    "matplotlib.ticker",
)
"""What the figures import (font_manager reads the font cache), about 0.25 s."""


def import_matplotlib() -> None:
    """Import the modules the figures use, now: for a caller that will draw after a
    wait (the harness imports them on a thread while its agent runs), so that the
    drawing does not wait for them. A failed import is left for the drawing to
    report: the figure's own import raises it again, where it is logged.
    """
    for name in _MATPLOTLIB_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # see above: the drawing reports it
            return


@contextmanager
def builtin_defaults() -> Iterator[None]:
    """matplotlib's built-in defaults while drawing: a ``matplotlibrc`` in the working
    directory or the user's config is never applied."""
    import matplotlib

    defaults = {
        k: v
        for k, v in matplotlib.rcParamsDefault.items()
        if k not in ("backend", "backend_fallback", "interactive")
    }
    with matplotlib.rc_context(rc=defaults):
        yield
