"""What the gateway answers without calling the upstream: the model list, unknown paths,
the Responses API's WebSocket, and the check of the agent's key every call makes.

These answers have no protocol of their own (``GET /v1/models`` is both APIs'), so they
come in a shape both SDKs read (:func:`.protocols.neutral_error_body`).
"""

from __future__ import annotations

import hmac
from typing import Any, Final

from aiohttp import web

from ale_robotics.gateway.protocols import neutral_error_body
from ale_robotics.gateway.upstream import NO_RETRY
from ale_robotics.gateway.usage import GatewayPolicy

__all__ = ["ANTHROPIC_POSTS", "OPENAI_POSTS", "Listing"]

OPENAI_POSTS: Final = (
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/responses",
    "/v1/embeddings",
)
ANTHROPIC_POSTS: Final = ("/v1/messages", "/v1/messages/count_tokens")


class Listing:
    """The answers of one gateway that call no upstream: its policy and the agent's key."""

    def __init__(self, policy: GatewayPolicy, token: str) -> None:
        self._policy = policy
        self._token = token

    def key_problem(self, request: web.Request) -> str | None:
        """Why the request's key is not this run's (None: it is)."""
        given = request.headers.get("x-api-key", "")
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            given = given or auth[7:].strip()
        if not given:
            return (
                "no API key was sent: send this run's model gateway key, which the agent "
                "has in OPENAI_API_KEY and ANTHROPIC_API_KEY"
            )
        if not hmac.compare_digest(given.encode(), self._token.encode()):
            return (
                "this is not the run's model gateway key (the agent has it in "
                "OPENAI_API_KEY and ANTHROPIC_API_KEY)"
            )
        return None

    @staticmethod
    def _neutral(status: int, message: str, code: str) -> web.Response:
        return web.Response(
            status=status,
            body=neutral_error_body(status, message, code),
            content_type="application/json",
            headers=NO_RETRY,
        )

    async def websocket(self, request: web.Request) -> web.Response:
        """The Responses API over a WebSocket (Codex tries it first): not served. 426 is
        the answer on which Codex falls back to HTTP at once (404 costs it seven tries,
        7-9 s: docs/agent-software-notes.md)."""
        return self._neutral(
            426,
            "the ALE model gateway serves the Responses API over HTTP only (POST "
            "/v1/responses, streamed with server-sent events), not over a WebSocket",
            "websocket_not_served",
        )

    async def not_found(self, request: web.Request) -> web.Response:
        return self._neutral(
            404,
            f"{request.method} {request.path} is not served by the ALE model gateway (it serves "
            f"POST {', '.join((*OPENAI_POSTS, *ANTHROPIC_POSTS))} and GET /v1/models)",
            "not_found",
        )

    async def models(self, request: web.Request) -> web.Response:
        problem = self.key_problem(request)
        if problem is not None:
            return self._neutral(401, problem, "invalid_api_key")
        docs = [self._model_doc(m) for m in self._policy.models]
        return web.json_response(
            {  # OpenAI's list and Anthropic's page at once: each SDK reads its own fields
                "object": "list",
                "data": docs,
                "has_more": False,
                "first_id": self._policy.models[0],
                "last_id": self._policy.models[-1],
            }
        )

    async def model(self, request: web.Request) -> web.Response:
        problem = self.key_problem(request)
        if problem is not None:
            return self._neutral(401, problem, "invalid_api_key")
        name = request.match_info["model"]
        if not self._policy.allows(name):
            return self._neutral(404, self._policy.refusal(name), "model_not_found")
        return web.json_response(self._model_doc(name))

    @staticmethod
    def _model_doc(name: str) -> dict[str, Any]:
        return {
            "id": name,
            "object": "model",
            "created": 0,
            "owned_by": "ale-robotics",
            "type": "model",
            "display_name": name,
            "created_at": "1970-01-01T00:00:00Z",
        }
