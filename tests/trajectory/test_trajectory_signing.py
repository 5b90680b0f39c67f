"""The evaluator key, what a signature covers, public-key loading, commitments."""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from trajectory_helpers import RUN_ID

from ale_robotics.trajectory import (
    EvaluatorSigner,
    InvalidEventError,
    KeyFileError,
    SignatureError,
    SignedEvaluatorEvent,
    commitment_payload,
    key_id_for,
    load_public_key,
    secret_commitment,
    seed_commitment,
    signed_message,
)
from ale_robotics.trajectory.signing import SIGNED_MESSAGE_PREFIX

# --- the key file -------------------------------------------------------------------


def test_load_or_create_makes_a_private_key_file(tmp_path: Path) -> None:
    path = tmp_path / "state" / "keys" / "evaluator.pem"
    signer = EvaluatorSigner.load_or_create(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert [p.name for p in path.parent.iterdir()] == ["evaluator.pem"]  # no temp file left
    again = EvaluatorSigner.load_or_create(path)
    assert again.public_key_hex == signer.public_key_hex
    assert len(signer.public_key_hex) == 64


def test_concurrent_creation_yields_one_key(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "evaluator.pem"
    keys: list[str] = []
    barrier = threading.Barrier(4)

    def create() -> None:
        barrier.wait()
        keys.append(EvaluatorSigner.load_or_create(path).public_key_hex)

    threads = [threading.Thread(target=create) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(keys) == 4 and len(set(keys)) == 1


def test_key_readable_by_others_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "evaluator.pem"
    EvaluatorSigner.load_or_create(path)
    path.chmod(0o644)
    with pytest.raises(KeyFileError, match="chmod 600"):
        EvaluatorSigner.load_or_create(path)


def test_non_ed25519_or_garbage_key_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "evaluator.pem"
    ec_pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    path.write_bytes(ec_pem)
    path.chmod(0o600)
    with pytest.raises(KeyFileError, match="not an Ed25519 key"):
        EvaluatorSigner.load_or_create(path)
    path.write_bytes(b"garbage")
    with pytest.raises(KeyFileError, match="not a readable PEM"):
        EvaluatorSigner.load_or_create(path)


def test_key_id_is_a_prefix_of_the_key_hash(signer: EvaluatorSigner) -> None:
    expected = hashlib.sha256(bytes.fromhex(signer.public_key_hex)).hexdigest()[:16]
    assert signer.key_id == key_id_for(signer.public_key_hex) == expected
    assert signer.key_event_payload() == {
        "alg": "ed25519",
        "public_key": signer.public_key_hex,
        "key_id": expected,
    }


# --- what a signature covers ----------------------------------------------------------


def _signed(signer: EvaluatorSigner) -> SignedEvaluatorEvent:
    return signer.sign_event(
        RUN_ID,
        "result",
        {"mean_return": 0.1, "n": 3},
        eval_seq=4,
        time="2025-01-02T03:04:05.000000Z",
    )


def test_signature_round_trip(signer: EvaluatorSigner) -> None:
    event = _signed(signer)
    assert event.level == "trusted_evaluator" and event.eval_seq == 4
    event.verify(signer.public_key_hex)
    assert event.message() == SIGNED_MESSAGE_PREFIX + (
        b'{"eval_seq":4,"kind":"result","level":"trusted_evaluator",'
        b'"payload":{"mean_return":0.1,"n":3},"run_id":"run-test-0001",'
        b'"time":"2025-01-02T03:04:05.000000Z","v":1}'
    )
    assert event.message() == signed_message(
        run_id=RUN_ID, kind="result", time=event.time, payload=event.payload, eval_seq=4
    )


@pytest.mark.parametrize(
    "update",
    [
        {"run_id": "run-other"},
        {"kind": "progress"},
        {"time": "2025-01-02T03:04:05.000001Z"},
        {"payload": {"mean_return": 0.2, "n": 3}},
        {"payload": {"mean_return": 0.1, "n": 3.0}},  # 3 and 3.0 are different JSON
    ],
)
def test_every_signed_field_is_covered(signer: EvaluatorSigner, update: dict[str, Any]) -> None:
    event = _signed(signer).model_copy(update=update)
    with pytest.raises(SignatureError, match="bad signature"):
        event.verify(signer.public_key_hex)


def test_eval_seq_is_covered(signer: EvaluatorSigner) -> None:
    event = _signed(signer)
    moved = event.model_copy(update={"sig": event.sig.model_copy(update={"eval_seq": 5})})
    with pytest.raises(SignatureError, match="bad signature"):
        moved.verify(signer.public_key_hex)


def test_other_key_is_unknown(signer: EvaluatorSigner, other_signer: EvaluatorSigner) -> None:
    with pytest.raises(SignatureError, match="unknown key"):
        _signed(signer).verify(other_signer.public_key_hex)


def test_signatures_are_deterministic(signer: EvaluatorSigner) -> None:
    assert _signed(signer).sig.value == _signed(signer).sig.value


@pytest.mark.parametrize("via", ["pydantic", "stdlib"])
def test_signed_event_survives_json_transport(signer: EvaluatorSigner, via: str) -> None:
    """The evaluator ships events as JSON inside its result; numbers must come back identical."""
    payload = {
        "floats": [0.1, 1e-07, 1e16, -0.0, 5e-324, 1.7976931348623157e308, 1.0],
        "ints": [0, -1, 2**63, 10**30],
        "text": "日本 😀 \u2028 \n",
    }
    event = signer.sign_event(RUN_ID, "result", payload, eval_seq=2)
    if via == "pydantic":
        back = SignedEvaluatorEvent.model_validate_json(event.model_dump_json())
    else:
        back = SignedEvaluatorEvent.model_validate(
            json.loads(json.dumps(event.model_dump(mode="json")))
        )
    assert back == event
    back.verify(signer.public_key_hex)


def test_signing_refuses_nan(signer: EvaluatorSigner) -> None:
    with pytest.raises(InvalidEventError, match=r"payload.metrics.x is nan"):
        signer.sign_event(RUN_ID, "result", {"metrics": {"x": math.nan}}, eval_seq=0)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"eval_seq": -1}, "eval_seq"),
        ({"eval_seq": True}, "eval_seq"),
        ({"kind": "Bad Kind"}, "kind"),
        ({"run_id": ""}, "run_id"),
        ({"time": "yesterday"}, "time"),
    ],
)
def test_signing_refuses_malformed_events(
    signer: EvaluatorSigner, kwargs: dict[str, Any], needle: str
) -> None:
    args: dict[str, Any] = {"run_id": RUN_ID, "kind": "result", "payload": {}, "eval_seq": 0}
    with pytest.raises(InvalidEventError, match=needle):
        signer.sign_event(**(args | kwargs))


