"""Ed25519 signatures for trusted-evaluator events, and the run's seed commitments.

Why signatures: the trajectory file sits where the harness (and possibly the
agent) can write it, and a hash chain alone can be recomputed by whoever edits
it. Only the evaluator holds the private key, so only it can produce a
``trusted_evaluator`` event that verifies.

**What is signed.** The evaluator builds its events before the harness places
them in the file, so it cannot know ``seq`` or ``prev_hash``. The signature
covers the event's content and the evaluator's own per-run counter instead::

    b"ale-robotics.trajectory.v1.trusted_evaluator\\n" + canonical_json({
        "v": 1, "run_id": ..., "level": "trusted_evaluator", "kind": ...,
        "time": ..., "payload": {...}, "eval_seq": n})

(canonical JSON as in :mod:`.events`; the prefix keeps a signature made for
this purpose from being valid for any other). The verifier requires
``eval_seq`` to run 0, 1, 2, ... in file order, so deleting or reordering the
evaluator's events is detected even after the hash chain is recomputed; the
``run_id`` inside the signature stops replaying another run's events.

**The evaluator's first two events of a run** (kinds below; the verifier
enforces both positions):

* ``eval_seq`` 0, kind ``evaluator_key``: publishes the public key
  (:meth:`EvaluatorSigner.key_event_payload`), signed by that same key. The
  verifier takes the key from here unless it is given one (``--public-key``), in
  which case the two must match. Without a pinned key, verification proves that
  the evaluator events are consistent with each other, not who made them.
* ``eval_seq`` 1, kind ``seed_commitment``: commits to the hidden-seed secret
  and lists one commitment per episode, never raw seeds (see
  :mod:`ale_robotics.trajectory.commitments`).

An evaluator event must be shipped to the harness as JSON text (pydantic or
``json``), never through a lossy form such as ``google.protobuf.Struct``,
which turns every number into a double: ``3`` would come back as ``3.0``, a
different canonical encoding, and the signature would no longer verify.

A typical evaluator::

    signer = EvaluatorSigner.load_or_create(state_dir / "keys" / "evaluator_ed25519.pem")
    events = signer.for_run(run_id)
    out = [events.key_event(),
           events.commitment_event(secret=secret, seed_commitments=[...]),
           events.sign("submit_received", {"files": {...}}), ...]
    # ship [e.model_dump(mode="json") for e in out] inside the EvalResult
"""

from __future__ import annotations

import base64
import os
import re
import secrets
import stat
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Literal

import pydantic
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator

from ale_robotics.trajectory.commitments import (
    COMMITMENT_EVENT_KIND,
    commitment_payload,
    secret_commitment,
)
from ale_robotics.trajectory.errors import InvalidEventError, KeyFileError, SignatureError
from ale_robotics.trajectory.events import (
    HEX64_PATTERN,
    KIND_PATTERN,
    RUN_ID_PATTERN,
    SCHEMA_VERSION,
    TIME_PATTERN,
    Event,
    ExactInt,
    Signature,
    canonical_json,
    describe_validation_error,
    format_time,
    normalize_payload,
    sha256_hex,
)

__all__ = [
    "KEY_EVENT_KIND",
    "SIGNED_MESSAGE_PREFIX",
    "EvaluatorSigner",
    "KeyEventPayload",
    "RunEventSigner",
    "SignedEvaluatorEvent",
    "key_id_for",
    "load_public_key",
    "signed_message",
    "verify_event_signature",
]

SIGNED_MESSAGE_PREFIX: Final = b"ale-robotics.trajectory.v1.trusted_evaluator\n"
KEY_EVENT_KIND: Final = "evaluator_key"
_HEX64_RE: Final = re.compile(HEX64_PATTERN)


def key_id_for(public_key_hex: str) -> str:
    """First 16 hex digits of SHA-256 of the raw public key: names the key in ``sig``."""
    return sha256_hex(bytes.fromhex(public_key_hex))[:16]


