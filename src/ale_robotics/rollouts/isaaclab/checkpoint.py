"""The artifact of an Isaac Lab task: the RSL-RL checkpoint an Isaac Lab user already has.

Isaac Lab's ``scripts/reinforcement_learning/rsl_rl/train.py`` (``OnPolicyRunner.save``)
writes ``model_<iteration>.pt``: a ``torch.save`` of a dict holding ``actor_state_dict``
(the policy), ``critic_state_dict``, ``optimizer_state_dict``, ``iter`` and ``infos``.
That file is the submission, unchanged (its contract names it ``model.pt``). Never its
TorchScript or ONNX exports (``exported/policy.pt``, ``policy.onnx``), which are programs:
the evaluator builds the actor itself from the weights.

It is read here, in the evaluator, exactly like the other torch contracts
(:mod:`ale_robotics.rollouts.weights`): the zip directory checked first (no compressed
member, the unpacked size within the contract), then ``torch.load(weights_only=True)``
(the restricted unpickler: a pickle payload raises instead of running), the dict's shape,
then ``actor_state_dict`` alone: dense float tensors whose values fit the contract's size
(no expanded views), then the contract's exact rules (key set, shapes, dtypes, finite:
:func:`~ale_robotics.rollouts.weights.validate_tensors`). The other entries are the
trainer's and are not read (an optimizer's state is not a policy).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ale_robotics.model.snapshot import SnapshotFile
from ale_robotics.rollouts.weights import Weights, _check_zip, state_dict_arrays, validate_tensors
from ale_robotics.submission.rejected import SubmissionRejected
from ale_robotics.submission.rejected import first_line as _first_line
from ale_robotics.submission.rejected import quote_key as _key
from ale_robotics.tasks.contract import FileFormat, SubmissionContract

__all__ = ["ACTOR_KEY", "load_actor"]

ACTOR_KEY = "actor_state_dict"
"""Where RSL-RL's ``OnPolicyRunner.save`` puts the policy's weights."""
_MAX_ENTRIES = 64


def _tensors(obj: Any, shown: str, max_bytes: int) -> dict[str, npt.NDArray[np.generic]]:

    if not isinstance(obj, dict):
        raise SubmissionRejected(
            shown,
            "RSL-RL checkpoint",
            f"holds a {type(obj).__name__}, not the dict OnPolicyRunner.save writes",
        )
    if len(obj) > _MAX_ENTRIES:
        raise SubmissionRejected(shown, "RSL-RL checkpoint", f"holds {len(obj)} entries")
    actor = obj.get(ACTOR_KEY)
    if not isinstance(actor, dict):
        found = ", ".join(_key(k) for k in list(obj)[:8])
        raise SubmissionRejected(
            shown,
            "RSL-RL checkpoint",
            f"has no {ACTOR_KEY!r} dict (entries: {found}); submit the model_<iteration>.pt "
            "that RSL-RL's OnPolicyRunner.save writes",
        )
    return state_dict_arrays(actor, f"{shown}: {ACTOR_KEY}", max_bytes)


def load_actor(files: list[SnapshotFile], contract: SubmissionContract) -> Weights:
    """The actor's weights from the submitted RSL-RL checkpoint, checked (module docstring)."""
    policy = next((f for f in files if f.role == "policy"), None)
    if policy is None:
        raise SubmissionRejected("policy", "required file", "no policy file in the submission")
    if policy.format is not FileFormat.TORCH_STATE_DICT:
        raise SubmissionRejected(
            policy.name, "format", f"{policy.format} is not an RSL-RL checkpoint (torch.save)"
        )
    max_bytes = contract.file_for_role("policy").max_bytes
    _check_zip(policy.path, policy.name, max_bytes)
    import torch

    try:
        obj = torch.load(policy.path, map_location="cpu", weights_only=True, mmap=False)
    except MemoryError:
        raise
    except Exception as exc:
        raise SubmissionRejected(
            policy.name,
            "weights_only torch load",
            f"refused by the safe loader: {_first_line(exc)}",
        ) from None
    return validate_tensors(_tensors(obj, policy.name, max_bytes), contract.tensors, policy.name)
