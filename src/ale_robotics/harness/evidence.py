"""Rebuild the gate's evidence from the official result, checking it is what was evaluated."""

from __future__ import annotations

import base64
import binascii
import hashlib
from pathlib import Path

from ale_robotics.evaluator.result import EvalResult
from ale_robotics.scoring import GateEvidence

__all__ = ["gate_evidence"]


def gate_evidence(result: EvalResult, workdir: Path) -> GateEvidence:
    """Write the result's evidence files into ``workdir`` and describe them for the gate.

    A file whose bytes do not hash to the SHA-256 recorded at submission is left
    out, so the gate (which fails closed) reports it missing rather than trusting it.
    """
    files: dict[str, Path] = {}
    for name, blob in result.evidence_files.items():
        try:
            data = base64.b64decode(blob, validate=True)
        except (binascii.Error, ValueError):
            continue
        if Path(name).name != name or hashlib.sha256(
            data
        ).hexdigest() != result.submission_files.get(name):
            continue
        path = workdir / name
        path.write_bytes(data)
        files[name] = path
    return GateEvidence(files=files, tensor_shapes=result.tensor_shapes or None)
