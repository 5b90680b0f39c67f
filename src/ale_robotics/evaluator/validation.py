"""Validate a frozen submission against its contract, without running any agent code.

Torch files are read only through ``torch.load(weights_only=True)`` (the
restricted unpickler: no arbitrary globals, so a pickle payload raises instead of
running), after a look at the zip directory that refuses compressed or oversized
members (a zip bomb would otherwise be inflated by the loader). A torch tensor
can also be a view that is far larger than the bytes behind it (``expand`` gives
stride 0; many keys can share one storage), so the tensors' total size is checked
against the contract before anything is materialized. Safetensors files are
parsed by the safetensors library, which has no code path at all. YAML goes
through :func:`load_yaml_strict`: the safe loader plus limits on size, nesting,
aliases and expanded size (a "billion laughs" document is a few hundred bytes).

Every parser here reads attacker-controlled bytes, so any exception it raises is
the file's fault and becomes a :class:`SubmissionRejected` naming the file and
the rule; only ``MemoryError`` is left to the caller (an infrastructure failure).
Messages quote agent-chosen text (tensor keys) only through :func:`_key`, which
bounds its length.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import yaml

from ale_robotics.evaluator.snapshot import SnapshotFile, SubmissionRejected
from ale_robotics.tasks.spec import FileFormat, SubmissionContract, TensorRule

__all__ = [
    "YAML_MAX_ALIASES",
    "YAML_MAX_DEPTH",
    "YAML_MAX_NODES",
    "Weights",
    "load_weights",
    "load_yaml_strict",
    "validate_tensors",
]

Weights = dict[str, npt.NDArray[np.floating]]

_MAX_KEYS = 4096
"""More tensors than any contract could name; refused before looking at them."""
_DETAIL_CHARS = 300

YAML_MAX_DEPTH = 32
"""Deepest nesting of collections a YAML submission may have."""
YAML_MAX_ALIASES = 64
"""Most ``*alias`` references in one YAML document."""
YAML_MAX_NODES = 100_000
"""Most nodes after expanding every alias (a billion-laughs document has ~10^9)."""


def _key(key: object) -> str:
    """An agent-chosen key as shown in messages: ``repr``, at most 80 characters."""
    text = repr(key)
    return text if len(text) <= 80 else text[:77] + "..."


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return first[:_DETAIL_CHARS]


def _load_safetensors(path: Path, shown: str) -> dict[str, npt.NDArray[np.generic]]:
    from safetensors import safe_open

    try:
        out: dict[str, npt.NDArray[np.generic]] = {}
        with safe_open(str(path), framework="numpy") as f:
            keys = list(f.keys())
            if len(keys) > _MAX_KEYS:
                raise SubmissionRejected(
                    shown, "no extra keys", f"holds {len(keys)} tensors; at most {_MAX_KEYS}"
                )
            for key in keys:
                out[key] = f.get_tensor(key)
        return out
    except SubmissionRejected:
        raise
    except MemoryError:
        raise
    except Exception as exc:
        # SafetensorError for a bad header; TypeError/AttributeError for dtypes numpy
        # lacks (bf16, float8); whatever else the parser raises is still the file's fault.
        raise SubmissionRejected(
            shown, "safetensors format", f"cannot be parsed: {_first_line(exc)}"
        ) from None


def _check_zip(path: Path, shown: str, max_bytes: int) -> None:
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
    except MemoryError:
        raise
    except Exception as exc:
        raise SubmissionRejected(
            shown,
            "torch state dict format",
            f"is not a torch.save zip archive ({_first_line(exc)}); "
            "save with torch.save(state_dict, path)",
        ) from None
    total = 0
    for info in infos:
        if info.compress_type != zipfile.ZIP_STORED:
            raise SubmissionRejected(
                shown,
                "no compression",
                f"member {_key(info.filename)} is compressed; torch.save "
                "never compresses, so this file was not written by it",
            )
        total += info.file_size
    if total > max_bytes:
        raise SubmissionRejected(
            shown, "size limit", f"unpacks to {total} bytes; the contract allows {max_bytes}"
        )


def _load_torch(path: Path, shown: str, max_bytes: int) -> dict[str, npt.NDArray[np.generic]]:
    _check_zip(path, shown, max_bytes)
    import torch

    try:
        obj = torch.load(path, map_location="cpu", weights_only=True, mmap=False)
    except MemoryError:
        raise
    except Exception as exc:
        raise SubmissionRejected(
            shown, "weights_only torch load", f"refused by the safe loader: {_first_line(exc)}"
        ) from None
    if not isinstance(obj, dict):
        raise SubmissionRejected(
            shown, "state dict", f"holds a {type(obj).__name__}, not a dict of tensors"
        )
    if len(obj) > _MAX_KEYS:
        raise SubmissionRejected(
            shown, "no extra keys", f"holds {len(obj)} entries; at most {_MAX_KEYS}"
        )
    logical = 0
    for key, value in obj.items():
        if not isinstance(key, str):
            raise SubmissionRejected(shown, "state dict", f"has a non-string key {_key(key)}")
        if not isinstance(value, torch.Tensor) or value.layout != torch.strided:
            raise SubmissionRejected(
                shown,
                "state dict",
                f"key {_key(key)} is a {type(value).__name__}, not a dense tensor",
            )
        if value.dtype not in (torch.float32, torch.float64):
            raise SubmissionRejected(
                shown, "tensor dtype", f"key {_key(key)} has dtype {value.dtype}; expected float32"
            )
        logical += value.numel() * value.element_size()
    if logical > max_bytes:
        # torch.save stores whole storages, so honest tensors never hold more values
        # than the file has bytes; more means stride-0 views or shared storage.
        raise SubmissionRejected(
            shown,
            "size limit",
            f"its tensors hold {logical} bytes of values but the contract allows {max_bytes} "
            "(expanded views or shared storage)",
        )
    return {k: v.detach().contiguous().numpy().copy() for k, v in obj.items()}


def validate_tensors(
    tensors: dict[str, npt.NDArray[np.generic]], rules: list[TensorRule], shown: str
) -> Weights:
    """Exact key set, shapes, dtypes, finiteness; returns the arrays in the rules' dtypes."""
    expected = {r.key: r for r in rules}
    missing = [k for k in expected if k not in tensors]
    if missing:
        raise SubmissionRejected(
            shown, "required keys", f"missing key(s) {missing}; required: {list(expected)}"
        )
    extra = sorted(k for k in tensors if k not in expected)
    if extra:
        listed = ", ".join(_key(k) for k in extra[:10])
        more = f" and {len(extra) - 10} more" if len(extra) > 10 else ""
        raise SubmissionRejected(
            shown,
            "no extra keys",
            f"unexpected key(s) [{listed}]{more}; allowed: {list(expected)}",
        )
    out: Weights = {}
    for key, rule in expected.items():
        arr = tensors[key]
        if list(arr.shape) != rule.shape:
            raise SubmissionRejected(
                shown,
                "tensor shape",
                f"key {key!r} has shape {list(arr.shape)}; the contract requires {rule.shape}",
            )
        if arr.dtype.name != rule.dtype:
            raise SubmissionRejected(
                shown,
                "tensor dtype",
                f"key {key!r} has dtype {arr.dtype.name}; expected {rule.dtype}",
            )
        if not np.isfinite(arr).all():
            raise SubmissionRejected(shown, "finite values", f"key {key!r} contains NaN or inf")
        out[key] = np.ascontiguousarray(arr)
    return out


