"""How long the harness waits out an evaluator that is gone (``--evaluator-retry-s``).

An evaluator restarted (kill -9, then started again), a replica that died while another
takes its jobs over, a job store restarted under the evaluator: each makes the
evaluator's calls fail for seconds, after which it answers again and the run's job is
finished (re-run from its snapshot if it was running). Every harness call is retried
with backoff (0.2 s doubling to 5 s between tries) until this window has passed since
the first failure, and the failure the run then records says how long it waited. An
agent's own client is not given the window: what an agent does about an outage is its
own business, and its time counts against its budget.
"""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import Field, field_validator

from ale_robotics.harness.options.decl import Flag, OptionGroup

__all__ = ["DEFAULT_EVALUATOR_RETRY_S", "RetryOptions"]

DEFAULT_EVALUATOR_RETRY_S = 300.0
"""Five minutes: a restart of the evaluator or its store, and a lease running out
(15 s by default) before another replica re-runs the job, fit well inside it."""


class RetryOptions(OptionGroup):
    """How the harness rides out an evaluator or job store that stops answering."""

    evaluator_retry_s: Annotated[float, Flag("--evaluator-retry-s", metavar="SECONDS")] = Field(
        default=DEFAULT_EVALUATOR_RETRY_S,
        description="How long the harness keeps retrying an evaluator that stopped answering "
        "(restarted, failed over to another replica, its job store restarting) before the "
        "run fails as infrastructure (result.json 'failed', exit 1); 0: fail at once.",
    )

    @field_validator("evaluator_retry_s")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not (math.isfinite(value) and value >= 0):
            raise ValueError("the retry window must be a number of seconds, 0 or more")
        return value
