"""The sandboxes' errors: one that stops a run before it starts, one that fails it.

::

    AleError
    ├── UnavailableError
    │   └── SandboxError        the sandbox cannot be set up here (a tool, daemon or image
    │       │                   is missing; a path it cannot mount); says what to install
    │       └── DockerError     ...the docker CLI or daemon (sandboxes.docker.cli)
    └── HarnessError            the run could not be completed: infrastructure, never the
                                agent's score (a sandbox that did not start the agent, a
                                container command that failed)

``HarnessError`` is the harness's failure; it is defined here, below the harness, because
the sandboxes raise it too, and imported from here by everyone.
"""

from __future__ import annotations

from ale_robotics.errors import AleError, UnavailableError

__all__ = ["HarnessError", "SandboxError"]


class SandboxError(UnavailableError):
    """The sandbox cannot be built or did not start: an infrastructure failure.

    The run must fail as such (re-run it, or use ``--sandbox none``), never
    score the agent 0.
    """


class HarnessError(AleError):
    """The run could not be completed (infrastructure, not the agent's score)."""
