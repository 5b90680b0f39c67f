"""Physics-only cost of one env step on a given MuJoCo library, through its C API (ctypes).

Used by both sides of ``benchmarks/vs_envpool.py`` so that the two MuJoCo versions are
timed by the very same loop: ours is ``libmujoco.so`` of the project's ``mujoco`` (3.3),
EnvPool's is the MuJoCo statically linked into its ``mujoco_gym_envpool.so`` (3.6 in
EnvPool 1.2.5), whose ``mj_*`` symbols that extension exports. Nothing here imports
``mujoco`` or EnvPool, only numpy and ctypes, so either venv can run it.

What is timed: a replay of recorded episodes (the ``qpos``/``qvel`` before every control step
and the action the policy took there, recorded by the driver on Gymnasium's env), each control
step being ``mj_setState`` of that state and action, then ``frame_skip`` calls of ``mj_step``
(so that both versions step from the very same states: open loop, a gait or a fall would drift
apart between them), after a ``mj_resetData`` and ``mj_forward`` per episode; on one thread,
in CPU time (``time.thread_time``). The same loop run with do-nothing ctypes calls in place
of MuJoCo's (the Python loop and the ctypes calls themselves) is subtracted, so the figure is
MuJoCo's own.
"""

from __future__ import annotations

import ctypes
import time
from typing import Any

import numpy as np

__all__ = ["physics_us_per_step"]

# mjtState bits of qpos and qvel (stable across MuJoCo 3.x); ctrl's moved (see _ctrl_bit)
STATE_QPOS, STATE_QVEL = 1 << 1, 1 << 2

_DOUBLES = ctypes.POINTER(ctypes.c_double)


def _bind(lib: Any) -> None:
    lib.mj_loadXML.restype = ctypes.c_void_p
    lib.mj_loadXML.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    lib.mj_makeData.restype = ctypes.c_void_p
    lib.mj_makeData.argtypes = [ctypes.c_void_p]
    for name in ("mj_step", "mj_forward", "mj_resetData", "mj_deleteData"):
        getattr(lib, name).argtypes = [ctypes.c_void_p] * (1 if name == "mj_deleteData" else 2)
    lib.mj_deleteModel.argtypes = [ctypes.c_void_p]
    lib.mj_stateSize.restype = ctypes.c_int
    lib.mj_stateSize.argtypes = [ctypes.c_void_p, ctypes.c_uint]
    lib.mj_setState.argtypes = [ctypes.c_void_p, ctypes.c_void_p, _DOUBLES, ctypes.c_uint]
    lib.mj_versionString.restype = ctypes.c_char_p


def _ctrl_bit(lib: Any, model: int, nv: int, nu: int) -> int:
    """mjSTATE_CTRL: the bit after mjSTATE_WARMSTART (nv values) holding nu values; 1 << 5
    in MuJoCo 3.3, 1 << 6 in 3.6 (which added a state component before them)."""
    for bit in range(5, 9):
        if (
            lib.mj_stateSize(model, 1 << bit) == nu
            and lib.mj_stateSize(model, 1 << (bit - 1)) == nv
        ):
            return 1 << bit
    raise RuntimeError("no mjSTATE_CTRL bit found in this MuJoCo")


def _replay(
    lib: Any,
    model: int,
    data: int,
    replay: dict[str, Any],
    frame_skip: int,
    ctrl: int,
    real: bool,
) -> float:
    """CPU seconds of the replay loop; with ``real`` False the same loop with every MuJoCo
    call replaced by a ctypes call of the same arity that does nothing (``mj_stateSize`` of
    an empty spec, ``mj_setState`` of an empty spec): the loop's and ctypes' own cost."""
    if real:
        step, reset, forward, arg, spec = lib.mj_step, lib.mj_resetData, lib.mj_forward, data, ctrl
        qpos, qvel = STATE_QPOS, STATE_QVEL
    else:
        step = reset = forward = lib.mj_stateSize
        arg = spec = qpos = qvel = 0
    set_state, qpos_at, qvel_at, ptr = (
        lib.mj_setState,
        replay["qpos"],
        replay["qvel"],
        replay["ptr"],
    )
    at = 0
    t0 = time.thread_time()
    for length in replay["lengths"]:
        reset(model, arg)
        set_state(model, data, qpos_at[at], qpos)
        set_state(model, data, qvel_at[at], qvel)
        forward(model, arg)
        for t in range(at, at + length):
            set_state(model, data, qpos_at[t], qpos)
            set_state(model, data, qvel_at[t], qvel)
            set_state(model, data, ptr[t], spec)
            for _ in range(frame_skip):
                step(model, arg)
        at += length
    return time.thread_time() - t0


def physics_us_per_step(
    lib_path: str, xml: str, frame_skip: int, replay: dict[str, np.ndarray], seconds: float
) -> dict[str, Any]:
    """MuJoCo's own CPU µs per env step (``frame_skip`` substeps) on ``xml``, replaying
    ``replay`` (``qpos`` (T, nq), ``qvel`` (T, nv), ``actions`` (T, nu), ``lengths`` (episodes,))
    until ``seconds`` of CPU; with the library's version and the loop's own cost."""
    lib = ctypes.CDLL(lib_path)
    _bind(lib)
    err = ctypes.create_string_buffer(1000)
    model = lib.mj_loadXML(xml.encode(), None, err, len(err))
    if not model:
        raise RuntimeError(f"{lib_path} could not load {xml}: {err.value.decode()}")
    data = lib.mj_makeData(model)
    arrays = [
        np.ascontiguousarray(replay[k], dtype=np.float64) for k in ("qpos", "qvel", "actions")
    ]
    nq, nv, nu = (a.shape[1] for a in arrays)
    ctrl = _ctrl_bit(lib, model, nv, nu)
    sizes = [lib.mj_stateSize(model, s) for s in (STATE_QPOS, STATE_QVEL, ctrl)]
    if sizes != [nq, nv, nu]:
        raise RuntimeError(f"{xml}: state sizes {sizes} do not match the replay's")
    qpos_at, qvel_at, ptr = ([row.ctypes.data_as(_DOUBLES) for row in a] for a in arrays)
    loop = {
        "qpos": qpos_at,
        "qvel": qvel_at,
        "ptr": ptr,
        "lengths": [int(n) for n in replay["lengths"]],
    }
    real = noop = 0.0
    repeats = 0
    while repeats == 0 or real + noop < seconds:
        real += _replay(lib, model, data, loop, frame_skip, ctrl, real=True)
        noop += _replay(lib, model, data, loop, frame_skip, ctrl, real=False)
        repeats += 1
    steps = sum(loop["lengths"]) * repeats
    lib.mj_deleteData(data)
    lib.mj_deleteModel(model)
    return {
        "us_per_step": (real - noop) / steps * 1e6,
        "loop_cost_us": noop / steps * 1e6,
        "steps": steps,
        "mujoco": lib.mj_versionString().decode(),
        "xml": xml,
    }
