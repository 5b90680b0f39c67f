"""Step over one long-lived ``StepStream`` call instead of one unary call per Step.

A unary gRPC call costs about 0.8 ms of Python machinery on a 2-core machine,
client and server together; a message on an open bidi stream about half that
(``python benchmarks/interactive.py`` measures both). For a 64-env Step of a
light MuJoCo task (~4 ms of physics) that difference is what keeps a remote
vector env near an in-process one.

gRPC's synchronous client drains the request iterator on a thread of its own and
hands responses to whoever iterates the call; a second, daemon reader thread here
moves them into a queue so that :meth:`StepStream.step` can wait with the
client's timeout (iterating the call directly cannot time out). A stream that
saw an error or a timeout is dead (the server ends it with the status); the
session is intact, and the caller opens a new stream.
"""

from __future__ import annotations

import queue
import threading
from typing import TYPE_CHECKING

import grpc

from ale_robotics.errors import AleError, DeadlineExceededError, UnavailableError, from_rpc_error
from ale_robotics.v1 import ale_env_pb2 as pb

if TYPE_CHECKING:
    from ale_robotics.client.sdk import AleClient

__all__ = ["StepStream"]


class StepStream:
    """One open StepStream call: :meth:`step` sends a request and waits for its answer."""

    def __init__(self, client: AleClient) -> None:
        self._timeout_s = client.timeout_s
        self._requests: queue.SimpleQueue[pb.StepRequest | None] = queue.SimpleQueue()
        self._responses: queue.SimpleQueue[pb.StepResponse | AleError] = queue.SimpleQueue()
        self._call = client.stub.StepStream(
            iter(self._requests.get, None), metadata=client.metadata
        )
        self.answered = 0
        """Responses received: 0 means the server may have refused the stream itself."""
        self.dead = False
        threading.Thread(target=self._read, name="ale-step-stream", daemon=True).start()

    def step(self, request: pb.StepRequest) -> pb.StepResponse:
        """Send one Step request; its response, or the typed error that ended the stream."""
        if self.dead:
            raise UnavailableError("this step stream has ended; open a new one")
        self._requests.put(request)
        try:
            out = self._responses.get(timeout=self._timeout_s)
        except queue.Empty:
            self.close()
            raise DeadlineExceededError(
                f"no Step response within {self._timeout_s:g}s (AleClient timeout_s)"
            ) from None
        if isinstance(out, AleError):
            self.close()
            raise out
        self.answered += 1
        return out

    def close(self) -> None:
        """End the stream (idempotent): half-close it, and cancel it if it was broken."""
        if not self.dead:
            self.dead = True
            self._requests.put(None)  # the request iterator ends: the server's loop ends too
        self._call.cancel()

    def _read(self) -> None:
        try:
            for response in self._call:
                self._responses.put(response)
        except grpc.RpcError as err:
            self._responses.put(from_rpc_error(err))
        else:
            self._responses.put(UnavailableError("the evaluator ended the step stream"))
