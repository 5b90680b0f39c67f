"""The bad-input corpus, each case submitted to a real evaluator over real Unix sockets.

Every file is generated here (no binary blobs). Each case must end REJECTED,
blamed on the submission, with a message naming the file (or path) and the rule;
no payload may run (a marker file it would create never appears); and the
evaluator must then evaluate a valid submission successfully, which fails if a
case killed the job runner or left it stuck.
"""

from __future__ import annotations

import itertools
import json
import os
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path

import grpc
import numpy as np
import pytest
import torch
from hardening_helpers import (
    TASK_ID,
    agent,
    official,
    stable_weights,
    submit_path,
    wait,
    write_policy,
)
from helpers import random_weights
from safetensors.numpy import save_file

from ale_robotics.evaluator import RunningEvaluator
from ale_robotics.rollouts.weights import (
    YAML_MAX_ALIASES,
    YAML_MAX_DEPTH,
    load_yaml_strict,
)
from ale_robotics.submission.rejected import SubmissionRejected
from ale_robotics.tasks import TaskSpec

MAX_BYTES = 4 * 1024 * 1024  # the contract's policy limit
_tokens = itertools.count()


class _Payload:
    """Pickles as ``fn(arg)``: what a hostile torch file runs on a plain ``torch.load``."""

    def __init__(self, fn: Callable[..., object], arg: str) -> None:
        self.fn = fn
        self.arg = arg

    def __reduce__(self) -> tuple[Callable[..., object], tuple[str]]:
        return (self.fn, (self.arg,))


def _st_raw(header: dict | bytes, data: bytes, header_len: int | None = None) -> bytes:
    """A safetensors file written by hand, so its header can lie."""
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    n = len(raw) if header_len is None else header_len
    return struct.pack("<Q", n) + raw + data


def _valid_header(task: TaskSpec, override: dict) -> tuple[dict, bytes]:
    """A header for the contract's six tensors (zeros), with one entry replaced."""
    assert task.contract is not None
    header: dict = {}
    offset = 0
    for rule in task.contract.tensors:
        size = int(np.prod(rule.shape)) * 4
        header[rule.key] = {
            "dtype": "F32",
            "shape": rule.shape,
            "data_offsets": [offset, offset + size],
        }
        offset += size
    header.update(override)
    return header, b"\0" * offset


def _torch(path: Path, sd: dict) -> None:
    torch.save(sd, path)


def _tw(w: dict) -> dict:
    return {k: torch.from_numpy(np.asarray(v)) for k, v in w.items()}


Setup = Callable[[Path, Path, TaskSpec, Path], str]
"""(volume, case dir, task, marker) -> submission_path relative to the volume."""


def _in_case(write: Callable[[Path, TaskSpec, Path], None]) -> Setup:
    def setup(volume: Path, case: Path, task: TaskSpec, marker: Path) -> str:
        case.mkdir()
        write(case, task, marker)
        return case.name

    return setup


def _weights(mutate: Callable[[dict], object], fmt: str = "st") -> Setup:
    def write(case: Path, task: TaskSpec, marker: Path) -> None:
        w = random_weights(task)
        mutate(w)
        if fmt == "st":
            save_file(w, str(case / "policy.safetensors"))
        else:
            _torch(case / "policy.pt", _tw(w))

    return _in_case(write)


def _pickle_os_system(case: Path, task: TaskSpec, marker: Path) -> None:
    _torch(case / "policy.pt", {"l1.weight": _Payload(os.system, f"touch {marker}")})


def _pickle_builtin_exec(case: Path, task: TaskSpec, marker: Path) -> None:
    code = f"open({str(marker)!r}, 'w').write('pwned')"
    _torch(case / "policy.pt", {"l1.weight": _Payload(exec, code)})


