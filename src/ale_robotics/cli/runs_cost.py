"""What a run's model cost, as the tables of ``runs list|show|compare`` and ``leaderboard``
show it beside the score (issue 45): the tokens and calls its model gateway counted.

Apart from :mod:`.runs_tables` (which lays them out) to keep that module to its size. A
run no gateway counted shows none ('-'), never 0: unknown is not free.
"""

from __future__ import annotations

from collections.abc import Sequence

from ale_robotics.runs import LeaderRow, RunSummary
from ale_robotics.runs.numbers import fmt_column, fmt_tokens

__all__ = ["COST_HEADER", "cost_cells", "cost_note", "cost_width", "model_text"]


COST_HEADER = "tokens/\ncalls"
"""The cost column's header: two lines ('tokens/', 'calls') over cells like '48.2k/12'."""


def cost_note(whose: str) -> str:
    """What the cost column holds (said under a table that has one)."""
    return (
        f"tokens/calls: the model's input + output tokens of {whose} and its model calls, "
        "as the run's model gateway counted them ('-': the run had no gateway, nothing "
        "counted)"
    )


def cost_cells(rows: Sequence[RunSummary | LeaderRow]) -> list[str]:
    """Each row's model cost beside its score, 'TOKENS/CALLS' ('48.2k/12'), the tokens in
    one format for the column (:func:`~ale_robotics.runs.numbers.fmt_tokens`) and
    aligned on the '/'; '-' for a run that no gateway counted (never 0). Empty when no
    row has a count: then the table has no such column and keeps its room. One column,
    not two, so that a label keeps room for its longest word at 80 columns."""
    if all(r.model_tokens is None for r in rows):
        return []
    tokens = fmt_tokens([r.model_tokens for r in rows], missing="")
    calls = fmt_column([r.model_calls for r in rows], missing="")
    tokens_w = max(map(len, tokens))
    calls_w = max(map(len, calls))
    return [
        f"{t:>{tokens_w}}/{c:<{calls_w}}" if t else f"{'-':>{tokens_w}}{'':<{calls_w + 1}}"
        for t, c in zip(tokens, calls, strict=True)
    ]


def cost_width(cells: list[str]) -> tuple[int, ...]:
    """The cost column's width for the table's room (none without the column)."""
    return (max(len("tokens/"), *map(len, cells)),) if cells else ()


def model_text(s: RunSummary) -> str:
    """What the run's model cost: its calls and tokens, or why nothing says (never 0)."""
    if s.model_calls is None or s.model_tokens is None:
        if s.state != "completed":
            return "not recorded: the run stopped before its result"
        return "none counted: the run had no model gateway"
    calls = f"{s.model_calls:,} call{'s' if s.model_calls != 1 else ''}"
    split = ""
    if s.model_tokens_in is not None and s.model_tokens_out is not None:
        split = f" ({s.model_tokens_in:,} in, {s.model_tokens_out:,} out)"
    estimated = (
        f"; {s.model_estimated_calls} call(s) estimated (no usage reported upstream)"
        if s.model_estimated_calls
        else ""
    )
    return f"{calls}, {s.model_tokens:,} tokens{split}{estimated}"