def signed_message(
    *, run_id: str, kind: str, time: str, payload: Mapping[str, Any], eval_seq: int
) -> bytes:
    """The exact bytes an evaluator signature covers (module docstring)."""
    content = {
        "v": SCHEMA_VERSION,
        "run_id": run_id,
        "level": "trusted_evaluator",
        "kind": kind,
        "time": time,
        "payload": payload,
        "eval_seq": eval_seq,
    }
    return SIGNED_MESSAGE_PREFIX + canonical_json(content)


class SignedEvaluatorEvent(BaseModel):
    """A trusted-evaluator event as the evaluator ships it to the harness.

    It travels inside the ``EvalResult`` as JSON (``model_dump(mode="json")``)
    and becomes a trajectory line through
    :meth:`~ale_robotics.trajectory.writer.TrajectoryWriter.append_signed`, which
    adds ``seq``, ``prev_hash`` and ``hash`` but changes nothing signed.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    v: ExactInt = Field(default=SCHEMA_VERSION, description="Schema version; 1.")
    run_id: str = Field(pattern=RUN_ID_PATTERN)
    level: Literal["trusted_evaluator"] = "trusted_evaluator"
    kind: str = Field(pattern=KIND_PATTERN)
    time: str = Field(pattern=TIME_PATTERN)
    payload: dict[str, JsonValue]
    sig: Signature = Field(description="The signature; ``sig.eval_seq`` is the counter.")

    @field_validator("v")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value != SCHEMA_VERSION:
            raise ValueError(f"unsupported schema version {value}; this reader knows 1")
        return value

    @property
    def eval_seq(self) -> int:
        """The evaluator's per-run counter, as signed."""
        return self.sig.eval_seq

    def message(self) -> bytes:
        """The bytes :attr:`sig` signs."""
        return signed_message(
            run_id=self.run_id,
            kind=self.kind,
            time=self.time,
            payload=self.payload,
            eval_seq=self.sig.eval_seq,
        )

    def verify(self, public_key_hex: str) -> None:
        """Raise :class:`SignatureError` unless the signature is valid for this key."""
        verify_event_signature(self, public_key_hex)


def verify_event_signature(event: Event | SignedEvaluatorEvent, public_key_hex: str) -> None:
    """Check a trusted-evaluator event's signature against ``public_key_hex``.

    Raises :class:`SignatureError` naming the reason: no signature, signed by
    another key (``key_id``), or a signature that does not match the content.
    """
    sig = event.sig
    if sig is None:
        raise SignatureError("missing signature on a trusted_evaluator event")
    public_key = _public_key_from_hex(public_key_hex)
    expected_id = key_id_for(public_key_hex)
    if sig.key_id != expected_id:
        raise SignatureError(
            f"signed by unknown key {sig.key_id}; the evaluator's key is {expected_id}"
        )
    message = signed_message(
        run_id=event.run_id,
        kind=event.kind,
        time=event.time,
        payload=event.payload,
        eval_seq=sig.eval_seq,
    )
    try:
        public_key.verify(base64.b64decode(sig.value, validate=True), message)
    except InvalidSignature:
        raise SignatureError(
            f"bad signature (key {sig.key_id}): the signed content was changed or forged"
        ) from None


def _public_key_from_hex(public_key_hex: str) -> Ed25519PublicKey:
    if not _HEX64_RE.match(public_key_hex):
        raise KeyFileError(
            f"public key {public_key_hex!r} is not 64 lowercase hex digits (raw Ed25519 key)"
        )
    return Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_key_hex))


def _raw_public_hex(public_key: Ed25519PublicKey) -> str:
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return raw.hex()


