"""Which secret an audit uses when it is given none: the embedded evaluator's own.

``ale-robotics run`` starts an embedded evaluator whose state dir, unless ``--state-dir``
says otherwise, is ``STATE_HOME/evaluator`` (:func:`~ale_robotics.harness.options.
default_state_dir`), and its secret is ``secret`` there. On that machine the operator
holds the secret already (there is nothing to reveal), so ``audit runs/<id>``, as the
tour writes it, should find it. It is used only when it is the run's: its SHA-256 must be
the run's published ``secret_sha256`` or the secret hash of the trajectory's
``seed_commitment`` event (a run of another evaluator, or of ``--state-dir DIR``, has
another secret, and an audit with the wrong one would only fail its checks). When there
is none, or it is another's, the error says where it looked and what to pass.

The trajectory is read here only to pick the file, not trusted: the audit verifies it,
and the secret against both commitments, afterwards.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ale_robotics.audit.run import read_secret
from ale_robotics.errors import InvalidArgumentError
from ale_robotics.harness.options import default_state_dir
from ale_robotics.trajectory import COMMITMENT_EVENT_KIND

__all__ = ["default_secret_file", "find_run_secret"]

_WHAT_TO_PASS = (
    "pass --secret FILE: the secret of the evaluator that ran it, STATE_DIR/secret (the "
    "--state-dir it ran with; a shared evaluator's operator reveals it)"
)


def default_secret_file() -> Path:
    """The embedded evaluator's secret when ``run`` is given no ``--state-dir``."""
    return default_state_dir() / "secret"


def _commitments(run_dir: Path, published: str | None) -> set[str]:
    """The secret hashes the run commits to: ``result.json``'s and the trajectory's."""
    hashes = {published} if published else set()
    try:
        lines = (run_dir / "trajectory.jsonl").read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return hashes
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("kind") == COMMITMENT_EVENT_KIND:
            payload = event.get("payload")
            if isinstance(payload, dict) and isinstance(payload.get("secret_sha256"), str):
                hashes.add(payload["secret_sha256"])
    return hashes


def find_run_secret(run_dir: Path, published: str | None) -> Path:
    """The default state dir's secret file, if it is this run's (see the module docstring);
    else :class:`InvalidArgumentError` saying where it looked and what to pass."""
    path = default_secret_file()
    if not path.is_file():
        raise InvalidArgumentError(
            f"no --secret given, and the embedded evaluator's default state dir has none "
            f"(looked for {path}): {_WHAT_TO_PASS}"
        )
    try:
        digest = hashlib.sha256(read_secret(path)).hexdigest()
    except OSError as exc:
        raise InvalidArgumentError(
            f"no --secret given, and the default one {path} cannot be read "
            f"({exc.strerror}): {_WHAT_TO_PASS}"
        ) from None
    if digest not in _commitments(run_dir, published):
        raise InvalidArgumentError(
            f"no --secret given, and the default one, {path}, is not this run's (its SHA-256 "
            f"is not the secret the run commits to: another evaluator ran it): {_WHAT_TO_PASS}"
        )
    return path
