"""Helpers for the trajectory tests (importable as ``trajectory_helpers``).

The standard trajectory interleaves harness, agent and evaluator events the way
a batch run does, so every tamper test runs against every kind of event.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ale_robotics.trajectory import (
    GENESIS_HASH,
    EvaluatorSigner,
    TrajectoryWriter,
    canonical_json,
    event_hash,
    seed_commitment,
)

RUN_ID = "run-test-0001"
# Fixed test-only keys, so failures reproduce byte for byte.
EVALUATOR_KEY = bytes.fromhex("a1" * 32)
OTHER_KEY = bytes.fromhex("b2" * 32)

Records = list[dict[str, Any]]


def write_standard_run(path: Path, signer: EvaluatorSigner) -> None:
    """12 events: harness (0,1,9,11), agent (4), evaluator (2,3,5,6,7,8,10 = eval_seq 0..6)."""
    writer = TrajectoryWriter(path, RUN_ID)
    ev = signer.for_run(RUN_ID)
    writer.append("harness", "run_started", {"task_id": "td3-inverted-pendulum-v1"})
    writer.append("harness", "agent_launched", {"pid": 4242, "sandbox": "bwrap"})
    writer.append_signed(ev.key_event())
    writer.append_signed(
        ev.commitment_event(
            secret=b"s" * 32,
            seed_commitments=[seed_commitment(bytes([i]) * 32) for i in range(3)],
        )
    )
    writer.append("agent", "note", {"text": "training started", "step": 0})
    writer.append_signed(ev.sign("submit_received", {"files": {"policy.pt": "ab" * 32}}))
    writer.append_signed(ev.sign("validation", {"outcome": "accepted"}))
    writer.append_signed(ev.sign("evaluation_started", {"episodes": 3}))
    writer.append_signed(ev.sign("progress", {"done": 3, "total": 3}))
    writer.append("harness", "agent_exited", {"exit_code": 0})
    writer.append_signed(ev.sign("result", {"mean_return": 1000.5, "episodes": [1, 2.5, -0.0]}))
    writer.append("harness", "score", {"score": 1.25})


EVALUATOR_INDICES = (2, 3, 5, 6, 7, 8, 10)
HARNESS_OR_AGENT_INDICES = (0, 1, 4, 9, 11)
N_EVENTS = 12


def append_many(path: str, worker: int, count: int, start: Any) -> None:
    """A process body for the concurrency test (spawned children import it from here).

    Building each event is slowed down, in this child process only, to widen the
    window between reading the tail and writing the line: without the lock,
    two processes would then reliably take the same seq.
    """
    import time

    from ale_robotics.trajectory import writer as writer_module

    real_build = writer_module.build_event

    def slow_build(**kwargs: Any) -> Any:
        time.sleep(0.002)
        return real_build(**kwargs)

    writer_module.build_event = slow_build  # type: ignore[assignment]
    start.wait()
    writer = TrajectoryWriter(path, RUN_ID)
    for i in range(count):
        writer.append("harness", "tick", {"worker": worker, "i": i})


def read_records(path: Path) -> Records:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def write_records(path: Path, records: Records) -> None:
    """Write records as canonical lines, exactly as given (stale hashes stay stale)."""
    path.write_bytes(b"".join(canonical_json(r) + b"\n" for r in records))


def rehash(records: Records, renumber: bool = False) -> Records:
    """What an attacker with write access does after an edit: recompute the whole chain."""
    prev = GENESIS_HASH
    out: Records = []
    for i, record in enumerate(records):
        record = dict(record)
        if renumber:
            record["seq"] = i
        record["prev_hash"] = prev
        record["hash"] = event_hash(record)
        prev = record["hash"]
        out.append(record)
    return out


def flip_hex(value: str) -> str:
    return ("1" if value[0] == "0" else "0") + value[1:]


def flip_signature(value: str) -> str:
    raw = bytearray(base64.b64decode(value))
    raw[0] ^= 1
    return base64.b64encode(bytes(raw)).decode()


FAKE_SIG = {
    "alg": "ed25519",
    "key_id": "0123456789abcdef",
    "eval_seq": 0,
    "value": base64.b64encode(bytes(64)).decode(),
}


def _other_level(level: str) -> str:
    return {"agent": "harness", "harness": "agent", "trusted_evaluator": "harness"}[level]


MUTATIONS: dict[str, Callable[[dict[str, Any]], None]] = {
    "v": lambda r: r.update(v=2),
    "seq": lambda r: r.update(seq=r["seq"] + 100),
    "time": lambda r: r.update(time=r["time"][:-2] + ("1Z" if r["time"][-2] != "1" else "2Z")),
    "run_id": lambda r: r.update(run_id="run-other"),
    "level": lambda r: r.update(level=_other_level(r["level"])),
    "kind": lambda r: r.update(kind=r["kind"] + "_x"),
    "payload": lambda r: r.update(payload={**r["payload"], "tampered": True}),
    "prev_hash": lambda r: r.update(prev_hash=flip_hex(r["prev_hash"])),
    "hash": lambda r: r.update(hash=flip_hex(r["hash"])),
    "sig": lambda r: r.update(
        sig=dict(FAKE_SIG)
        if r["sig"] is None
        else {**r["sig"], "value": flip_signature(r["sig"]["value"])}
    ),
}
"""One valid-looking change per event field (every field of the schema)."""

SIG_MUTATIONS: dict[str, Callable[[dict[str, Any]], None]] = {
    "sig.eval_seq": lambda r: r["sig"].update(eval_seq=r["sig"]["eval_seq"] + 1),
    "sig.key_id": lambda r: r["sig"].update(key_id=flip_hex(r["sig"]["key_id"])),
    "sig.value": lambda r: r["sig"].update(value=flip_signature(r["sig"]["value"])),
    "sig.removed": lambda r: r.update(sig=None),
}
"""Changes to an evaluator signature."""

PROMOTE: dict[str, Callable[[dict[str, Any]], None]] = {
    "level.promoted": lambda r: r.update(level="trusted_evaluator"),
}
"""Turning a harness or agent event into an (unsigned) evaluator event."""
