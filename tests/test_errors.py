from __future__ import annotations

import grpc
import pytest

from ale_robotics import errors


class _FakeCall(grpc.RpcError, grpc.Call):  # type: ignore[misc]
    """Unit-level stand-in for a failed call (integration tests use real sockets)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def initial_metadata(self):  # pragma: no cover - unused
        return ()

    def trailing_metadata(self):  # pragma: no cover - unused
        return ()

    def is_active(self):  # pragma: no cover - unused
        return False

    def time_remaining(self):  # pragma: no cover - unused
        return None

    def cancel(self):  # pragma: no cover - unused
        return False

    def add_callback(self, callback):  # pragma: no cover - unused
        return False


ALL_CLASSES = [
    c
    for c in vars(errors).values()
    if isinstance(c, type) and issubclass(c, errors.AleError) and c is not errors.AleError
]


@pytest.mark.parametrize("cls", ALL_CLASSES, ids=lambda c: c.__name__)
def test_every_error_class_has_a_real_status(cls: type[errors.AleError]) -> None:
    assert cls.code not in (grpc.StatusCode.OK, grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL)


@pytest.mark.parametrize("cls", ALL_CLASSES, ids=lambda c: c.__name__)
def test_client_gets_back_the_family_of_what_the_server_raised(cls: type[errors.AleError]) -> None:
    back = errors.from_rpc_error(_FakeCall(cls.code, "what to fix"))
    assert isinstance(back, errors.error_for_code(cls.code))
    assert issubclass(cls, type(back))
    assert back.message == "what to fix"


def test_unmapped_code_keeps_its_code() -> None:
    back = errors.from_rpc_error(_FakeCall(grpc.StatusCode.INTERNAL, "boom"))
    assert type(back) is errors.AleError
    assert back.code == grpc.StatusCode.INTERNAL
