"""Fixtures for the command-line tests; the helpers themselves are in ``cli_helpers``.

The real run is made once per session; tests that change it work on a copy
(:func:`cli_helpers.copy_run`).
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# As in tests/trajectory: the test modules import their helpers as a top-level module.
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

from cli_helpers import RealRun, make_real_run


@pytest.fixture(scope="session")
def real_run() -> Iterator[RealRun]:
    """One real completed run of the TD3 checkpoint agent (its dir and the evaluator secret)."""
    with tempfile.TemporaryDirectory(prefix="ale-cli-") as tmp:
        yield make_real_run(Path(tmp))
