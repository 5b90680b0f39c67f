"""Whose store this is: the fingerprints of the state dir that first opened it.

Replicas on one store must share one state dir (a shared volume): a job's snapshot is
written under ``STATE_DIR/snapshots/`` by the replica that queued it and read by the one
that claims it, and every replica must derive the same hidden seeds (the secret) and
sign with the same key. A replica started with another ``--state-dir`` used to join the
store silently, claim jobs and fail them all ("cannot read the snapshot"). So the first
evaluator to open a store records a :class:`StoreIdentity` in it
(:meth:`.ports.JobStore.bind_identity`), and one whose fingerprints differ refuses to
start (:class:`StoreOwnedElsewhere`, :func:`check_identity`) before it claims anything.

Why the fingerprints are safe to store (and to print):

* the **secret's** is ``SHA-256("ale-robotics store identity v1: secret\\0" ||
  secret_sha256)`` cut to 16 hex digits, where ``secret_sha256`` is the public commitment
  every result already carries (:func:`ale_robotics.trajectory.secret_commitment`). It is
  a function of public data only: whoever can read it could compute it from any result,
  so it tells nothing about the secret that was not public, and testing a guess of the
  secret against it costs two SHA-256 where the commitment costs one (the secret is 32
  random bytes: no guess succeeds either way). The prefix keeps it from being mistaken
  for, or compared with, the commitment itself;
* the **key's** is the same over the raw Ed25519 public key, which is public (every
  run's ``evaluator_key`` event);
* 64 bits tell two state dirs apart (two random secrets collide with probability 2^-64),
  and are short enough for the one line an operator reads.

The state dir's path and the host are recorded only to say where the owner is.
"""

from __future__ import annotations

import hashlib
import socket
from dataclasses import dataclass

from ale_robotics.errors import FailedPreconditionError
from ale_robotics.evaluator.store.dialect import Tx

__all__ = [
    "FINGERPRINT_HEX",
    "StoreIdentity",
    "StoreOwnedElsewhere",
    "bind_identity",
    "check_identity",
    "fingerprint",
]

FINGERPRINT_HEX = 16
"""Hex digits kept of each fingerprint's SHA-256 (64 bits)."""
_DOMAIN = b"ale-robotics store identity v1: "


def fingerprint(what: str, public_value: str) -> str:
    """The fingerprint of ``public_value`` (a secret's commitment, a public key's hex) for
    ``what`` ("secret", "key"): domain-separated SHA-256, cut to :data:`FINGERPRINT_HEX`."""
    digest = hashlib.sha256(_DOMAIN + what.encode() + b"\0" + public_value.encode())
    return digest.hexdigest()[:FINGERPRINT_HEX]


@dataclass(frozen=True)
class StoreIdentity:
    """An evaluator's identity as a store records it."""

    secret_fingerprint: str
    key_fingerprint: str
    state_dir: str = ""
    """Where the evaluator's state dir is (as that evaluator named it), for the message."""
    host: str = ""

    @classmethod
    def of(cls, secret_sha256: str, public_key_hex: str, state_dir: str) -> StoreIdentity:
        """This evaluator's: from the secret's public commitment and the signing public key."""
        return cls(
            fingerprint("secret", secret_sha256),
            fingerprint("key", public_key_hex),
            state_dir,
            socket.gethostname(),
        )

    def same_owner(self, other: StoreIdentity) -> bool:
        """Whether ``other`` has the same secret and key (paths and hosts may differ: one
        shared volume is mounted where each replica's host mounts it)."""
        return (self.secret_fingerprint, self.key_fingerprint) == (
            other.secret_fingerprint,
            other.key_fingerprint,
        )

    def describe(self) -> str:
        where = f"{self.state_dir or 'unknown'}" + (f" on {self.host}" if self.host else "")
        return f"{where} (secret fingerprint {self.secret_fingerprint}, key {self.key_fingerprint})"


class StoreOwnedElsewhere(FailedPreconditionError):
    """The store was first opened by an evaluator with another state dir (secret, key)."""

    def __init__(self, store: str, recorded: StoreIdentity, mine: StoreIdentity) -> None:
        super().__init__(
            f"job store {store} belongs to an evaluator whose state dir is "
            f"{recorded.describe()}; this one's is {mine.describe()}: start every replica "
            "with the same state dir (a shared volume), or use another store"
        )
        self.recorded = recorded
        self.mine = mine


def check_identity(store: str, recorded: StoreIdentity, mine: StoreIdentity) -> None:
    """Raise :class:`StoreOwnedElsewhere` unless ``recorded`` (what the store holds) is
    ``mine``'s secret and key. ``store`` names the store in the message (redacted URL)."""
    if not recorded.same_owner(mine):
        raise StoreOwnedElsewhere(store, recorded, mine)


_COLUMNS = "secret_fingerprint, key_fingerprint, state_dir, host"


def bind_identity(tx: Tx, mine: StoreIdentity) -> StoreIdentity:
    """Record ``mine`` unless the store has an identity; the one it has now (inside ``tx``).

    One row (``id = 1``): of evaluators opening a fresh store at once, the first insert
    wins and every one of them reads the winner.
    """
    tx.execute(
        f"INSERT INTO store_identity (id, {_COLUMNS}, recorded) VALUES (1, :secret, :key, "
        ":state_dir, :host, :now) ON CONFLICT (id) DO NOTHING",
        secret=mine.secret_fingerprint,
        key=mine.key_fingerprint,
        state_dir=mine.state_dir,
        host=mine.host,
    )
    row = tx.one(f"SELECT {_COLUMNS} FROM store_identity WHERE id = 1")
    assert row is not None  # inserted above, or there already
    return StoreIdentity(*(str(v) for v in row))
