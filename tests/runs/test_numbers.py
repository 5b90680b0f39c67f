"""One number format per column (``runs/numbers.py``, issue 48.11)."""

from __future__ import annotations

from ale_robotics.runs.numbers import (
    column_decimals,
    fmt_column,
    fmt_fixed,
    fmt_significant,
    fmt_tokens,
)


def test_a_column_has_the_decimals_of_its_largest_value() -> None:
    assert column_decimals([998.826, 999.757, 8.2]) == 2  # 5 significant digits of 999.757
    assert column_decimals([1000.0, 0.5]) == 1
    assert column_decimals([0.0123, None, float("nan")]) == 6  # capped
    assert column_decimals([0.0, 0.0]) == 4
    assert fmt_column([998.826, 999.757, 1000.0]) == ["998.8", "999.8", "1000.0"]
    assert fmt_column([0.0, 2.1095]) == ["0.0000", "2.1095"]


def test_counts_stay_whole_and_missing_values_say_so() -> None:
    assert fmt_column([1000, 998, None]) == ["1000", "998", "-"]
    assert fmt_column([12_000, 5]) == ["12,000", "5"]


def test_a_column_of_different_quantities_keeps_its_significant_digits() -> None:
    """The index's primary metrics of several tasks: '8.23149', '999.151', '59.5' were
    three formats; each now has 5 significant digits, trailing zeros kept."""
    assert [fmt_significant(v) for v in (8.23149, 999.151, 59.5)] == ["8.2315", "999.15", "59.500"]
    assert fmt_significant(123456.7) == "123457" and fmt_significant(0.000012345) == "0.000012"
    assert fmt_significant(None) == "-" and fmt_fixed(-0.00001, 3) == "0.000"


def test_a_column_of_tokens_has_one_unit_and_an_uncounted_run_shows_none() -> None:
    """Issue 45: a model's tokens beside the score: whole below 10,000, else in thousands
    or millions with 3 significant digits of the column's largest value, the same unit
    and decimals down the column; a run no gateway counted is '-', never 0."""
    assert fmt_tokens([2880, 480, None]) == ["2880", "480", "-"]
    assert fmt_tokens([48_213, 2880, 480]) == ["48.2k", "2.9k", "0.5k"]
    assert fmt_tokens([123_456, 5]) == ["123k", "0k"]
    assert fmt_tokens([1_234_567, 48_213]) == ["1.23M", "0.05M"]
    assert fmt_tokens([99_999]) == ["100k"]  # the decimals of the value as shown
    assert fmt_tokens([0, None], missing="—") == ["0", "—"]  # a counted 0 is a 0
    assert fmt_tokens([]) == []