def _zip_bomb(case: Path, task: TaskSpec, marker: Path) -> None:
    with zipfile.ZipFile(case / "policy.pt", "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("archive/data.pkl", b"\0" * (64 * 1024 * 1024))  # ~64 KiB on disk


def _zip_lying_size(case: Path, task: TaskSpec, marker: Path) -> None:
    """A stored zip whose central directory claims a 2 GiB member."""
    path = case / "policy.pt"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("archive/data.pkl", b"x" * 100)
    data = bytearray(path.read_bytes())
    cd = data.index(b"PK\x01\x02")
    data[cd + 24 : cd + 28] = struct.pack("<I", 0x7FFFFFFF)  # uncompressed size
    path.write_bytes(bytes(data))


def _torch_expand_bomb(case: Path, task: TaskSpec, marker: Path) -> None:
    """1.3 KB on disk, 4 GB once made contiguous: a stride-0 view."""
    sd = _tw(random_weights(task))
    sd["l1.weight"] = torch.zeros(1).expand(100_000, 10_000)
    _torch(case / "policy.pt", sd)


def _torch_shared_storage(case: Path, task: TaskSpec, marker: Path) -> None:
    """200 keys viewing one 4 MB storage: 800 MB of values from a 4 MB file."""
    big = torch.zeros(1_000_000)
    _torch(case / "policy.pt", {f"k{i}": big[:] for i in range(200)})


def _symlink_outside(volume: Path, case: Path, task: TaskSpec, marker: Path) -> str:
    case.mkdir()
    outside = volume.parent / "outside.safetensors"
    save_file(random_weights(task), str(outside))
    os.symlink(outside, case / "policy.safetensors")
    return case.name


def _symlink_to_secret(volume: Path, case: Path, task: TaskSpec, marker: Path) -> str:
    case.mkdir()
    os.symlink(volume.parent / "state" / "secret", case / "policy.safetensors")
    return case.name


def _hardlink_outside(volume: Path, case: Path, task: TaskSpec, marker: Path) -> str:
    case.mkdir()
    outside = volume.parent / f"hard-{case.name}.safetensors"
    save_file(random_weights(task), str(outside))
    os.link(outside, case / "policy.safetensors")
    return case.name


def _symlinked_dir(volume: Path, case: Path, task: TaskSpec, marker: Path) -> str:
    elsewhere = volume.parent / f"elsewhere-{case.name}"
    write_policy(elsewhere, random_weights(task))
    os.symlink(elsewhere, case)
    return case.name


def _path(rel: str) -> Setup:
    return lambda volume, case, task, marker: rel


def _oversized_sparse(case: Path, task: TaskSpec, marker: Path) -> None:
    with open(case / "policy.safetensors", "wb") as fh:
        fh.truncate(1 << 40)  # 1 TiB, sparse: no disk used


def _non_utf8_name(volume: Path, case: Path, task: TaskSpec, marker: Path) -> str:
    case.mkdir()
    save_file(random_weights(task), os.fsdecode(bytes(case) + b"/policy\xff.safetensors"))
    return case.name


def _truncated(case: Path, task: TaskSpec, marker: Path) -> None:
    path = case / "policy.safetensors"
    save_file(random_weights(task), str(path))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _raw(blob: Callable[[TaskSpec], bytes], name: str = "policy.safetensors") -> Setup:
    return _in_case(lambda case, task, marker: (case / name).write_bytes(blob(task)))


def _header_override(key: str, entry: dict) -> Callable[[TaskSpec], bytes]:
    def blob(task: TaskSpec) -> bytes:
        header, data = _valid_header(task, {key: entry})
        return _st_raw(header, data)

    return blob


# (id, setup, text naming the file or path, rule)
CASES: list[tuple[str, Setup, str, str]] = [
    ("pickle-os-system", _in_case(_pickle_os_system), "policy.pt", "weights_only torch load"),
    ("pickle-exec", _in_case(_pickle_builtin_exec), "policy.pt", "weights_only torch load"),
    ("zip-bomb", _in_case(_zip_bomb), "policy.pt", "no compression"),
    ("zip-lying-size", _in_case(_zip_lying_size), "policy.pt", "size limit"),
    ("torch-expand-bomb", _in_case(_torch_expand_bomb), "policy.pt", "size limit"),
    ("torch-shared-storage", _in_case(_torch_shared_storage), "policy.pt", "size limit"),
    ("symlink-outside", _symlink_outside, "policy.safetensors", "no symlinks"),
    ("symlink-to-secret", _symlink_to_secret, "policy.safetensors", "no symlinks"),
    ("hardlink-outside", _hardlink_outside, "policy.safetensors", "no hard links"),
    ("symlinked-dir", _symlinked_dir, "case-symlinked-dir", "no symlinks"),
    ("dotdot", _path("../"), "../", "path"),
    ("dotdot-nested", _path("a/../../x"), "a/../../x", "path"),
    ("absolute", _path("/etc"), "/etc", "path"),
    ("nul-byte", _path("a\x00b"), "a\\x00b", "path"),
    ("overlong-path", _path("x/" * 600), "...", "path"),
    ("control-chars-path", _path("\n\t\x1b[31m"), "\\n\\t\\x1b", "path"),
    (
        "oversized",
        _raw(lambda task: b"\0" * (MAX_BYTES + 1)),
        "policy.safetensors",
        "size limit",
    ),
    ("oversized-sparse", _in_case(_oversized_sparse), "policy.safetensors", "size limit"),
    ("empty", _raw(lambda task: b""), "policy.safetensors", "non-empty"),
    (
        "directory-as-file",
        _in_case(lambda case, task, marker: (case / "policy.safetensors").mkdir()),
        "policy.safetensors",
        "regular file",
    ),
    (
        "fifo",
        _in_case(lambda case, task, marker: os.mkfifo(case / "policy.pt")),
        "policy.pt",
        "regular file",
    ),
    ("non-utf8-name", _non_utf8_name, "policy.safetensors or policy.pt", "required file"),
    (
        "two-files",
        _in_case(
            lambda case, task, marker: (
                save_file(random_weights(task), str(case / "policy.safetensors")),
                _torch(case / "policy.pt", _tw(random_weights(task))),
            )
        ),
        "policy.safetensors and policy.pt",
        "one file per role",
    ),
    (
        "dtype-float64",
        _weights(lambda w: w.update({"l3.bias": np.zeros(1, np.float64)})),
        "policy.safetensors",
        "tensor dtype",
    ),
    (
        "dtype-int32",
        _weights(lambda w: w.update({"l1.bias": np.zeros(400, np.int32)})),
        "policy.safetensors",
        "tensor dtype",
    ),
    (
        "dtype-float16-torch",
        _in_case(
            lambda case, task, marker: _torch(
                case / "policy.pt",
                {k: v.half() for k, v in _tw(random_weights(task)).items()},
            )
        ),
        "policy.pt",
        "tensor dtype",
    ),
    (
        "dtype-bf16",
        _raw(_header_override("l3.bias", {"dtype": "BF16", "shape": [2], "data_offsets": [0, 0]})),
        "policy.safetensors",
        "safetensors format",
    ),
    (
        "dtype-float8",
        _raw(
            lambda task: _st_raw(
                {"l1.bias": {"dtype": "F8_E4M3", "shape": [4], "data_offsets": [0, 4]}},
                b"\0" * 4,
            )
        ),
        "policy.safetensors",
        "safetensors format",
    ),
    (
        "shape",
        _weights(lambda w: w.update({"l1.weight": np.zeros((400, 3), np.float32)})),
        "l1.weight",
        "tensor shape",
    ),
    ("missing-key", _weights(lambda w: w.pop("l2.bias")), "l2.bias", "required keys"),
    (
        "extra-key",
        _weights(lambda w: w.update({"x" * 5000: np.zeros(1, np.float32)})),
        "policy.safetensors",
        "no extra keys",
    ),
    (
        "nan",
        _weights(lambda w: w["l2.weight"].__setitem__((3, 3), np.nan)),
        "l2.weight",
        "finite values",
    ),
    (
        "inf-torch",
        _weights(lambda w: w["l1.bias"].__setitem__(0, -np.inf), fmt="pt"),
        "l1.bias",
        "finite values",
    ),
    ("truncated", _in_case(_truncated), "policy.safetensors", "safetensors format"),
    (
        "header-length-huge",
        _raw(lambda task: _st_raw({}, b"", header_len=1 << 62)),
        "policy.safetensors",
        "safetensors format",
    ),
    (
        "header-offsets-past-end",
        _raw(
            _header_override(
                "l1.bias", {"dtype": "F32", "shape": [400], "data_offsets": [0, 1 << 40]}
            )
        ),
        "policy.safetensors",
        "safetensors format",
    ),
    (
        "header-shape-overflow",
        _raw(
            _header_override(
                "l1.bias", {"dtype": "F32", "shape": [1 << 62, 1 << 62], "data_offsets": [0, 4]}
            )
        ),
        "policy.safetensors",
        "safetensors format",
    ),
    (
        "header-not-json",
        _raw(lambda task: _st_raw(b"{\xff\xfe", b"")),
        "policy.safetensors",
        "safetensors format",
    ),
    (
        "plain-pickle-as-pt",
        _raw(lambda task: b"\x80\x04K\x01.", name="policy.pt"),
        "policy.pt",
        "torch state dict format",
    ),
    (
        "torch-not-a-dict",
        _in_case(lambda case, task, marker: _torch(case / "policy.pt", [torch.zeros(1)])),
        "policy.pt",
        "state dict",
    ),
]


@pytest.fixture(scope="module")
def valid_dir(shared_evaluator: RunningEvaluator, task: TaskSpec) -> str:
    volume = shared_evaluator.evaluator.config.submission_volume
    assert volume is not None
    write_policy(volume / "valid", random_weights(task, seed=3, scale=0.3))
    return "valid"


@pytest.mark.parametrize(
    ("setup", "needle", "rule"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_submission_is_rejected_and_service_goes_on(
    shared_evaluator: RunningEvaluator,
    task: TaskSpec,
    valid_dir: str,
    setup: Setup,
    needle: str,
    rule: str,
    request: pytest.FixtureRequest,
) -> None:
    volume = shared_evaluator.evaluator.config.submission_volume
    assert volume is not None
    case_id = request.node.callspec.id
    marker = volume.parent / f"PWNED-{case_id}"
    rel = setup(volume, volume / f"case-{case_id}", task, marker)
    with agent(shared_evaluator) as c:
        st = wait(c, submit_path(c, rel, f"bad-{next(_tokens)}"))
        assert st.state == "REJECTED", st
        assert st.failure_source == "submission"
        assert needle in st.failure_reason, st.failure_reason
        assert f"(rule: {rule})" in st.failure_reason, st.failure_reason
        assert len(st.failure_reason) < 1000  # agent-chosen text is bounded, never echoed whole
        assert not marker.exists(), "the payload ran"
        good = wait(c, submit_path(c, valid_dir, f"good-{next(_tokens)}"))
        assert good.state == "SUCCEEDED", good
    assert not list(volume.parent.glob("PWNED*"))


def test_weird_but_valid_unicode_path_is_evaluated(
    shared_evaluator: RunningEvaluator, task: TaskSpec
) -> None:
    volume = shared_evaluator.evaluator.config.submission_volume
    assert volume is not None
    rel = "dir with spaces/ünïcødé-✓"
    write_policy(volume / rel, random_weights(task, seed=4, scale=0.3))
    with agent(shared_evaluator) as c:
        assert wait(c, submit_path(c, rel, "unicode")).state == "SUCCEEDED"


def test_non_utf8_submission_path_is_invalid_argument_not_internal(
    shared_evaluator: RunningEvaluator,
) -> None:
    """Protobuf strings must be UTF-8; a path that is not cannot even be parsed.

    Sent as raw bytes (the Python client refuses to encode it), it must come back
    INVALID_ARGUMENT, not grpc-python's default INTERNAL, and create no job.
    """
    # field 3 (submission_path) = b"\xff\xfe", field 4 (client_token) = "k"
    body = b"\x1a\x02\xff\xfe" + b"\x22\x01k"
    with grpc.insecure_channel(shared_evaluator.agent_address) as ch:
        call = ch.unary_unary(
            "/ale_robotics.v1.AleEnv/SubmitBatchEval",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        with pytest.raises(grpc.RpcError) as info:
            call(
                body,
                metadata=(("authorization", f"Bearer {shared_evaluator.agent_token}"),),
                timeout=10,
            )
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "not a valid protobuf message" in (info.value.details() or "")
    assert (
        shared_evaluator.evaluator.store.by_token(
            shared_evaluator.evaluator.config.run_id or "", "k"
        )
        is None
    )


def test_good_policy_after_all_is_still_scored_well(
    shared_evaluator: RunningEvaluator, task: TaskSpec
) -> None:
    """The runner is intact after the corpus: a balancing policy gets the full return."""
    volume = shared_evaluator.evaluator.config.submission_volume
    assert volume is not None
    write_policy(volume / "stable", stable_weights(task))
    with agent(shared_evaluator) as c:
        job = submit_path(c, "stable", "stable")
        assert wait(c, job).state == "SUCCEEDED"
    res = official(shared_evaluator.harness_address, shared_evaluator.harness_token, job)
    assert res.metrics["mean_return"] == 1000.0
    assert task.id == TASK_ID


# ---------------------------------------------------------------- YAML --


def _yaml(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "config.yaml"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def _laughs(levels: int, fan: int) -> str:
    lines = [f"l0: &l0 [{', '.join(['lol'] * fan)}]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * fan)}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        (_laughs(9, 9), "yaml aliases"),  # the classic: 72 aliases, 9^9 nodes
        (_laughs(6, 9), "yaml expansion"),  # few enough aliases, still 9^6 nodes
        ("a: &a [*a]\n", "yaml aliases"),
        ("[" * 5000 + "]" * 5000, "yaml depth"),
        ("a:\n" + "".join("  " * i + "- \n" for i in range(1, YAML_MAX_DEPTH + 5)), "yaml depth"),
        ("a: 1\na: 2\n", "yaml duplicate keys"),
        ("a: 1\n---\nb: 2\n", "yaml format"),
        ("a: [\n", "yaml format"),
        ("a: \x07\n", "yaml format"),
        (b"a: \xff\xfe\n", "utf-8"),
        ("x" * 2000, "size limit"),
        ("a: &x 1\nb: [" + ", ".join(["*x"] * (YAML_MAX_ALIASES + 1)) + "]\n", "yaml aliases"),
    ],
    ids=[
        "billion-laughs",
        "million-laughs",
        "recursive-alias",
        "deep-flow",
        "deep-block",
        "duplicate-key",
        "two-documents",
        "malformed",
        "control-char",
        "not-utf8",
        "oversized",
        "too-many-aliases",
    ],
)
def test_yaml_limits(tmp_path: Path, text: str | bytes, rule: str) -> None:
    with pytest.raises(SubmissionRejected) as info:
        load_yaml_strict(
            _yaml(tmp_path, text), "config.yaml", 1000 if rule == "size limit" else 1 << 16
        )
    assert info.value.rule == rule
    assert str(info.value).startswith("config.yaml: ")


def test_yaml_python_tags_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    for text in (
        f"!!python/object/apply:os.system ['touch {marker}']\n",
        f"a: !!python/object/new:os.system ['touch {marker}']\n",
        "!!python/name:os.system\n",
    ):
        with pytest.raises(SubmissionRejected) as info:
            load_yaml_strict(_yaml(tmp_path, text), "config.yaml", 1 << 16)
        assert info.value.rule == "yaml format"
    assert not marker.exists()


def test_yaml_valid_document_loads(tmp_path: Path) -> None:
    text = "lr: 0.001\nlayers: [400, 300]\nbase: &b {act: relu}\nhead:\n  <<: *b\n  out: tanh\n"
    assert load_yaml_strict(_yaml(tmp_path, text), "config.yaml", 1 << 16) == {
        "lr": 0.001,
        "layers": [400, 300],
        "base": {"act": "relu"},
        "head": {"act": "relu", "out": "tanh"},
    }
    assert load_yaml_strict(_yaml(tmp_path, ""), "config.yaml", 1 << 16) is None
