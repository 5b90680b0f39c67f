"""Task configs, submission contracts, the registry and the release manifest."""

from ale_robotics.tasks.manifest import (
    ComputeBudget,
    ManifestEntry,
    PaperTarget,
    ReleaseManifest,
    TargetSource,
    load_manifest,
)
from ale_robotics.tasks.registry import Registry, TaskEntry, default_registry
from ale_robotics.tasks.spec import (
    ContractFile,
    Direction,
    EnvSpec,
    EvalProtocol,
    FileFormat,
    MetricRole,
    MetricSpec,
    PolicyArchitecture,
    SessionSettings,
    SubmissionContract,
    TaskMode,
    TaskSpec,
    TensorRule,
)

__all__ = [
    "ComputeBudget",
    "ContractFile",
    "Direction",
    "EnvSpec",
    "EvalProtocol",
    "FileFormat",
    "ManifestEntry",
    "MetricRole",
    "MetricSpec",
    "PaperTarget",
    "PolicyArchitecture",
    "Registry",
    "ReleaseManifest",
    "SessionSettings",
    "SubmissionContract",
    "TargetSource",
    "TaskEntry",
    "TaskMode",
    "TaskSpec",
    "TensorRule",
    "default_registry",
    "load_manifest",
]
