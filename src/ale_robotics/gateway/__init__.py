"""The model gateway: how an AI agent in its offline sandbox reaches its model, metered.

One gateway per run, run by the harness (trusted side). The agent sees the variables the
official SDKs read (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``ANTHROPIC_BASE_URL``,
``ANTHROPIC_API_KEY``, ``CODEX_API_KEY``) and ``ALE_MODEL``; the key is the run's own and
dies with it, the operator's upstream key never enters the sandbox. The gateway enforces
the model allow-list, the token budget and the offline rule (no provider-side tools), and
records every call as evidence.

* :mod:`.usage`     the policy (allowed models, token budget, tools) and the run's account,
                    with the reservations that keep calls made at once within the budget
* :mod:`.protocols` what is read from and written in the OpenAI and Anthropic protocols
* :mod:`.tools`     the provider-side tools a request asks for (refused unless allowed)
* :mod:`.recorder`  ``model_calls.jsonl`` and the ``model_call`` trajectory events
* :mod:`.server`    the HTTP gateway on a Unix socket (aiohttp): whether a call goes
* :mod:`.upstream`  what goes to the upstream and what comes back (allow-lists, redirects)
* :mod:`.encoding`  answers the upstream compressed anyway, decoded
* :mod:`.listing`   what is answered without the upstream (models, unknown paths, the key)
* :mod:`.call`      what one request turned into, as the server fills it in for the recorder
* :mod:`.relay`     the sandbox's loopback port relayed to that socket (standard library)

The transcript's format and its check against the trajectory are in
:mod:`ale_robotics.trajectory.transcript`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ale_robotics.gateway.usage import GatewayPolicy, ModelTokens, ModelUsage, TokenLedger
from ale_robotics.lazy import lazy_exports

if TYPE_CHECKING:
    from ale_robotics.gateway.server import ModelGateway, upstream_base

__all__ = [
    "GatewayPolicy",
    "ModelGateway",
    "ModelTokens",
    "ModelUsage",
    "TokenLedger",
    "upstream_base",
]

# The server imports aiohttp: loaded when a run starts a gateway, not when a report is read.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ModelGateway": "ale_robotics.gateway.server",
        "upstream_base": "ale_robotics.gateway.server",
    },
)
