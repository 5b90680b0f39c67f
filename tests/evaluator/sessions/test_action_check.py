"""A session's action check: the fast path for small actions answers exactly as numpy's.

:class:`ActionCheck` compares a small action in Python before :func:`check_action`'s
numpy calls; a mistake here would let a NaN, an infinity or an out-of-bounds action reach
an env, or refuse a good one. Hypothesis draws actions around and on the bounds, finite
and unbounded specs, float32 and float64, and every answer (pass, or the error's message)
must be the one ``check_action`` gives alone.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.evaluator.sessions.inputs import ActionCheck, check_action

_SPECIAL = [np.nan, np.inf, -np.inf, -1.0, 1.0, 0.0, -2.0, 2.0, 1.0000001, np.nextafter(1, 2)]


def _answer(fn: Any, action: np.ndarray) -> str:
    try:
        fn(action)
    except InvalidArgumentError as exc:
        return f"refused: {exc.message}"
    return "passed"


@st.composite
def _cases(draw: st.DrawFn) -> tuple[ActionCheck, np.ndarray]:
    dtype = np.dtype(draw(st.sampled_from([np.float32, np.float64])))
    num_envs = draw(st.integers(1, 4))
    dims = draw(st.integers(1, 8))
    shape = (num_envs, dims)
    unbounded = draw(st.booleans())
    low = np.full(dims, -np.inf if unbounded else -1.0, dtype)
    high = np.full(dims, np.inf if unbounded else 1.0, dtype)
    if draw(st.booleans()):  # one element with bounds of its own
        low[0], high[0] = -0.5, 2.0
    low_b = np.broadcast_to(low, shape)
    high_b = np.broadcast_to(high, shape)
    float64_ok = draw(st.booleans())
    check = ActionCheck(dtype, shape, low_b, high_b, float64_ok)
    act_dtype = draw(st.sampled_from([dtype, np.dtype(np.float64), np.dtype(np.float32)]))
    act_shape = draw(st.sampled_from([shape, (num_envs, dims + 1), (dims,)]))
    values = draw(
        st.lists(
            st.one_of(st.sampled_from(_SPECIAL), st.floats(-3, 3, allow_nan=False)),
            min_size=int(np.prod(act_shape)),
            max_size=int(np.prod(act_shape)),
        )
    )
    return check, np.array(values, dtype=act_dtype).reshape(act_shape)


@settings(max_examples=400, deadline=None)
@given(_cases())
def test_the_fast_path_answers_as_check_action(case: tuple[ActionCheck, np.ndarray]) -> None:
    check, action = case

    def alone(a: np.ndarray) -> None:
        check_action(
            a,
            dtype=check.dtype,
            shape=check.shape,
            low=check.low,
            high=check.high,
            float64_ok=check.float64_ok,
        )

    assert _answer(check, action) == _answer(alone, action)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_unbounded_specs_still_refuse_non_finite_actions(bad: float) -> None:
    shape = (1, 3)
    inf = np.broadcast_to(np.full(3, np.inf, np.float32), shape)
    check = ActionCheck(np.dtype(np.float32), shape, -inf, inf, False)
    check(np.zeros(shape, np.float32))  # a finite action passes an unbounded spec
    action = np.zeros(shape, np.float32)
    action[0, 1] = bad
    with pytest.raises(InvalidArgumentError, match="NaN or infinite"):
        check(action)


def test_large_actions_take_numpy_s_path() -> None:
    shape = (64, 3)
    one = np.broadcast_to(np.ones(3, np.float32), shape)
    check = ActionCheck(np.dtype(np.float32), shape, -one, one, False)
    action = np.zeros(shape, np.float32)
    check(action)
    action[63, 2] = 1.5
    with pytest.raises(InvalidArgumentError, match="env 63 is out of bounds"):
        check(action)
