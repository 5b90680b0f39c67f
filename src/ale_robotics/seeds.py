"""Hidden per-episode seeds, derived as SHA256(base_seed || run_id || secret).

Encoding (fixed; an audit recomputes it once the secret is revealed):
``base_seed`` as 8 bytes big-endian two's complement, then ``run_id`` as UTF-8,
then the raw secret bytes. The episode seed is the first 8 bytes of the digest,
big-endian, masked to 63 bits (numpy seeding wants a non-negative integer).

The commitment published in the trajectory for episode i is SHA256(digest_i)
and the secret's is SHA256(secret) (both defined in
:mod:`ale_robotics.trajectory.commitments`): they bind the evaluator to the
seeds without revealing them.
"""

from __future__ import annotations

import hashlib
import secrets as _secrets
from collections.abc import Sequence
from dataclasses import dataclass

from ale_robotics.trajectory.commitments import secret_commitment, seed_commitment

__all__ = [
    "SECRET_BYTES",
    "HiddenSeed",
    "derive_seeds",
    "new_secret",
    "secret_commitment",
]

SECRET_BYTES = 32


@dataclass(frozen=True)
class HiddenSeed:
    """A derived seed; ``value`` never leaves the evaluator, ``commitment`` may."""

    index: int
    value: int
    commitment: str

    def __repr__(self) -> str:  # keep raw seeds out of logs and tracebacks
        return f"HiddenSeed(index={self.index}, commitment={self.commitment[:12]}...)"


def new_secret() -> bytes:
    return _secrets.token_bytes(SECRET_BYTES)


def _digest(base_seed: int, run_id: str, secret: bytes) -> bytes:
    h = hashlib.sha256()
    h.update(base_seed.to_bytes(8, "big", signed=True))
    h.update(run_id.encode("utf-8"))
    h.update(secret)
    return h.digest()


def derive_seeds(base_seeds: Sequence[int], run_id: str, secret: bytes) -> list[HiddenSeed]:
    if len(secret) < 16:
        raise ValueError("the evaluator secret must be at least 16 bytes")
    out = []
    for i, s in enumerate(base_seeds):
        d = _digest(s, run_id, secret)
        value = int.from_bytes(d[:8], "big") & ((1 << 63) - 1)
        commitment = seed_commitment(d)
        out.append(HiddenSeed(index=i, value=value, commitment=commitment))
    return out
