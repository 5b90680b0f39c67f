"""The gateway's policy and its account: allowed models, the token budget, usage per model.

:class:`GatewayPolicy` is what the operator asked for (``run --model``,
``--model-budget-tokens``); :class:`TokenLedger` counts what the agent used against it
(thread-safe: calls may run at once); :class:`ModelUsage` is the account written into
``result.json`` (``model_usage``) and shown beside the score.

A budget is checked before a call is forwarded: once the tokens used reach it, every call
is refused (429). A call forwarded under the budget may end past it (its output is not
known in advance, and calls can run at once); the account records what was used, and a
call can only be forwarded while the budget is not yet used up.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from ale_robotics.errors import InvalidArgumentError

__all__ = ["GatewayPolicy", "ModelTokens", "ModelUsage", "TokenLedger"]


@dataclass(frozen=True)
class GatewayPolicy:
    """What the agent may ask its model: these models, this many tokens (None: unmetered)."""

    models: tuple[str, ...]
    budget_tokens: int | None = None

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

    @classmethod
    def of(cls, models: Sequence[str], budget_tokens: int | None) -> GatewayPolicy:
        return cls(tuple(dict.fromkeys(models)), budget_tokens)

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
        description="Calls whose upstream reported no usage: counted at a token per 4 bytes.",
    )
    models_allowed: list[str] = Field(default_factory=list, description="The allow-list.")
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
    """The running account of one gateway (thread-safe)."""

    policy: GatewayPolicy
    _usage: ModelUsage = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        self._usage = ModelUsage(
            budget_tokens=self.policy.budget_tokens, models_allowed=list(self.policy.models)
        )

    def used(self) -> int:
        with self._lock:
            return self._usage.tokens

    def exhausted(self) -> bool:
        """Whether the budget is used (then no call may be forwarded)."""
        budget = self.policy.budget_tokens
        return budget is not None and self.used() >= budget

    def refuse(self, *, budget: bool = False) -> None:
        with self._lock:
            self._usage.refused_calls += 1
            if budget:
                self._usage.budget_exhausted = True

    def add(self, model: str, tokens_in: int, tokens_out: int, *, estimated: bool) -> None:
        with self._lock:
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
