"""One error hierarchy for the whole package, mapped to gRPC status codes here and only here.

::

    AleError                      (base; carries a grpc.StatusCode)
    ├── InvalidArgumentError      INVALID_ARGUMENT     malformed request, tensor or action
    ├── NotFoundError             NOT_FOUND            unknown task, job, run or session
    │   └── TaskNotFoundError                          ...with "did you mean" suggestions
    ├── FailedPreconditionError   FAILED_PRECONDITION  call not valid in the current state
    ├── PermissionDeniedError     PERMISSION_DENIED    role violation (agent asks for a result)
    ├── UnauthenticatedError      UNAUTHENTICATED      missing or wrong token
    ├── ResourceExhaustedError    RESOURCE_EXHAUSTED   a quota or a size limit
    ├── OutOfRangeError           OUT_OF_RANGE         past an episode budget
    ├── UnimplementedError        UNIMPLEMENTED        not offered by this evaluator
    ├── UnavailableError          UNAVAILABLE          evaluator unreachable (client side)
    └── DeadlineExceededError     DEADLINE_EXCEEDED    a call or a run ran out of time

Servers raise these; the gRPC layer turns them into a status with the message
unchanged (see :func:`to_status`). Clients receive :class:`grpc.RpcError` and get
back the same class through :func:`from_rpc_error`, so agent code can ``except
NotFoundError`` whether it talks to a local or a remote evaluator. Anything that
is not an :class:`AleError` is a bug and surfaces as INTERNAL without details.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import grpc

__all__ = [
    "AleError",
    "ConfigError",
    "DeadlineExceededError",
    "FailedPreconditionError",
    "InvalidArgumentError",
    "NotFoundError",
    "OutOfRangeError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "TaskNotFoundError",
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
    "error_for_code",
    "from_rpc_error",
]


class _StatusCode:
    """A class's gRPC status code, looked up in grpc when it is read.

    Importing this module must not import grpc: every module of the task model
    raises these errors, and the evaluator's rollout workers, which import the task
    model and never speak gRPC, would pay for it (60-90 ms each).
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: object, owner: type | None = None) -> grpc.StatusCode:
        import grpc

        return grpc.StatusCode[self.name]


class AleError(Exception):
    """Base of every error this package raises on purpose."""

    code = _StatusCode("UNKNOWN")

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgumentError(AleError):
    code = _StatusCode("INVALID_ARGUMENT")


class ConfigError(InvalidArgumentError):
    """A task config, manifest or contract that does not validate; names the task and field."""


class NotFoundError(AleError):
    code = _StatusCode("NOT_FOUND")


class TaskNotFoundError(NotFoundError):
    """Unknown task id; the message carries close matches."""


class FailedPreconditionError(AleError):
    code = _StatusCode("FAILED_PRECONDITION")


class PermissionDeniedError(AleError):
    code = _StatusCode("PERMISSION_DENIED")


class UnauthenticatedError(AleError):
    code = _StatusCode("UNAUTHENTICATED")


class ResourceExhaustedError(AleError):
    code = _StatusCode("RESOURCE_EXHAUSTED")


class OutOfRangeError(AleError):
    code = _StatusCode("OUT_OF_RANGE")


class UnimplementedError(AleError):
    code = _StatusCode("UNIMPLEMENTED")


class UnavailableError(AleError):
    code = _StatusCode("UNAVAILABLE")


class DeadlineExceededError(AleError):
    code = _StatusCode("DEADLINE_EXCEEDED")


_MAPPED: tuple[type[AleError], ...] = (
    InvalidArgumentError,
    NotFoundError,
    FailedPreconditionError,
    PermissionDeniedError,
    UnauthenticatedError,
    ResourceExhaustedError,
    OutOfRangeError,
    UnimplementedError,
    UnavailableError,
    DeadlineExceededError,
)


def error_for_code(code: grpc.StatusCode) -> type[AleError]:
    """The exception class a client raises for a status code (AleError for unmapped ones)."""
    return next((cls for cls in _MAPPED if cls.code == code), AleError)


def from_rpc_error(err: grpc.RpcError) -> AleError:
    """Translate a gRPC failure seen by a client into the matching typed error."""
    import grpc

    code = err.code() if isinstance(err, grpc.Call) else grpc.StatusCode.UNKNOWN
    details = err.details() if isinstance(err, grpc.Call) else str(err)
    cls = error_for_code(code)
    exc = cls(details or code.name)
    if cls is AleError:
        exc.code = code
    return exc
