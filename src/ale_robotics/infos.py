"""Per-env info dicts on the wire: numeric entries as columns, everything else as JSON.

Encoding every env's info as a JSON object cost hundreds of microseconds per
64-env Step on each side (``json`` encoding on the server; decoding plus
Gymnasium's per-env ``_add_info`` on the client), about as much as the gRPC
round trip itself. Nearly all robotics infos are numbers (reward terms, ``success``), and
Gymnasium's vector API wants them as one array per key with a ``_key`` mask
anyway; so each such key travels as one :class:`~ale_robotics.v1.InfoColumn`
tensor, already in that layout, and only the rest (strings, nested dicts, ragged
arrays) as JSON.

Column dtypes are what ``VectorEnv._add_info`` would pick (a Python ``float``
gives float64, ``int`` int64, ``bool`` bool, a numpy value its own dtype), so a
remote vector env's infos equal ``SyncVectorEnv``'s, dtypes included. A key
whose values disagree in dtype or shape across envs (float32 in one env,
float64 in another) goes to JSON whole, so no per-env value is cast; its
vector array then has the dtype the JSON values give.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ale_robotics.tensors import from_tensor, to_tensor
from ale_robotics.v1 import ale_env_pb2 as pb

__all__ = [
    "RawColumn",
    "WireInfos",
    "decode_infos",
    "encode_infos",
    "full_mask",
    "info_columns",
    "scalar_column",
]

_PYTHON_SCALARS: dict[type, np.dtype[Any]] = {
    bool: np.dtype(np.bool_),
    int: np.dtype(np.int64),
    float: np.dtype(np.float64),
}
_TENSOR_DTYPES = frozenset(
    np.dtype(t) for t in ("float32", "float64", "float16", "int32", "int64", "uint8", "bool")
)
# Gymnasium gives this key an object array of per-env observations: keep its layout.
_NEVER_COLUMN = frozenset({"final_obs", "final_info"})


def _json_default(value: Any) -> Any:
    """numpy scalars and arrays as plain JSON numbers and lists; anything else as text."""
    if isinstance(value, np.generic | np.ndarray):
        return value.tolist()
    return str(value)


_ENCODER = json.JSONEncoder(default=_json_default)  # json.dumps(default=) builds one per call


def _info_to_json(info: Mapping[str, Any]) -> str:
    """One env's info as a JSON object; "" for an empty info (read back as ``{}``)."""
    return _ENCODER.encode(info) if info else ""


def _scalar_dtype(kind: type) -> np.dtype[Any] | None:
    dtype = _SCALAR_DTYPES.get(kind)
    if dtype is None and kind not in _SCALAR_DTYPES:
        dtype = _PYTHON_SCALARS.get(kind)
        if dtype is None and issubclass(kind, np.generic):
            dtype = np.dtype(kind)
        _SCALAR_DTYPES[kind] = dtype
    return dtype


def scalar_column(key: str, kind: type) -> tuple[np.dtype[Any], bool] | None:
    """``(dtype, python_scalars)`` of the column of ``key`` when every env's value is a scalar
    of type ``kind`` (what :func:`info_columns` decides for it, short of a Python int past
    int64), or None when such values travel as JSON."""
    if key in _NEVER_COLUMN:
        return None
    dtype = _scalar_dtype(kind)
    if dtype is None or dtype not in _TENSOR_DTYPES:
        return None
    return dtype, kind in _PYTHON_SCALARS


_SCALAR_DTYPES: dict[type, np.dtype[Any] | None] = {}
"""``_scalar_dtype`` of the types seen so far (a handful: numpy's and Python's scalars)."""


@functools.lru_cache(maxsize=64)
def _full_mask_tensor(num_envs: int) -> pb.Tensor:
    """Every env's mask set: most columns' (a key every env's info has)."""
    return to_tensor(np.ones(num_envs, dtype=np.bool_))


@functools.lru_cache(maxsize=64)
def _full_bytes(num_envs: int) -> bytes:
    """The data of a full mask's tensor (one true byte per env)."""
    return b"\x01" * num_envs


@functools.lru_cache(maxsize=64)
def full_mask(num_envs: int) -> npt.NDArray[np.bool_]:
    """A decoded full mask, shared by every column that has one (read-only)."""
    mask = np.ones(num_envs, dtype=np.bool_)
    mask.flags.writeable = False
    return mask


RawColumn = tuple[str, npt.NDArray[Any], npt.NDArray[np.bool_] | None, bool]
"""One info key of every env as plain arrays: ``(key, values [num_envs, ...], mask [num_envs]
or None when every env has the key, python_scalars)``; :class:`~ale_robotics.v1.InfoColumn`'s
fields before any encoding (the shared-memory data plane writes them as they are)."""


def _column(
    key: str, values: list[Any], where: list[int] | None, num_envs: int
) -> RawColumn | None:
    """The key's values (of envs ``where``; None: of every env, in order) as one column, or
    None when they cannot be one losslessly."""
    if key in _NEVER_COLUMN:
        return None
    kinds = set(map(type, values))
    first = values[0]
    if kinds == {np.ndarray}:
        dtype, shape = first.dtype, first.shape
        if any(v.dtype != dtype or v.shape != shape for v in values):
            return None
    else:
        dtypes = {_scalar_dtype(k) for k in kinds}  # float and np.float64 agree; f4 and f8 not
        if len(dtypes) != 1 or None in dtypes:
            return None
        dtype, shape = dtypes.pop(), ()
    if dtype not in _TENSOR_DTYPES:
        return None
    try:
        dense = np.array(values, dtype=dtype)
    except OverflowError:  # a Python int past int64: JSON keeps it exact
        return None
    python = kinds <= _PYTHON_SCALARS.keys()
    if where is None or len(where) == num_envs:
        return key, dense, None, python
    column = np.zeros((num_envs, *shape), dtype=dtype)
    column[where] = dense
    present = np.zeros(num_envs, dtype=np.bool_)
    present[where] = True
    return key, column, present, python


