"""The gateway's policy and its account: allowed models, the token budget, usage per model.

:class:`GatewayPolicy` is what the operator asked for (``run --model``,
``--model-budget-tokens``, ``--model-allow-tool``); :class:`TokenLedger` counts what the
agent used against it (thread-safe: calls may run at once); :class:`ModelUsage` is the
account written into ``result.json`` (``model_usage``) and shown beside the score.

A budget is never overrun by calls made at once: each call forwarded first *reserves*
the most it can cost (its body's bytes, an upper bound of its input tokens, plus its
output cap, :class:`~.protocols.Prepared`), and a call is let through only while the
tokens used and reserved leave room for its reservation, or when no other call is in
flight (:meth:`TokenLedger.admit`; the others wait for a call to end). A call ended
replaces its reservation by what the upstream reported. So the tokens used end at most
one call's reservation past the budget (the call let through alone), and once the
budget is used every call is refused (429).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ale_robotics.errors import InvalidArgumentError

__all__ = ["Admission", "GatewayPolicy", "ModelTokens", "ModelUsage", "TokenLedger"]

Admission = Literal["go", "wait", "spent"]
"""What :meth:`TokenLedger.admit` says of a call: forward it (its reservation is taken),
wait for a call in flight to end, or refuse it (the budget is used)."""


@dataclass(frozen=True)
class GatewayPolicy:
    """What the agent may ask its model: these models, this many tokens (None: unmetered)."""

    models: tuple[str, ...]
    budget_tokens: int | None = None
    allowed_tools: tuple[str, ...] = ()
    """Provider-side tools the operator allows (:mod:`.tools`); none by default."""

    def __post_init__(self) -> None:
        if not self.models:
            raise InvalidArgumentError(
                "the model gateway needs at least one allowed model: pass --model NAME "
                "(repeat it to allow several; the first is the agent's ALE_MODEL)"
            )
        for name in self.models:
            if not name or name.strip() != name:
                raise InvalidArgumentError(f"--model {name!r}: a model name, without spaces")
        if self.budget_tokens is not None and self.budget_tokens <= 0:
            raise InvalidArgumentError(
                f"--model-budget-tokens {self.budget_tokens}: a positive number of tokens"
            )

        for tool in self.allowed_tools:
            if not tool or tool.strip() != tool:
                raise InvalidArgumentError(
                    f"--model-allow-tool {tool!r}: a tool's name (docs/model-gateway.md lists "
                    "them), without spaces"
                )

    @classmethod
    def of(
        cls, models: Sequence[str], budget_tokens: int | None, allowed_tools: Sequence[str] = ()
    ) -> GatewayPolicy:
        return cls(tuple(dict.fromkeys(models)), budget_tokens, tuple(dict.fromkeys(allowed_tools)))

    def allows(self, model: str | None) -> bool:
        return model is not None and model in self.models

    def refusal(self, model: str | None) -> str:
        """The 403 message for a request naming ``model``."""
        allowed = ", ".join(self.models)
        if model is None:
            return f"the request names no model; this run's model allow-list: {allowed}"
        return f"model {model!r} is not allowed in this run; allowed: {allowed}"

    def budget_message(self, used: int) -> str:
        """The 429 message once the budget is used."""
        return (
            f"model token budget of {self.budget_tokens} used ({used} tokens so far); "
            "no more model calls in this run"
        )


class ModelTokens(BaseModel):
    """Calls and tokens of one model."""

    model_config = ConfigDict(extra="forbid")

    calls: int = Field(default=0, description="Calls forwarded to the upstream.")
    tokens_in: int = Field(default=0, description="Input (prompt) tokens.")
    tokens_out: int = Field(default=0, description="Output (completion) tokens.")


class ModelUsage(BaseModel):
    """What the agent asked its model in a run (``result.json``'s ``model_usage``)."""

    model_config = ConfigDict(extra="forbid")

    calls: int = Field(default=0, description="Calls forwarded to the upstream.")
    refused_calls: int = Field(
        default=0, description="Calls the gateway refused (model, budget, key, malformed)."
    )
    tokens_in: int = Field(default=0, description="Input tokens, all models.")
    tokens_out: int = Field(default=0, description="Output tokens, all models.")
    budget_tokens: int | None = Field(
        default=None, description="The run's model token budget (input + output); None: none."
    )
    budget_exhausted: bool = Field(
        default=False, description="True once a call was refused because the budget was used."
    )
    estimated_calls: int = Field(
        default=0,
        description="Calls whose upstream reported no usage the gateway could read: counted "
        "at a token per 4 bytes of request and response, at least one each.",
    )
    models_allowed: list[str] = Field(default_factory=list, description="The allow-list.")
    tools_allowed: list[str] = Field(
        default_factory=list,
        description="Provider-side tools the operator allowed (--model-allow-tool); "
        "every other one was refused.",
    )
    refusals: dict[str, int] = Field(
        default_factory=dict,
        description="Refused calls by reason (auth, model, budget, tool, busy, quota, ...).",
    )
    per_model: dict[str, ModelTokens] = Field(
        default_factory=dict, description="Calls and tokens per model."
    )
    transcript: str = Field(
        default="model_calls.jsonl", description="The file with every call's bodies."
    )

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    def summary(self) -> str:
        """One line for the score line and the report: calls, tokens, budget."""
        budget = "" if self.budget_tokens is None else f" of {self.budget_tokens:,}"
        refused = f", {self.refused_calls} refused" if self.refused_calls else ""
        spent = " (budget used)" if self.budget_exhausted else ""
        return (
            f"model: {self.calls} call{'s' if self.calls != 1 else ''}{refused}, "
            f"{self.tokens:,} tokens{budget}{spent}"
        )


@dataclass
class TokenLedger:
    """The running account of one gateway (thread-safe), with the reservations of the
    calls in flight (module docstring)."""

    policy: GatewayPolicy
    _usage: ModelUsage = field(init=False)
    _reserved: int = field(default=0, init=False)
    _in_flight: int = field(default=0, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        self._usage = ModelUsage(
            budget_tokens=self.policy.budget_tokens,
            models_allowed=list(self.policy.models),
            tools_allowed=list(self.policy.allowed_tools),
        )

    def used(self) -> int:
        with self._lock:
            return self._usage.tokens

    def reserved(self) -> int:
        """Tokens reserved by the calls in flight."""
        with self._lock:
            return self._reserved

    def exhausted(self) -> bool:
        """Whether the budget is used (then no call may be forwarded)."""
        budget = self.policy.budget_tokens
        return budget is not None and self.used() >= budget

    def admit(self, reservation: int) -> Admission:
        """May a call that can cost up to ``reservation`` tokens be forwarded now?

        ``go`` (its reservation is taken: :meth:`settle` gives it back), ``wait`` (calls
        in flight hold the room it needs; ask again when one ends) or ``spent``.
        """
        budget = self.policy.budget_tokens
        with self._lock:
            used = self._usage.tokens
            if budget is not None and used >= budget:
                return "spent"
            alone = self._in_flight == 0
            if budget is not None and not alone and used + self._reserved + reservation > budget:
                return "wait"
            self._reserved += reservation
            self._in_flight += 1
            return "go"

    def settle(
        self,
        reservation: int,
        model: str | None,
        tokens_in: int,
        tokens_out: int,
        *,
        estimated: bool,
        counted: bool = True,
    ) -> None:
        """A call let through by :meth:`admit` ended: its reservation is given back and,
        when it reached the upstream (``counted``), its tokens are added."""
        with self._lock:
            self._reserved -= reservation
            self._in_flight -= 1
            if counted:
                self._add(model or "?", tokens_in, tokens_out, estimated=estimated)

    def refuse(self, reason: str, *, budget: bool = False) -> None:
        with self._lock:
            self._usage.refused_calls += 1
            self._usage.refusals[reason] = self._usage.refusals.get(reason, 0) + 1
            if budget:
                self._usage.budget_exhausted = True

    def _add(self, model: str, tokens_in: int, tokens_out: int, *, estimated: bool) -> None:
        u = self._usage
        u.calls += 1
        u.tokens_in += tokens_in
        u.tokens_out += tokens_out
        if estimated:
            u.estimated_calls += 1
        m = u.per_model.setdefault(model, ModelTokens())
        m.calls += 1
        m.tokens_in += tokens_in
        m.tokens_out += tokens_out

    def snapshot(self) -> ModelUsage:
        with self._lock:
            return self._usage.model_copy(deep=True)
