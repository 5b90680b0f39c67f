"""The errors the trajectory library raises, as part of the package's one error tree.

::

    AleError                                   (ale_robotics.errors)
    └── TrajectoryError                        base of everything below
        ├── InvalidEventError       INVALID_ARGUMENT     an event that must not be written
        │                                                (NaN in a payload, wrong run_id, bad kind)
        ├── EventFormatError        INVALID_ARGUMENT     a line that is not a well-formed event
        ├── SignatureError          INVALID_ARGUMENT     an Ed25519 signature that does not verify
        ├── KeyFileError            INVALID_ARGUMENT     an unusable key (file or hex string)
        ├── TornTrajectoryError     FAILED_PRECONDITION  the file ends in a partial line
        └── CorruptTrajectoryError  FAILED_PRECONDITION  the last event cannot be extended

The writer raises rather than repairs: a trajectory is evidence, so a torn or
tampered tail is left in place for ``ale-robotics trajectory verify`` to report.
Verification itself does not raise on a bad file; it returns a report naming
the first bad event (see :mod:`ale_robotics.trajectory.verify`).
"""

from __future__ import annotations

from ale_robotics.errors import AleError, FailedPreconditionError, InvalidArgumentError

__all__ = [
    "CorruptTrajectoryError",
    "EventFormatError",
    "InvalidEventError",
    "KeyFileError",
    "SignatureError",
    "TornTrajectoryError",
    "TrajectoryError",
]


class TrajectoryError(AleError):
    """Base of every trajectory error; the gRPC code comes from the second base."""


class InvalidEventError(TrajectoryError, InvalidArgumentError):
    """An event the caller asked to write breaks a rule (non-finite float, other run, ...)."""


class EventFormatError(TrajectoryError, InvalidArgumentError):
    """A stored line that is not a well-formed event (not JSON, schema violation)."""


class SignatureError(TrajectoryError, InvalidArgumentError):
    """A trusted-evaluator signature that is missing, malformed or does not verify."""


class KeyFileError(TrajectoryError, InvalidArgumentError):
    """A key that cannot be used: unreadable, not Ed25519, or readable by others."""


class TornTrajectoryError(TrajectoryError, FailedPreconditionError):
    """The file ends with a line that was not completely written (no final newline)."""


class CorruptTrajectoryError(TrajectoryError, FailedPreconditionError):
    """The file's last event is unreadable, has a wrong hash, or belongs to another run."""
