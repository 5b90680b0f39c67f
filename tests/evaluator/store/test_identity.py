"""Whose store this is (issue 31): the first evaluator's fingerprints, on every engine.

The first store to bind an identity records it; the same secret and key bind again
wherever their state dir is mounted; another's get the recorded one back (the evaluator
then refuses to start, :func:`check_identity`); of stores binding a fresh store at once,
one wins and all read it. A store made by the release before (schema 1) gets the table
on its next opening. The fingerprints are of public values only.
"""

from __future__ import annotations

import hashlib
import threading

import pytest
from stores import Backend

from ale_robotics.evaluator.store import StoreIdentity, StoreOwnedElsewhere
from ale_robotics.evaluator.store.identity import check_identity, fingerprint
from ale_robotics.seeds import new_secret
from ale_robotics.trajectory import EvaluatorSigner, secret_commitment


def _identity(state_dir: str, secret: bytes | None = None) -> StoreIdentity:
    commitment = secret_commitment(secret or new_secret())
    return StoreIdentity.of(commitment, EvaluatorSigner.generate().public_key_hex, state_dir)


def test_the_first_identity_is_kept_and_another_gets_it_back(backend: Backend) -> None:
    first, other = _identity("/srv/a"), _identity("/srv/b")
    assert backend.open().bind_identity(first) == first
    moved = StoreIdentity(first.secret_fingerprint, first.key_fingerprint, "/mnt/a", "host-2")
    assert backend.open().bind_identity(moved) == first  # same owner, mounted elsewhere
    check_identity("db", first, moved)
    recorded = backend.open().bind_identity(other)
    assert recorded == first
    with pytest.raises(StoreOwnedElsewhere) as refused:
        check_identity("db", recorded, other)
    message = str(refused.value)
    for value in (first, other):  # both state dirs, both fingerprints, in one line
        assert value.state_dir in message
        assert value.secret_fingerprint in message and value.key_fingerprint in message
    assert "\n" not in message and "same state dir" in message


def test_a_key_alone_that_differs_is_another_owner(backend: Backend) -> None:
    secret = new_secret()
    first = _identity("/srv/a", secret)
    rekeyed = _identity("/srv/a", secret)
    assert first.secret_fingerprint == rekeyed.secret_fingerprint
    assert backend.open().bind_identity(first) == first
    with pytest.raises(StoreOwnedElsewhere, match=rekeyed.key_fingerprint):
        check_identity("db", backend.open().bind_identity(rekeyed), rekeyed)


def test_stores_binding_a_fresh_store_at_once_agree_on_one(backend: Backend) -> None:
    stores = [backend.open(owner=f"h:{i}:x") for i in range(6)]
    mine = [_identity(f"/srv/{i}") for i in range(6)]
    got: list[StoreIdentity] = [mine[0]] * 6
    barrier = threading.Barrier(6)

    def bind(i: int) -> None:
        barrier.wait()
        got[i] = stores[i].bind_identity(mine[i])

    threads = [threading.Thread(target=bind, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 1 and got[0] in mine
    assert backend.sql("SELECT COUNT(*) FROM store_identity") == [(1,)]


def test_a_schema_1_store_gets_the_table_on_its_next_opening(backend: Backend) -> None:
    backend.open().close()
    backend.sql("DROP TABLE store_identity")
    backend.sql("DELETE FROM schema_version WHERE version = 2")
    store = backend.open()
    assert store.schema_version() == type(store).SCHEMA_VERSION
    first = _identity("/srv/a")
    assert store.bind_identity(first) == first


def test_the_fingerprints_are_of_public_values_only() -> None:
    """The secret's is derived from its public commitment (no new function of the
    secret), domain-separated from it, and short."""
    secret = new_secret()
    commitment = secret_commitment(secret)
    ident = StoreIdentity.of(commitment, "00" * 32, "/srv/a")
    assert ident.secret_fingerprint == fingerprint("secret", commitment)
    assert len(ident.secret_fingerprint) == 16
    assert ident.secret_fingerprint not in commitment  # not a piece of the commitment
    assert ident.secret_fingerprint not in hashlib.sha256(secret).hexdigest()
    assert secret.hex() not in repr(ident) and commitment not in repr(ident)
    assert fingerprint("secret", "x") != fingerprint("key", "x")  # kinds never collide
