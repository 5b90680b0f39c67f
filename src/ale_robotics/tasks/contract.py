"""The submission contract of a batch task: the files an agent submits, their formats, and
the policy tensors (shapes, architecture) the evaluator loads.

Split from :mod:`.spec` (whose :class:`~.spec.TaskSpec` holds it in ``contract``) because
it is the part of a task an agent's artifact is checked against, on its own.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "ContractFile",
    "FileFormat",
    "PolicyArchitecture",
    "SubmissionContract",
    "TensorRule",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FileFormat(StrEnum):
    TORCH_STATE_DICT = "torch_state_dict"
    SAFETENSORS = "safetensors"
    JSON = "json"
    CSV = "csv"
    YAML = "yaml"
    NPZ = "npz"


class ContractFile(_Strict):
    """One artifact the agent must (or may) write into the submission directory."""

    role: str = Field(description="What the file is for, e.g. 'policy'.")
    names: dict[str, FileFormat] = Field(
        description="Accepted file names and their format; exactly one must be present "
        "when the file is required, e.g. {'policy.safetensors': 'safetensors', "
        "'policy.pt': 'torch_state_dict'}."
    )
    required: bool = True
    max_bytes: int = Field(gt=0)

    @field_validator("names")
    @classmethod
    def _plain_names(cls, names: dict[str, FileFormat]) -> dict[str, FileFormat]:
        for name in names:
            if "/" in name or "\\" in name or name in ("", ".", "..") or name.startswith("."):
                raise ValueError(f"contract file name {name!r} must be a plain file name")
        if not names:
            raise ValueError("a contract file needs at least one accepted name")
        return names


class TensorRule(_Strict):
    key: str
    shape: list[int]
    dtype: Literal["float32", "float64", "int64"] = "float32"
    low: float | None = Field(
        default=None, description="Inclusive lower bound of every value (replay tasks only)."
    )
    high: float | None = Field(
        default=None, description="Inclusive upper bound of every value (replay tasks only)."
    )


class PolicyArchitecture(_Strict):
    """The network the evaluator builds itself; the agent only supplies weights."""

    kind: Literal["mlp"] = "mlp"
    hidden_sizes: list[int]
    activation: Literal["relu", "tanh"] = "relu"
    output_activation: Literal["tanh", "identity"] = "tanh"
    layer_names: list[str] = Field(
        description="State-dict prefixes of the linear layers in order, e.g. ['l1','l2','l3']."
    )
    action_scale: Literal["env_high"] = Field(
        default="env_high",
        description="Outputs in [-1, 1] are multiplied by the action space's high bound.",
    )

    @model_validator(mode="after")
    def _layers_match(self) -> PolicyArchitecture:
        if len(self.layer_names) != len(self.hidden_sizes) + 1:
            raise ValueError("policy.layer_names needs one name per linear layer (hidden + output)")
        return self

    def tensor_rules(self, obs_dim: int, act_dim: int, dtype: str = "float32") -> list[TensorRule]:
        """Required state-dict keys with their shapes (torch Linear layout: out x in)."""
        sizes = [obs_dim, *self.hidden_sizes, act_dim]
        rules: list[TensorRule] = []
        for name, fan_in, fan_out in zip(self.layer_names, sizes[:-1], sizes[1:], strict=True):
            rules.append(TensorRule(key=f"{name}.weight", shape=[fan_out, fan_in], dtype=dtype))
            rules.append(TensorRule(key=f"{name}.bias", shape=[fan_out], dtype=dtype))
        return rules


class SubmissionContract(_Strict):
    """What a batch task requires the agent to write, exactly; served by GetSpec.

    It says what to write, not where: the submission directory is wherever the run's
    sandbox puts it, which only the run knows (``$ALE_SUBMISSION_DIR``, the SDK's
    ``AleClient.submission_dir``). The task configs still carry the key a path was once
    given in (``submission_path``, their bytes are what the release manifest pins); it
    is dropped when read, so no spec an agent is served names a path that is not its
    own."""

    schema_version: Literal[1] = 1
    files: list[ContractFile]
    tensors: list[TensorRule] = Field(
        default_factory=list,
        description="Exact key set of the policy state dict: no key missing, none extra.",
    )
    max_total_bytes: int = Field(gt=0)
    notes: str = ""

    @model_validator(mode="before")
    @classmethod
    def _drop_legacy_path(cls, data: Any) -> Any:
        """The configs' ``submission_path`` (see the class docstring), read and dropped."""
        if isinstance(data, dict) and "submission_path" in data:
            data = {k: v for k, v in data.items() if k != "submission_path"}
        return data

    def file_for_role(self, role: str) -> ContractFile:
        for f in self.files:
            if f.role == role:
                return f
        raise KeyError(role)
