"""Evidence files of a submission (``meta.json``, ``curve.csv``...) for the faithfulness gate.

The gate is part of scoring, which the harness does, possibly on another host,
so the evaluator ships the exact bytes of the frozen evidence files inside the
official result (base64) along with the policy's tensor shapes; the harness
checks them against the SHA-256 recorded at submission before the gate reads
them. Here the evaluator only checks that they are what their format says (UTF-8
JSON object, UTF-8 CSV); whether they show the paper's method is the gate's job.
"""

from __future__ import annotations

import base64
import json

import numpy as np
import numpy.typing as npt

from ale_robotics.model.snapshot import SnapshotFile
from ale_robotics.submission.rejected import SubmissionRejected
from ale_robotics.tasks.contract import FileFormat

__all__ = ["collect_evidence", "validate_evidence_formats"]

_TEXT_FORMATS = {FileFormat.JSON, FileFormat.CSV}


def validate_evidence_formats(files: list[SnapshotFile]) -> None:
    """Reject evidence files that are not well-formed in their declared format."""
    for f in files:
        if f.format not in _TEXT_FORMATS:
            continue
        try:
            text = f.path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            raise SubmissionRejected(f.name, f"{f.format} format", "is not UTF-8 text") from None
        if f.format is FileFormat.JSON:
            try:
                doc = json.loads(text)
            except json.JSONDecodeError as exc:
                raise SubmissionRejected(
                    f.name, "json format", f"is not valid JSON: {exc}"
                ) from None
            except (RecursionError, ValueError):
                raise SubmissionRejected(
                    f.name, "json format", "is nested too deeply or holds an unparsable number"
                ) from None
            if not isinstance(doc, dict):
                raise SubmissionRejected(f.name, "json format", "must hold a JSON object")


def collect_evidence(
    files: list[SnapshotFile], weights: dict[str, npt.NDArray[np.floating]]
) -> tuple[dict[str, str], dict[str, list[int]]]:
    """(evidence file name -> base64 bytes, state-dict key -> shape) for the result."""
    blobs = {
        f.name: base64.b64encode(f.path.read_bytes()).decode("ascii")
        for f in files
        if f.format in _TEXT_FORMATS
    }
    shapes = {k: [int(d) for d in v.shape] for k, v in weights.items()}
    return blobs, shapes
