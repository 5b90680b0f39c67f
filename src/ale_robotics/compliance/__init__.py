"""A compliance suite any AleEnv server can be run against (pytest, like dm_env_rpc's).

The suite is a set of abstract test classes; none is collected on its own (their
names do not start with ``Test``). To check a server, subclass them in a test
module and provide a fixture ``ale_endpoint`` returning an :class:`Endpoint`::

    import pytest
    from ale_robotics import compliance

    @pytest.fixture
    def ale_endpoint() -> compliance.Endpoint:
        return compliance.Endpoint("unix:///run/ale/agent.sock", TOKEN, task_id="my-task-v1")

    class TestMyServer(compliance.AleEnvCompliance):
        pass

What it checks: GetSpec's tensor specs and limits are well formed; observations
agree with the spec (dtype, shape, bounds); rewards, flags and infos have the
documented layout; practice sessions are deterministic under a seed; autoreset
is Gymnasium's NEXT_STEP; bad actions (dtype, shape, bounds, NaN, malformed
bytes) are INVALID_ARGUMENT and leave the session usable; Step before Reset is
FAILED_PRECONDITION; unknown sessions are NOT_FOUND; eval sessions ignore
client seeds and say so, enforce their episode budget (OUT_OF_RANGE) and allow
one eval session per run; where the server offers StepStream, a stream answers
exactly as Step calls do. :class:`LimitsCompliance` fills every session slot,
so run it where nothing else uses the server at the same time.
"""

from ale_robotics.compliance.actions import ActionCompliance, LimitsCompliance
from ale_robotics.compliance.endpoint import Endpoint, Wire
from ale_robotics.compliance.eval import EvalSessionCompliance
from ale_robotics.compliance.practice import PracticeSessionCompliance
from ale_robotics.compliance.spec import SpecCompliance
from ale_robotics.compliance.stream import StepStreamCompliance

__all__ = [
    "ActionCompliance",
    "AleEnvCompliance",
    "Endpoint",
    "EvalSessionCompliance",
    "LimitsCompliance",
    "PracticeSessionCompliance",
    "SpecCompliance",
    "StepStreamCompliance",
    "Wire",
]


class AleEnvCompliance(
    SpecCompliance,
    PracticeSessionCompliance,
    ActionCompliance,
    EvalSessionCompliance,
    StepStreamCompliance,
    LimitsCompliance,
):
    """Every check of the suite."""