def load_weights(files: list[SnapshotFile], contract: SubmissionContract) -> Weights:
    """Load and validate the policy weights of a snapshot."""
    policy = next((f for f in files if f.role == "policy"), None)
    if policy is None:
        raise SubmissionRejected("policy", "required file", "no policy file in the submission")
    max_bytes = contract.file_for_role("policy").max_bytes
    if policy.format is FileFormat.SAFETENSORS:
        tensors = _load_safetensors(policy.path, policy.name)
    elif policy.format is FileFormat.TORCH_STATE_DICT:
        tensors = _load_torch(policy.path, policy.name, max_bytes)
    else:
        raise SubmissionRejected(policy.name, "format", f"{policy.format} is not a weights format")
    return validate_tensors(tensors, contract.tensors, policy.name)


# ------------------------------------------------------------------- YAML --


class _YamlLimit(Exception):
    def __init__(self, rule: str, detail: str) -> None:
        super().__init__(detail)
        self.rule = rule
        self.detail = detail


class _StrictLoader(yaml.SafeLoader):
    """The safe loader (no Python tags) that counts while it composes.

    Depth and alias counts are enforced during composition, before the document
    is built, so a deeply nested or alias-heavy input stops early instead of
    recursing past the interpreter's limit or expanding in memory.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.depth = 0
        self.aliases = 0
        self.nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > YAML_MAX_ALIASES:
                raise _YamlLimit(
                    "yaml aliases", f"uses more than {YAML_MAX_ALIASES} aliases (*name)"
                )
            return super().compose_node(parent, index)
        self.nodes += 1
        if self.nodes > YAML_MAX_NODES:
            raise _YamlLimit("yaml size", f"has more than {YAML_MAX_NODES} nodes")
        self.depth += 1
        try:
            if self.depth > YAML_MAX_DEPTH:
                raise _YamlLimit("yaml depth", f"nests deeper than {YAML_MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: set[tuple[str, str]] = set()
            for key_node, _ in node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    ident = (key_node.tag, key_node.value)
                    if ident in seen:
                        raise _YamlLimit(
                            "yaml duplicate keys",
                            f"mapping key {_key(key_node.value)} appears twice",
                        )
                    seen.add(ident)
        return super().construct_mapping(node, deep=deep)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _expanded_size(root: yaml.Node) -> int:
    """Nodes the document would have with every alias expanded; rejects cycles.

    Iterative and memoized over the node graph (aliases share node objects), so
    it costs one visit per node however large the expansion.
    """
    size: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        ident = id(node)
        if children_done:
            active.discard(ident)
            total = 1 + sum(size[id(c)] for c in _children(node))
            size[ident] = min(total, YAML_MAX_NODES + 1)
            continue
        if ident in size:
            continue
        if ident in active:
            raise _YamlLimit("yaml aliases", "an alias refers to a node that contains it")
        active.add(ident)
        stack.append((node, True))
        for child in _children(node):
            cid = id(child)
            if cid in active:
                raise _YamlLimit("yaml aliases", "an alias refers to a node that contains it")
            if cid not in size:
                stack.append((child, False))
    return size[id(root)]


def load_yaml_strict(path: Path, shown: str, max_bytes: int) -> object:
    """Parse one YAML document safely, or raise :class:`SubmissionRejected`.

    Rules (each names itself in the message): at most ``max_bytes`` bytes
    (``size limit``), UTF-8 (``utf-8``), well-formed YAML with only the safe
    tags, one document (``yaml format``), at most :data:`YAML_MAX_DEPTH` levels
    (``yaml depth``), :data:`YAML_MAX_ALIASES` aliases and no self-referencing
    alias (``yaml aliases``), :data:`YAML_MAX_NODES` nodes once aliases are
    expanded (``yaml expansion``), no repeated mapping key (``yaml duplicate
    keys``). Returns plain Python data for a strict schema to check next.
    """
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise SubmissionRejected(shown, "readable", f"cannot read: {exc.strerror}") from None
    if len(data) > max_bytes:
        raise SubmissionRejected(shown, "size limit", f"is over {max_bytes} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SubmissionRejected(
            shown, "utf-8", f"is not UTF-8 text (bad byte at offset {exc.start})"
        ) from None
    loader: _StrictLoader | None = None
    try:
        loader = _StrictLoader(text)  # the reader already refuses control characters
        node = loader.get_single_node()
        if node is None:
            return None
        expanded = _expanded_size(node)
        if expanded > YAML_MAX_NODES:
            raise _YamlLimit(
                "yaml expansion",
                f"expands to more than {YAML_MAX_NODES} nodes through its aliases",
            )
        return loader.construct_document(node)
    except _YamlLimit as exc:
        raise SubmissionRejected(shown, exc.rule, exc.detail) from None
    except yaml.YAMLError as exc:
        raise SubmissionRejected(shown, "yaml format", _first_line(exc)) from None
    except RecursionError:
        raise SubmissionRejected(
            shown, "yaml depth", f"nests deeper than {YAML_MAX_DEPTH} levels"
        ) from None
    finally:
        if loader is not None:
            loader.dispose()
