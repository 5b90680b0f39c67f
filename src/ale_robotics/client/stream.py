"""Step over one long-lived ``StepStream`` call instead of one unary call per Step.

A unary gRPC call costs about 0.8 ms of Python machinery on a 2-core machine,
client and server together; a message on an open bidi stream about half that
(``python benchmarks/interactive.py`` measures both). For a 64-env Step of a
light MuJoCo task (~4 ms of physics) that difference is what keeps a remote
vector env near an in-process one.

gRPC's synchronous client drains the request iterator on a thread of its own;
:meth:`StepStream.step` reads the answer by iterating the call in the caller's
thread, which cannot time out by itself, so a watchdog thread (awake every
quarter of the timeout, not every step: each thread hand-off per Step costs
tens of microseconds) cancels a call whose answer is overdue. A stream that saw
an error or a timeout is dead (the server ends it with the status); the session
is intact, and the caller opens a new stream.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import TYPE_CHECKING

import grpc

from ale_robotics.errors import DeadlineExceededError, UnavailableError, from_rpc_error
from ale_robotics.v1 import ale_env_pb2 as pb

if TYPE_CHECKING:
    from ale_robotics.client.sdk import AleClient

__all__ = ["StepStream"]


class StepStream:
    """One open StepStream call: :meth:`step` sends a request and waits for its answer."""

    def __init__(self, client: AleClient) -> None:
        self._timeout_s = client.timeout_s
        self._requests: queue.SimpleQueue[pb.StepRequest | None] = queue.SimpleQueue()
        self._call = client.stub.StepStream(
            iter(self._requests.get, None), metadata=client.metadata
        )
        self.answered = 0
        """Responses received: 0 means the server may have refused the stream itself."""
        self.dead = False
        self._waiting_since: float | None = None
        self._timed_out = False
        self._closed = threading.Event()
        threading.Thread(target=self._watch, name="ale-step-stream", daemon=True).start()

    def step(self, request: pb.StepRequest) -> pb.StepResponse:
        """Send one Step request; its response, or the typed error that ended the stream."""
        if self.dead:
            raise UnavailableError("this step stream has ended; open a new one")
        self._waiting_since = time.monotonic()
        self._requests.put(request)
        try:
            response: pb.StepResponse = next(self._call)
        except StopIteration:
            self.close()
            raise UnavailableError("the evaluator ended the step stream") from None
        except grpc.RpcError as err:
            self.close()
            if self._timed_out:
                raise DeadlineExceededError(
                    f"no Step response within {self._timeout_s:g}s (AleClient timeout_s)"
                ) from None
            raise from_rpc_error(err) from None
        finally:
            self._waiting_since = None
        self.answered += 1
        return response

    def close(self) -> None:
        """End the stream (idempotent); the server's loop for it ends too."""
        if not self.dead:
            self.dead = True
            self._requests.put(None)  # ends the request iterator (frees gRPC's sender thread)
            self._closed.set()
        self._call.cancel()

    def _watch(self) -> None:
        while not self._closed.wait(self._timeout_s / 4):
            if self._call.done():  # ended without close() (the channel closed): nothing to watch
                return
            since = self._waiting_since
            if since is not None and time.monotonic() - since > self._timeout_s:
                self._timed_out = True
                self._call.cancel()  # the waiting next() raises CANCELLED
                return