def load_public_key(value: str) -> str:
    """Resolve ``--public-key``: 64 hex digits, or a file holding hex or a PEM key.

    Returns the raw public key as lowercase hex. A PEM private key is accepted
    too (its public half is used), so the evaluator's own key file works.
    """
    text = value.strip()
    if _HEX64_RE.match(text.lower()):
        return text.lower()
    path = Path(text).expanduser()
    if not path.is_file():
        raise KeyFileError(
            f"public key {value!r} is neither 64 hex digits nor an existing file "
            "(give the raw key as hex, or a file with the hex or a PEM key)"
        )
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise KeyFileError(f"cannot read public key file {path}: {exc}") from exc
    stripped = data.strip().decode("ascii", errors="replace").lower()
    if _HEX64_RE.match(stripped):
        return stripped
    if b"-----BEGIN" not in data:
        raise KeyFileError(f"{path} holds neither 64 hex digits nor a PEM key")
    try:
        if b"PRIVATE KEY" in data:
            private = serialization.load_pem_private_key(data, password=None)
            if not isinstance(private, Ed25519PrivateKey):
                raise KeyFileError(f"{path} is not an Ed25519 key")
            return _raw_public_hex(private.public_key())
        public = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(f"{path} is not a readable PEM key: {exc}") from exc
    if not isinstance(public, Ed25519PublicKey):
        raise KeyFileError(f"{path} is not an Ed25519 key")
    return _raw_public_hex(public)


class EvaluatorSigner:
    """The evaluator's signing key; the only thing able to make trusted events."""

    def __init__(self, private_key: Ed25519PrivateKey) -> None:
        self._key = private_key
        self._public_hex = _raw_public_hex(private_key.public_key())

    @classmethod
    def from_private_bytes(cls, raw: bytes) -> EvaluatorSigner:
        """A signer from the raw 32-byte private key (tests and golden vectors)."""
        return cls(Ed25519PrivateKey.from_private_bytes(raw))

    @classmethod
    def generate(cls) -> EvaluatorSigner:
        """A signer with a fresh key that is not stored anywhere."""
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def load_or_create(cls, path: Path) -> EvaluatorSigner:
        """Load the PEM key at ``path``, creating it (mode 0600) if absent.

        Creation is atomic and race-free: the key is written to a private
        temporary file and hard-linked into place, so two evaluator processes
        starting together end up with the same key and nobody reads half a key.
        A key file readable by group or others is refused, like ssh does.
        """
        path = Path(path)
        if not path.exists():
            _create_key_file(path)
        try:
            mode = path.stat().st_mode
            data = path.read_bytes()
        except OSError as exc:
            raise KeyFileError(f"cannot read evaluator key {path}: {exc}") from exc
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise KeyFileError(
                f"evaluator key {path} is accessible by group or others (mode "
                f"{stat.S_IMODE(mode):04o}); run `chmod 600 {path}`"
            )
        try:
            key = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError) as exc:
            raise KeyFileError(f"evaluator key {path} is not a readable PEM key: {exc}") from exc
        if not isinstance(key, Ed25519PrivateKey):
            raise KeyFileError(f"evaluator key {path} is not an Ed25519 key")
        return cls(key)

    @property
    def public_key_hex(self) -> str:
        """The raw 32-byte public key as lowercase hex, as published in ``evaluator_key``."""
        return self._public_hex

    @property
    def key_id(self) -> str:
        return key_id_for(self._public_hex)

    def public_key_pem(self) -> bytes:
        """The public key as PEM (SubjectPublicKeyInfo), e.g. to hand to verifiers."""
        return self._key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def key_event_payload(self) -> dict[str, JsonValue]:
        """Payload of the ``evaluator_key`` event (eval_seq 0)."""
        return {"alg": "ed25519", "public_key": self._public_hex, "key_id": self.key_id}

    def sign_event(
        self,
        run_id: str,
        kind: str,
        payload: Mapping[str, object],
        eval_seq: int,
        time: datetime | str | None = None,
    ) -> SignedEvaluatorEvent:
        """Sign one evaluator event; ``time`` defaults to now (UTC).

        The payload is normalized first (NaN and non-JSON values refused with
        their path), so what is signed is exactly what the trajectory stores.
        """
        if type(eval_seq) is not int or eval_seq < 0:
            raise InvalidEventError(f"eval_seq must be a non-negative int, not {eval_seq!r}")
        stamp = time if isinstance(time, str) else format_time(time)
        clean = normalize_payload(payload)
        message = signed_message(
            run_id=run_id, kind=kind, time=stamp, payload=clean, eval_seq=eval_seq
        )
        value = base64.b64encode(self._key.sign(message)).decode("ascii")
        sig = {"alg": "ed25519", "key_id": self.key_id, "eval_seq": eval_seq, "value": value}
        try:
            return SignedEvaluatorEvent.model_validate(
                {"run_id": run_id, "kind": kind, "time": stamp, "payload": clean, "sig": sig}
            )
        except pydantic.ValidationError as exc:
            raise InvalidEventError(f"cannot sign event: {describe_validation_error(exc)}") from exc

    def for_run(self, run_id: str, next_eval_seq: int = 0) -> RunEventSigner:
        """A helper that numbers this run's events itself (see :class:`RunEventSigner`)."""
        return RunEventSigner(self, run_id, next_eval_seq)