def test_run_event_signer_numbers_events(signer: EvaluatorSigner) -> None:
    run = signer.for_run(RUN_ID)
    key = run.key_event()
    commit = run.commitment_event(secret=b"k" * 32, seed_commitments=["ab" * 32])
    third = run.sign("submit_received", {})
    assert [key.eval_seq, commit.eval_seq, third.eval_seq] == [0, 1, 2]
    assert key.kind == "evaluator_key" and key.payload == signer.key_event_payload()
    assert commit.payload["secret_sha256"] == hashlib.sha256(b"k" * 32).hexdigest()
    with pytest.raises(InvalidEventError, match="eval_seq 0"):
        run.key_event()
    with pytest.raises(InvalidEventError, match="eval_seq 1"):
        run.commitment_event(secret=b"k" * 32, seed_commitments=[])
    resumed = signer.for_run(RUN_ID, next_eval_seq=3)
    assert resumed.sign("progress", {}).eval_seq == 3


# --- public keys given to the verifier ------------------------------------------------


def test_load_public_key_forms(tmp_path: Path, signer: EvaluatorSigner) -> None:
    hex_key = signer.public_key_hex
    assert load_public_key(hex_key) == hex_key
    assert load_public_key(hex_key.upper()) == hex_key
    hex_file = tmp_path / "key.hex"
    hex_file.write_text(hex_key + "\n")
    assert load_public_key(str(hex_file)) == hex_key
    pem_file = tmp_path / "key.pub.pem"
    pem_file.write_bytes(signer.public_key_pem())
    assert load_public_key(str(pem_file)) == hex_key
    private_file = tmp_path / "evaluator.pem"
    created = EvaluatorSigner.load_or_create(private_file)
    assert load_public_key(str(private_file)) == created.public_key_hex


def test_load_public_key_refusals(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match="neither 64 hex digits nor an existing file"):
        load_public_key("abc")
    junk = tmp_path / "junk"
    junk.write_text("hello")
    with pytest.raises(KeyFileError, match="neither 64 hex digits nor a PEM"):
        load_public_key(str(junk))
    ec_pub = tmp_path / "ec.pem"
    ec_pub.write_bytes(
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    with pytest.raises(KeyFileError, match="not an Ed25519 key"):
        load_public_key(str(ec_pub))
    bad_pem = tmp_path / "bad.pem"
    bad_pem.write_text("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
    with pytest.raises(KeyFileError, match="not a readable PEM"):
        load_public_key(str(bad_pem))


def test_ed25519_private_pem_file_from_elsewhere(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    path = tmp_path / "k.pem"
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    os.chmod(path, 0o600)
    assert (
        EvaluatorSigner.load_or_create(path).public_key_hex == EvaluatorSigner(key).public_key_hex
    )


# --- commitments --------------------------------------------------------------------


def test_commitments() -> None:
    secret = bytes(range(32))
    assert secret_commitment(secret) == hashlib.sha256(secret).hexdigest()
    digest = hashlib.sha256(b"seed").digest()
    assert seed_commitment(digest) == hashlib.sha256(digest).hexdigest()
    with pytest.raises(InvalidEventError, match="at least 16"):
        secret_commitment(b"short")
    with pytest.raises(InvalidEventError, match="brute-forced"):
        seed_commitment((12345).to_bytes(4, "big"))


def test_commitment_payload_checks_digests() -> None:
    good = commitment_payload(secret_sha256="a" * 64, seed_commitments=("b" * 64, "c" * 64))
    assert good == {"secret_sha256": "a" * 64, "seed_commitments": ["b" * 64, "c" * 64]}
    with pytest.raises(InvalidEventError, match="seed_commitments"):
        commitment_payload(secret_sha256="a" * 64, seed_commitments=["12345"])
    with pytest.raises(InvalidEventError, match="secret_sha256"):
        commitment_payload(secret_sha256="A" * 64, seed_commitments=[])