def _by_key(infos: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[Any], list[int] | None]]:
    """``(key, values, envs)`` for each key, in order of first appearance; ``envs`` None when
    every env has the key (then ``values`` has one per env, in env order)."""
    if not infos:
        return []
    keys = list(infos[0])
    if set(map(len, infos)) == {len(keys)}:
        # every env's info may have the same keys (a native stepper's always do): key by
        # key; same size and every one of env 0's keys present means the same keys
        try:
            return [(key, [info[key] for info in infos], None) for key in keys]
        except KeyError:
            pass
    by_key: dict[str, tuple[list[Any], list[int]]] = {}
    for i, info in enumerate(infos):
        for key, value in info.items():
            values, where = by_key.setdefault(key, ([], []))
            values.append(value)
            where.append(i)
    return [(key, values, where) for key, (values, where) in by_key.items()]


def info_columns(infos: Sequence[Mapping[str, Any]]) -> tuple[list[RawColumn], list[str]]:
    """``(columns, info_json)`` of ``len(infos)`` envs' infos: the numeric keys as plain
    columns, the rest as one JSON object per env ("" for none). The one place that decides
    what travels as a column, whatever the transport (:func:`encode_infos` for gRPC)."""
    n = len(infos)
    columns: list[RawColumn] = []
    rest: list[dict[str, Any]] | None = None
    for key, values, where in _by_key(infos):
        column = _column(key, values, where, n)
        if column is not None:
            columns.append(column)
            continue
        if rest is None:
            rest = [{} for _ in range(n)]
        for i, value in zip(range(n) if where is None else where, values, strict=True):
            rest[i][key] = value
    return columns, [_info_to_json(r) for r in rest] if rest is not None else [""] * n


def encode_infos(infos: Sequence[Mapping[str, Any]]) -> tuple[list[pb.InfoColumn], list[str]]:
    """``(info_columns, info_json)`` for a Reset or Step response of ``len(infos)`` envs."""
    n = len(infos)
    columns, rest = info_columns(infos)
    return [
        pb.InfoColumn(
            key=key,
            values=to_tensor(values),
            mask=_full_mask_tensor(n) if mask is None else to_tensor(mask),
            python_scalars=python,
        )
        for key, values, mask, python in columns
    ], rest


class WireInfos:
    """The infos of one response, decoded on demand into either of Gymnasium's two layouts."""

    def __init__(
        self,
        columns: list[tuple[str, npt.NDArray[Any], npt.NDArray[np.bool_], bool]],
        rest: list[str],
    ) -> None:
        self._columns = columns
        self._rest = rest
        self.num_envs = len(rest)

    def per_env(self) -> list[dict[str, Any]]:
        """One dict per env, as each env's ``step``/``reset`` returned it (``gym.Env`` API)."""
        out: list[dict[str, Any]] = [json.loads(s) if s else {} for s in self._rest]
        everyone = range(self.num_envs)
        for key, values, mask, python in self._columns:
            envs = everyone if mask is full_mask(self.num_envs) else np.flatnonzero(mask).tolist()
            if python:
                items = values.tolist()
                for i in envs:
                    out[i][key] = items[i]
            elif values.ndim == 1:  # a numpy scalar per env: indexing makes a new one
                for i in envs:
                    out[i][key] = values[i]
            else:  # an array per env: a copy, not a view of the wire buffer
                for i in envs:
                    out[i][key] = values[i].copy()
        return out

    def vector(
        self, add_info: Callable[[dict[str, Any], dict[str, Any], int], dict[str, Any]]
    ) -> dict[str, Any]:
        """Gymnasium's vector layout (``info[key]`` arrays, ``info["_key"]`` masks).

        ``add_info`` is the vector env's ``_add_info``, so the JSON entries get
        exactly Gymnasium's treatment (object arrays, nested dicts).
        """
        vector: dict[str, Any] = {}
        for key, values, mask, _ in self._columns:
            vector[key] = values.copy()
            vector[f"_{key}"] = mask.copy()
        for i, s in enumerate(self._rest):
            if s:
                vector = add_info(vector, json.loads(s), i)
        return vector


def decode_infos(columns: Sequence[pb.InfoColumn], info_json: Sequence[str]) -> WireInfos:
    """Check a response's info fields against each other; ValueError names what is off."""
    n = len(info_json)
    decoded: list[tuple[str, npt.NDArray[Any], npt.NDArray[np.bool_], bool]] = []
    full = _full_bytes(n)
    for c in columns:
        values = from_tensor(c.values, f"info column {c.key!r}")
        wire_mask = c.mask
        if wire_mask.data == full and wire_mask.dtype == pb.DTYPE_BOOL and wire_mask.shape == [n]:
            mask = full_mask(n)  # every env has the key (the usual case): no decoding
        else:
            mask = from_tensor(wire_mask, f"info mask {c.key!r}").view(np.bool_)
        if values.ndim < 1 or values.shape[0] != n or mask.shape != (n,) or mask.dtype != np.bool_:
            raise ValueError(
                f"malformed info column {c.key!r} from the server: values "
                f"{list(values.shape)}, mask {list(mask.shape)} {mask.dtype.name}, for {n} envs"
            )
        decoded.append((c.key, values, mask, c.python_scalars))
    return WireInfos(decoded, list(info_json))
