"""How a column of numbers is shown: one format for the whole column.

A column whose values each keep their own digits ('8.23149', '999.151', '59.5') cannot
be read down: the decimal points do not line up and the digits say nothing about what
is known. So every table of runs (``runs list|show|compare``, the HTML report) shows a
column, or a row of one quantity, with one number of decimals, chosen from the column
itself (:func:`column_decimals`): enough for :data:`SIGNIFICANT` significant digits of
its largest value. Smaller values in it show fewer significant digits, which is what
they have at the column's precision. Whole numbers (episode lengths, step counts) stay
whole. A column of different quantities (every metric of a run, the primary metrics
of runs of different tasks) has no common precision: each value is shown with the same
number of significant digits instead, trailing zeros kept (:func:`fmt_significant`:
'8.2315', '999.15', '59.500'). A column of model tokens is counted in one unit, from
its largest value (:func:`fmt_tokens`: '2880' and '480', or '48.2k' and '0.5k'), and a
run that no model gateway counted shows none ('-'), never a 0. ``--json`` and
``result.json`` keep every digit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

__all__ = [
    "MAX_DECIMALS",
    "SIGNIFICANT",
    "column_decimals",
    "fmt_column",
    "fmt_fixed",
    "fmt_significant",
    "fmt_tokens",
    "is_whole_column",
]

SIGNIFICANT = 5
"""Significant digits of a column's largest value: a return near 1000 to 0.1."""
MAX_DECIMALS = 6
"""No column is shown finer than this (a column of tiny values reads in exponent form
nowhere: 0.000012 is shown as 0.000012, at most)."""


def _finite(values: Iterable[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def column_decimals(values: Iterable[float | None], significant: int = SIGNIFICANT) -> int:
    """Digits after the point that show the largest finite ``|value|`` of a column with
    ``significant`` significant digits (0 to :data:`MAX_DECIMALS`); ``significant - 1``
    for a column of zeros or of no finite value."""
    top = max((abs(v) for v in _finite(values)), default=0.0)
    if top == 0:
        return max(0, min(MAX_DECIMALS, significant - 1))
    return max(0, min(MAX_DECIMALS, significant - 1 - math.floor(math.log10(top))))


def fmt_fixed(value: float | None, decimals: int) -> str:
    """``value`` at ``decimals`` digits after the point; '-' for None, 'nan' and 'inf' as
    they are, never '-0.000'."""
    if value is None:
        return "-"
    if not math.isfinite(value):
        return str(value)
    text = f"{value:.{decimals}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def is_whole_column(values: Iterable[object]) -> bool:
    """Every value is an int (not a bool): a count, shown without decimals."""
    seen = [v for v in values if v is not None]
    return bool(seen) and all(isinstance(v, int) and not isinstance(v, bool) for v in seen)


def fmt_column(values: Sequence[float | int | None], missing: str = "-") -> list[str]:
    """Each value of one column in the column's one format: counts whole (thousands
    separated from 10,000 up), other numbers at :func:`column_decimals`; ``missing`` for
    None."""
    if is_whole_column(values):
        return [
            missing if v is None else (f"{v:,}" if abs(int(v)) >= 10_000 else str(int(v)))
            for v in values
        ]
    decimals = column_decimals(v for v in values if v is not None)
    return [missing if v is None else fmt_fixed(float(v), decimals) for v in values]


def fmt_significant(value: float | None, significant: int = SIGNIFICANT) -> str:
    """``value`` with ``significant`` significant digits, trailing zeros kept ('59.50'),
    never in exponent form: whole from ``10**significant`` up ('123457'), at most
    :data:`MAX_DECIMALS` decimals ('0.000012'); '-' for None."""
    if value is None:
        return "-"
    if not math.isfinite(value) or value == 0:
        return fmt_fixed(value, significant - 1)
    decimals = significant - 1 - math.floor(math.log10(abs(value)))
    return fmt_fixed(value, max(0, min(MAX_DECIMALS, decimals)))


TOKEN_SIGNIFICANT = 3
"""Significant digits of the largest value of a column of tokens shown in thousands or
millions ('48.2k', '1.23M'): what a cost beside a score needs, narrow enough for 80
columns. ``--json`` has the counts whole."""
_TOKEN_UNITS = ((1_000_000, 1_000_000, "M"), (10_000, 1_000, "k"))
"""(from, unit, suffix): a column is in millions from 1M up, in thousands from 10,000
(below, whole)."""


def fmt_tokens(values: Sequence[int | None], missing: str = "-") -> list[str]:
    """A column of token counts in one format chosen from its largest value: whole below
    10,000 ('2880', '480'), else in thousands or millions at the decimals that give
    :data:`TOKEN_SIGNIFICANT` significant digits of the largest ('48.2k' and '0.5k' in
    one column, '1.23M'); ``missing`` for None (a run whose model use nobody counted:
    unknown, which a 0 would misstate)."""
    top = max((abs(v) for v in values if v is not None), default=0)
    unit = next(((size, suffix) for start, size, suffix in _TOKEN_UNITS if top >= start), None)
    if unit is None:
        return [missing if v is None else str(int(v)) for v in values]
    size, suffix = unit
    # the decimals of the largest value as it is shown (99,960 is '100k', not '100.0k')
    decimals = column_decimals([float(f"{top / size:.{TOKEN_SIGNIFICANT}g}")], TOKEN_SIGNIFICANT)
    return [missing if v is None else fmt_fixed(v / size, decimals) + suffix for v in values]