class RunEventSigner:
    """Signs one run's evaluator events with consecutive ``eval_seq`` numbers.

    Pass ``next_eval_seq`` when an evaluator resumes a run after a restart (the
    counter must then come from the job store), otherwise numbering restarts
    at 0 and the verifier rejects the duplicate. A store that allocates each
    event's ``eval_seq`` itself (the evaluator's job store does, in the
    transaction that stores the event) gets one of these per event, at the
    number it allocated: :meth:`key_event` and :meth:`commitment_event` then
    refuse a preamble that did not land at 0 and 1 instead of signing it.
    """

    def __init__(self, signer: EvaluatorSigner, run_id: str, next_eval_seq: int = 0) -> None:
        self._signer = signer
        self.run_id = run_id
        self.next_eval_seq = next_eval_seq

    def sign(
        self, kind: str, payload: Mapping[str, object], time: datetime | str | None = None
    ) -> SignedEvaluatorEvent:
        event = self._signer.sign_event(self.run_id, kind, payload, self.next_eval_seq, time)
        self.next_eval_seq += 1
        return event

    def key_event(
        self,
        time: datetime | str | None = None,
        *,
        extra: Mapping[str, object] | None = None,
    ) -> SignedEvaluatorEvent:
        """The ``evaluator_key`` event; must be the run's first (eval_seq 0).

        ``extra``: more keys after the key's own (the evaluator adds its version);
        they may not replace one of the key's, which the verifier reads.
        """
        if self.next_eval_seq != 0:
            raise InvalidEventError("the evaluator_key event must be the run's eval_seq 0")
        payload: dict[str, object] = dict(self._signer.key_event_payload())
        clash = sorted(set(payload) & set(extra or {}))
        if clash:
            raise InvalidEventError(f"extra keys {clash} would replace the key's own")
        return self.sign(KEY_EVENT_KIND, {**payload, **(extra or {})}, time)

    def commitment_event(
        self,
        *,
        secret: bytes,
        seed_commitments: Sequence[str],
        extra: Mapping[str, object] | None = None,
        time: datetime | str | None = None,
    ) -> SignedEvaluatorEvent:
        """The ``seed_commitment`` event; must directly follow the key event (eval_seq 1)."""
        if self.next_eval_seq != 1:
            raise InvalidEventError("the seed_commitment event must be the run's eval_seq 1")
        payload = commitment_payload(
            secret_sha256=secret_commitment(secret), seed_commitments=seed_commitments
        )
        return self.sign(COMMITMENT_EVENT_KIND, {**(extra or {}), **payload}, time)


class KeyEventPayload(BaseModel):
    """What the verifier requires of an ``evaluator_key`` payload (other keys allowed)."""

    model_config = ConfigDict(extra="allow", strict=True)
    alg: Literal["ed25519"]
    public_key: str = Field(pattern=HEX64_PATTERN)
    key_id: str = Field(pattern=r"^[0-9a-f]{16}$")


def _create_key_file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask
        os.write(fd, pem)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # fails if another process created the key first: keep theirs
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
