"""The run trajectory: an append-only, hash-chained, partly signed JSON-lines log.

Each run's ``runs/<run_id>/trajectory.jsonl`` records what the harness, the
agent and the trusted evaluator did. Every event is hash-chained to the one
before it, and the evaluator's events are Ed25519-signed, so that an agent able
to write the file still cannot forge an evaluator event, and any edit, deletion
or reordering is pinned to the first event it breaks.

* :mod:`.events`  the event schema and its canonical encoding (read this first)
* :mod:`.signing` the evaluator's key and what a signature covers
* :mod:`.commitments` the hidden-seed commitments
* :mod:`.writer`  atomic, durable, multi-process appends
* :mod:`.verify`  the verifier and what it can and cannot detect
* :mod:`.show`    a readable table
"""

from ale_robotics.trajectory.commitments import (
    COMMITMENT_EVENT_KIND,
    commitment_payload,
    secret_commitment,
    seed_commitment,
)
from ale_robotics.trajectory.errors import (
    CorruptTrajectoryError,
    EventFormatError,
    InvalidEventError,
    KeyFileError,
    SignatureError,
    TornTrajectoryError,
    TrajectoryError,
)
from ale_robotics.trajectory.events import (
    GENESIS_HASH,
    LEVELS,
    SCHEMA_VERSION,
    Event,
    Level,
    Signature,
    build_event,
    canonical_json,
    event_hash,
    format_time,
)
from ale_robotics.trajectory.show import (
    inspect_file,
    render_trajectory,
    trajectory_document,
    verify_document,
)
from ale_robotics.trajectory.signing import (
    KEY_EVENT_KIND,
    EvaluatorSigner,
    RunEventSigner,
    SignedEvaluatorEvent,
    key_id_for,
    load_public_key,
    signed_message,
    verify_event_signature,
)
from ale_robotics.trajectory.verify import VerifyReport, verified_events, verify_file
from ale_robotics.trajectory.writer import TrajectoryWriter

__all__ = [
    "COMMITMENT_EVENT_KIND",
    "GENESIS_HASH",
    "KEY_EVENT_KIND",
    "LEVELS",
    "SCHEMA_VERSION",
    "CorruptTrajectoryError",
    "EvaluatorSigner",
    "Event",
    "EventFormatError",
    "InvalidEventError",
    "KeyFileError",
    "Level",
    "RunEventSigner",
    "Signature",
    "SignatureError",
    "SignedEvaluatorEvent",
    "TornTrajectoryError",
    "TrajectoryError",
    "TrajectoryWriter",
    "VerifyReport",
    "build_event",
    "canonical_json",
    "commitment_payload",
    "event_hash",
    "format_time",
    "inspect_file",
    "key_id_for",
    "load_public_key",
    "render_trajectory",
    "secret_commitment",
    "seed_commitment",
    "signed_message",
    "trajectory_document",
    "verified_events",
    "verify_document",
    "verify_event_signature",
    "verify_file",
]
