"""Commitments to the hidden seeds, published in the evaluator's ``seed_commitment`` event.

For run ``R`` and the task's i-th base seed ``s_i``, the evaluator's episode
seed is drawn from the digest ``SHA256(s_i || R || secret)`` (docs/architecture.md#hidden-seeds).
The trajectory must let anyone check the seeds once a release reveals the
secret, without revealing them before. So the evaluator's second event
(``eval_seq`` 1, kind ``seed_commitment``) carries::

    {"secret_sha256": secret_commitment(secret),
     "seed_commitments": [seed_commitment(digest_0), seed_commitment(digest_1), ...]}

and never a raw seed or digest. An auditor with the secret recomputes each
digest, checks ``SHA256(digest)`` against its commitment and ``SHA256(secret)``
against ``secret_sha256``, then re-runs the episodes. Both commitments are
plain SHA-256 hex, so the check needs nothing from this package.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

import pydantic
from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator

from ale_robotics.trajectory.errors import InvalidEventError
from ale_robotics.trajectory.events import HEX64_PATTERN, describe_validation_error, sha256_hex

__all__ = [
    "COMMITMENT_EVENT_KIND",
    "CommitmentPayload",
    "commitment_payload",
    "secret_commitment",
    "seed_commitment",
]

COMMITMENT_EVENT_KIND: Final = "seed_commitment"
_MIN_SECRET_BYTES: Final = 16
_HEX64_RE: Final = re.compile(HEX64_PATTERN)


class CommitmentPayload(BaseModel):
    """What the verifier requires of a ``seed_commitment`` payload (other keys allowed)."""

    model_config = ConfigDict(extra="allow", strict=True)
    secret_sha256: str = Field(pattern=HEX64_PATTERN)
    seed_commitments: list[str] = Field(description="One SHA-256 hex per episode, in order.")

    @field_validator("seed_commitments")
    @classmethod
    def _hex_digests(cls, value: list[str]) -> list[str]:
        for i, item in enumerate(value):
            if not _HEX64_RE.match(item):
                raise ValueError(f"item {i} is not a 64-digit lowercase hex SHA-256")
        return value


def secret_commitment(secret: bytes) -> str:
    """``secret_sha256``: SHA-256 hex of the hidden-seed secret.

    Refuses secrets under 16 bytes: the commitment is public, so a short secret
    could be recovered from it by brute force before the release reveals it.
    """
    if len(secret) < _MIN_SECRET_BYTES:
        raise InvalidEventError(
            f"the hidden-seed secret has {len(secret)} bytes; use at least "
            f"{_MIN_SECRET_BYTES} random bytes (its hash is published)"
        )
    return sha256_hex(secret)


def seed_commitment(episode_seed_digest: bytes) -> str:
    """Commitment to one episode seed: SHA-256 hex of its 32-byte digest.

    Pass the digest ``SHA256(s_i || run_id || secret)``, not an integer drawn
    from it: a commitment to a 32-bit seed can be inverted by trying them all,
    which would reveal the hidden seeds before the release.
    """
    if len(episode_seed_digest) < _MIN_SECRET_BYTES:
        raise InvalidEventError(
            "commit to the full seed digest (32 bytes), not to a short seed: "
            f"{len(episode_seed_digest)} bytes can be brute-forced from the commitment"
        )
    return sha256_hex(episode_seed_digest)


def commitment_payload(
    *, secret_sha256: str, seed_commitments: Sequence[str]
) -> dict[str, JsonValue]:
    """The checked ``{"secret_sha256": ..., "seed_commitments": [...]}`` payload."""
    try:
        model = CommitmentPayload.model_validate(
            {"secret_sha256": secret_sha256, "seed_commitments": list(seed_commitments)}
        )
    except pydantic.ValidationError as exc:
        raise InvalidEventError(describe_validation_error(exc)) from exc
    return {"secret_sha256": model.secret_sha256, "seed_commitments": list(model.seed_commitments)}
