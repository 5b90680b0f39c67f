"""Runs compared: summaries of every run under a runs root, the leaderboard, comparisons.

Read-only over the run directories the harness writes (``result.json``): it imports
the report model (:mod:`ale_robotics.harness.report`), never the evaluator core, the
harness's run or the command line (a contract in ``.importlinter``), so that the
HTML report, the CLI and any script read the same summaries the same way.

- :class:`RunIndex` (:mod:`.index`): the runs under a root, kept in
  ``<root>/index.sqlite3`` and refreshed from the run directories on every read;
- :class:`RunSummary` (:mod:`.summary`): one run, flat;
- :func:`leaderboard` / :class:`LeaderRow` (:mod:`.leaderboard`): the best official
  run per task and label;
- :func:`compare` / :class:`Comparison` (:mod:`.compare`): runs side by side.
"""

from ale_robotics.runs.compare import Comparison, MetricRow, compare, spread
from ale_robotics.runs.index import INDEX_FILE, IndexProblem, Refresh, RunIndex
from ale_robotics.runs.leaderboard import LeaderRow, leaderboard
from ale_robotics.runs.summary import RunState, RunSummary, load_summary, summarize

__all__ = [
    "INDEX_FILE",
    "Comparison",
    "IndexProblem",
    "LeaderRow",
    "MetricRow",
    "Refresh",
    "RunIndex",
    "RunState",
    "RunSummary",
    "compare",
    "leaderboard",
    "load_summary",
    "spread",
    "summarize",
]
