"""Golden vectors: the exact bytes, hashes and signatures of format v1.

``golden/vectors_v1.json`` was generated once with a fixed, test-only Ed25519
key; ``golden/trajectory_v1.jsonl`` is the same events as a file. If a change
to the code breaks these tests, it changed the format: every trajectory
written before would stop verifying. Do not regenerate them to make a test
pass; bump the schema version instead.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ale_robotics.trajectory import (
    GENESIS_HASH,
    EvaluatorSigner,
    build_event,
    canonical_json,
    secret_commitment,
    seed_commitment,
    verify_file,
)

GOLDEN = Path(__file__).parent / "golden"
VECTORS: dict[str, Any] = json.loads((GOLDEN / "vectors_v1.json").read_text(encoding="utf-8"))
EVENTS: list[dict[str, Any]] = VECTORS["events"]


@pytest.fixture(scope="module")
def golden_signer() -> EvaluatorSigner:
    return EvaluatorSigner.from_private_bytes(bytes.fromhex(VECTORS["private_key_hex"]))


def test_the_key(golden_signer: EvaluatorSigner) -> None:
    assert golden_signer.public_key_hex == VECTORS["public_key_hex"]
    assert golden_signer.key_id == VECTORS["key_id"]


def test_commitments() -> None:
    commitment = EVENTS[2]["input"]["payload"]
    secret = bytes.fromhex(VECTORS["secret_hex"])
    assert commitment["secret_sha256"] == secret_commitment(secret)
    assert commitment["seed_commitments"] == [
        seed_commitment(bytes.fromhex(d)) for d in VECTORS["seed_digests_hex"]
    ]


@pytest.mark.parametrize("index", range(len(EVENTS)))
def test_event_bytes_hash_and_signature(index: int, golden_signer: EvaluatorSigner) -> None:
    vector = EVENTS[index]
    inp = vector["input"]
    prev = GENESIS_HASH if index == 0 else EVENTS[index - 1]["hash"]
    sig = None
    if inp["eval_seq"] is not None:
        signed = golden_signer.sign_event(
            VECTORS["run_id"], inp["kind"], inp["payload"], inp["eval_seq"], inp["time"]
        )
        assert signed.message() == vector["signed_message"].encode("utf-8")
        assert signed.sig.value == vector["signature"]  # Ed25519 is deterministic
        sig = signed.sig
    else:
        assert vector["signature"] is None
    event = build_event(
        seq=index,
        prev_hash=prev,
        run_id=VECTORS["run_id"],
        level=inp["level"],
        kind=inp["kind"],
        payload=inp["payload"],
        time=inp["time"],
        sig=sig,
    )
    without_hash = {k: v for k, v in event.as_dict().items() if k != "hash"}
    assert canonical_json(without_hash) == vector["hash_input"].encode("utf-8")
    assert event.hash == vector["hash"]
    assert event.to_line() == vector["line"].encode("utf-8") + b"\n"


@pytest.mark.parametrize("index", range(len(EVENTS)))
def test_vectors_are_self_consistent_without_the_library(index: int) -> None:
    """Checks the vectors with hashlib and cryptography alone, as another verifier would."""
    vector = EVENTS[index]
    assert hashlib.sha256(vector["hash_input"].encode("utf-8")).hexdigest() == vector["hash"]
    if vector["signature"] is not None:
        key = Ed25519PublicKey.from_public_bytes(bytes.fromhex(VECTORS["public_key_hex"]))
        key.verify(base64.b64decode(vector["signature"]), vector["signed_message"].encode("utf-8"))


def test_golden_file_is_the_lines_and_verifies() -> None:
    path = GOLDEN / "trajectory_v1.jsonl"
    expected = b"".join(v["line"].encode("utf-8") + b"\n" for v in EVENTS)
    assert path.read_bytes() == expected
    report = verify_file(path, VECTORS["public_key_hex"], expected_head=EVENTS[-1]["hash"])
    assert report.ok, report.reason
    assert report.events == len(EVENTS)
