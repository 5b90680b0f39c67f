"""Task configs, submission contracts, the registry and the release manifest.

The names below are loaded on first use (PEP 562), from the module that defines
them: ``import ale_robotics.tasks.spec`` runs this package's ``__init__`` first,
and the task model is all an agent's SDK (``ale_robotics.client``) needs to read
GetSpec. Importing the manifest and the registry here, eagerly, would make every
agent pay for them (their modules, the bundled configs they read) at start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ale_robotics.lazy import lazy_exports

if TYPE_CHECKING:
    from ale_robotics.tasks.contract import (
        ContractFile,
        FileFormat,
        PolicyArchitecture,
        SubmissionContract,
        TensorRule,
    )
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
        Direction,
        EnvSpec,
        EvalProtocol,
        MetricRole,
        MetricSpec,
        SessionSettings,
        TaskMode,
        TaskSpec,
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

_MANIFEST = "ale_robotics.tasks.manifest"
_REGISTRY = "ale_robotics.tasks.registry"
_SPEC = "ale_robotics.tasks.spec"
_CONTRACT = "ale_robotics.tasks.contract"
_LAZY: dict[str, str] = {
    "ComputeBudget": _MANIFEST,
    "ManifestEntry": _MANIFEST,
    "PaperTarget": _MANIFEST,
    "ReleaseManifest": _MANIFEST,
    "TargetSource": _MANIFEST,
    "load_manifest": _MANIFEST,
    "Registry": _REGISTRY,
    "TaskEntry": _REGISTRY,
    "default_registry": _REGISTRY,
    "ContractFile": _CONTRACT,
    "Direction": _SPEC,
    "EnvSpec": _SPEC,
    "EvalProtocol": _SPEC,
    "FileFormat": _CONTRACT,
    "MetricRole": _SPEC,
    "MetricSpec": _SPEC,
    "PolicyArchitecture": _CONTRACT,
    "SessionSettings": _SPEC,
    "SubmissionContract": _CONTRACT,
    "TaskMode": _SPEC,
    "TaskSpec": _SPEC,
    "TensorRule": _CONTRACT,
}
"""Where each exported name is defined (every name of ``__all__``)."""

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
