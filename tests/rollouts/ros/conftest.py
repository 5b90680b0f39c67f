"""The ``ros`` kind's tests: this directory on ``sys.path`` (``import ros_support``), and the
``ros`` marker's meaning: a test marked ``ros`` needs the ros engine and is skipped without
it, saying so, or fails without it under CI (``ros_support.need_ros``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(autouse=True)
def _ros_engine(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("ros") is not None:
        import ros_support

        ros_support.need_ros()
