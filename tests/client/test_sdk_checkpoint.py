"""AleClient.submit_checkpoint refuses a path that cannot hold a policy before any call."""

from __future__ import annotations

from pathlib import Path

import pytest

from ale_robotics.client import AleClient
from ale_robotics.client.sdk import CheckpointAck
from ale_robotics.errors import InvalidArgumentError, UnavailableError
from ale_robotics.v1 import ale_env_pb2 as pb


def _client(tmp_path: Path) -> AleClient:
    # nothing listens there: any RPC would be UNAVAILABLE, so each refusal below is local
    return AleClient(f"unix://{tmp_path}/none.sock", "t", submission_dir=tmp_path, timeout_s=2)


def test_a_missing_empty_or_outside_path_is_refused_locally(tmp_path: Path) -> None:
    with _client(tmp_path) as c:
        with pytest.raises(InvalidArgumentError, match="does not exist"):
            c.submit_checkpoint(tmp_path / "missing")
        (tmp_path / "empty").mkdir()
        with pytest.raises(InvalidArgumentError, match="is empty"):
            c.submit_checkpoint("empty")
        with pytest.raises(InvalidArgumentError, match="outside the submission directory"):
            c.submit_checkpoint(tmp_path.parent)
        (tmp_path / "policy.safetensors").write_bytes(b"x")
        with pytest.raises(UnavailableError):  # the default path (the submission dir) is sent
            c.submit_checkpoint(timeout_s=1)


def test_the_ack_is_the_response_without_any_return() -> None:
    r = pb.SubmitCheckpointResponse(
        checkpoint_id="0123456789abcdef",
        index=2,
        practice_steps=5000,
        deduplicated=True,
        checkpoints_left=47,
    )
    assert CheckpointAck.from_proto(r) == CheckpointAck("0123456789abcdef", 2, 5000, True, 47)
