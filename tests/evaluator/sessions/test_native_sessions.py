"""Interactive sessions on the native MuJoCo stepper equal Gymnasium, step for step.

A session of a MuJoCo task whose env has a family steps its envs with
``rollouts.mujoco_rollout.stepper`` (``mj_step`` on each env's own ``MjData``, the
rest batched) instead of each env's ``env.step``. That must change nothing a client
or a result can see: for every such interactive task and every autoreset mode,
observations, rewards, flags and infos (keys, values, dtypes and Python-or-numpy
scalar types, ``final_obs``/``final_info``) equal ``SyncVectorEnv``'s and those of
a session stepping the same envs with ``env.step``, through terminations and
truncations at the step limit; eval results, including the episodes the agent
abandoned and the evaluator played out, equal those of ``env.step``. No gRPC here
(``tests/integration/test_vector_env_parity.py`` has it); the wire's info encoding
is applied, so what is compared is what a client would decode.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import ResetNeeded
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from ale_robotics.envs.make import make_env
from ale_robotics.evaluator import Evaluator, EvaluatorConfig
from ale_robotics.evaluator.sessions.envs import EnvLoop, make_envs, make_stepper
from ale_robotics.evaluator.sessions.types import Batch, SessionKind
from ale_robotics.evaluator.sessions.vector import Session
from ale_robotics.infos import decode_infos, encode_infos
from ale_robotics.model.result import EvalResult
from ale_robotics.rollouts.mujoco_rollout.families import FAMILIES
from ale_robotics.rollouts.mujoco_rollout.stepper import NativeStepper, stepper_for
from ale_robotics.seeds import new_secret
from ale_robotics.tasks import Registry, TaskMode, TaskSpec, default_registry

REG = default_registry()
NATIVE = sorted(
    e.spec.id
    for e in REG
    if e.spec.mode is TaskMode.INTERACTIVE
    and e.spec.simulator.name == "mujoco"
    and e.spec.env.gym_id in FAMILIES
)
LIMITS = {"td3-hopper-v1": 20, "td3-inverted-double-pendulum-v1": 7, "td3-reacher-v1": 20}
"""Step limits short enough that random actions end episodes both ways (a random Hopper
falls after 9-73 steps, a random double pendulum after 4-12; Reacher never terminates)."""
N = 6
MODES = {
    AutoresetMode.NEXT_STEP: "next_step",
    AutoresetMode.SAME_STEP: "same_step",
    AutoresetMode.DISABLED: "disabled",
}
"""Gymnasium's autoreset modes -> OpenSession's names for them."""


def test_every_mujoco_interactive_task_is_stepped_natively() -> None:
    assert NATIVE == ["td3-hopper-v1", "td3-inverted-double-pendulum-v1", "td3-reacher-v1"]
    for task_id in NATIVE:
        task = REG.get(task_id)
        envs = make_envs(task, 2)
        try:
            assert isinstance(make_stepper(task, envs), NativeStepper), task_id
        finally:
            for env in envs:
                env.close()


def test_other_tasks_keep_each_envs_own_step() -> None:
    """dm_control and Meta-World tasks (no family) step with ``env.step``, as before."""
    others = [
        e.spec
        for e in REG
        if e.spec.mode is TaskMode.INTERACTIVE and e.spec.env.gym_id not in FAMILIES
    ]
    assert {t.simulator.name for t in others} >= {"dm_control", "mujoco"}
    for task in others:
        assert stepper_for(task, []) is None
        assert isinstance(make_stepper(task, []), EnvLoop), task.id


def _limited(task_id: str, limit: int) -> TaskSpec:
    data = json.loads(REG.entry(task_id).raw)
    data["env"]["max_episode_steps"] = limit
    return Registry({"t.json": json.dumps(data).encode()}).get(task_id)


def _same(got: Any, want: Any, where: str = "", ordered: bool = True) -> None:
    """Equal values, types and dtypes, recursively (infos nest dicts and arrays); dict keys
    in the same order unless not ``ordered`` (vector infos: SyncVectorEnv's key order
    follows the envs' order of first reporting a key, which a remote env does not keep)."""
    if isinstance(want, dict):
        assert isinstance(got, dict), where
        assert list(got) == list(want) if ordered else got.keys() == want.keys(), where
        for key in want:
            _same(got[key], want[key], f"{where}.{key}", ordered)
    elif isinstance(want, np.ndarray):
        assert isinstance(got, np.ndarray), where
        assert got.dtype == want.dtype and got.shape == want.shape, where
        if want.dtype == object:
            for k, (g, w) in enumerate(zip(got, want, strict=True)):
                _same(g, w, f"{where}[{k}]", ordered)
        else:
            assert np.array_equal(got, want), where
    else:
        assert type(got) is type(want) and got == want, f"{where}: {got!r} != {want!r}"


FINAL = ("final_obs", "_final_obs", "final_info", "_final_info")


def _vector(infos: list[dict[str, Any]], sync: SyncVectorEnv) -> dict[str, Any]:
    """What SyncVectorEnv makes of these per-env infos (its own ``_add_info``)."""
    out: dict[str, Any] = {}
    for i, info in enumerate(infos):
        out = sync._add_info(out, info, i)
    return out


def _wire_vector(infos: list[dict[str, Any]], sync: SyncVectorEnv) -> dict[str, Any]:
    """The vector infos a client decodes from these infos on the wire, but ``final_*``
    (``final_info`` travels as JSON, which keeps no float32: the same on either stepper)."""
    out = decode_infos(*encode_infos(infos)).vector(sync._add_info)
    return {k: v for k, v in out.items() if k not in FINAL}


def _sessions(task: TaskSpec, mode: AutoresetMode, n: int = N) -> tuple[Session, Session]:
    """The same envs twice: a native session, and one stepping each env's ``env.step``."""

    def session(name: str) -> Session:
        return Session(
            name,
            task,
            SessionKind.PRACTICE,
            make_envs(task, n),
            float64_actions=True,
            autoreset_mode=MODES[mode],
        )

    native, plain = session("native"), session("plain")
    assert isinstance(native._stepper, NativeStepper)
    plain._stepper = EnvLoop(plain._envs)
    return native, plain


def _check(
    native: Batch, plain: Batch, want: tuple[Any, ...], sync: SyncVectorEnv, at: str
) -> None:
    """``native`` equals ``plain`` per env (key order and scalar types included) and
    ``want``, SyncVectorEnv's answer, as Gymnasium's vector layout and on the wire."""
    for got in (native, plain):
        _same(got.obs, want[0], f"{at} obs")
        if got.rewards is not None:
            assert got.terminated is not None and got.truncated is not None
            _same(got.rewards, np.asarray(want[1], dtype=np.float64), f"{at} rewards")
            _same(got.terminated, want[2], f"{at} terminated")
            _same(got.truncated, want[3], f"{at} truncated")
        _same(_vector(got.infos, sync), want[-1], f"{at} infos", ordered=False)
        wire = {k: v for k, v in want[-1].items() if k not in FINAL}
        _same(_wire_vector(got.infos, sync), wire, f"{at} wire infos", ordered=False)
    for i, (a, b) in enumerate(zip(native.infos, plain.infos, strict=True)):
        _same(a, b, f"{at} env {i} info")


@pytest.mark.parametrize("num_envs", [N, 1])
@pytest.mark.parametrize("mode", list(MODES), ids=list(MODES.values()))
@pytest.mark.parametrize("task_id", NATIVE)
def test_native_session_equals_sync_vector_env(
    task_id: str, mode: AutoresetMode, num_envs: int
) -> None:
    """Step for step over episodes that end by termination and by truncation at the limit,
    float32 and float64 actions alternating; DISABLED restarts ended envs with a reset_mask.
    One env takes the stepper's single-env path (its own ``env.step``)."""
    limit = LIMITS[task_id]
    task = _limited(task_id, limit)
    native, plain = _sessions(task, mode, num_envs)
    sync = SyncVectorEnv([lambda: make_env(task.env)] * num_envs, autoreset_mode=mode)
    rng = np.random.default_rng(7)
    space = sync.single_action_space
    ends = {"terminated": 0, "truncated": 0}
    try:
        _check(native.reset([21]), plain.reset([21]), sync.reset(seed=21), sync, "reset")
        for step in range(4 * limit * N // num_envs):  # as many env steps at any num_envs
            dtype = np.float32 if step % 2 else np.float64
            action = rng.uniform(space.low, space.high, (num_envs, *space.shape)).astype(dtype)
            want = sync.step(action)
            _check(native.step(action), plain.step(action), want, sync, f"step {step}")
            ends["terminated"] += int(want[2].sum())
            ends["truncated"] += int(want[3].sum())
            done = want[2] | want[3]
            if mode is AutoresetMode.DISABLED and done.any():
                mask = [bool(d) for d in done]
                _check(
                    native.reset([], mask),
                    plain.reset([], mask),
                    sync.reset(options={"reset_mask": done}),
                    sync,
                    f"masked reset {step}",
                )
    finally:
        native.close("test")
        plain.close("test")
        sync.close()
    assert ends["truncated"] > 0, "episodes should reach the step limit"
    if task.env.gym_id != "Reacher-v5":  # Reacher never terminates
        assert ends["terminated"] > 0, "some episodes should terminate"


def _eval(tmp: Path, secret: bytes, task_id: str, native: bool) -> EvalResult:
    """An eval session that takes random actions, abandons one running episode with a Reset
    and closes with the rest unplayed: the evaluator plays all that out."""
    (tmp / "state").mkdir(parents=True)
    (tmp / "state" / "secret").write_bytes(secret)
    ev = Evaluator(EvaluatorConfig(tmp / "state", None, workers=1, smoke_episodes=6), REG)
    try:
        task = ev.task(task_id)
        s = ev.sessions.open(task, SessionKind.EVAL, 2, "run-native-1")
        assert isinstance(s._stepper, NativeStepper)
        if not native:
            s._stepper = EnvLoop(s._envs)
        rng = np.random.default_rng(3)
        act = s._envs[0].action_space

        def steps(k: int) -> None:
            for _ in range(k):
                s.step(rng.uniform(act.low, act.high, s.action_shape).astype(s.action_dtype))

        s.reset([])
        steps(4)
        s.reset([], [False, True])  # env 1's episode abandoned after 4 steps (or ended)
        steps(3)
        ev.sessions.close(s.id)
        return ev.result("", "run-native-1")
    finally:
        ev.stop()


@pytest.mark.parametrize("task_id", NATIVE)
def test_eval_results_and_played_out_episodes_equal_gymnasiums(
    tmp_path: Path, task_id: str
) -> None:
    secret = new_secret()
    got = _eval(tmp_path / "native", secret, task_id, native=True)
    want = _eval(tmp_path / "plain", secret, task_id, native=False)
    assert got.state == want.state == "SUCCEEDED", got.failure_reason
    assert got.metrics == want.metrics
    assert [e.model_dump() for e in got.episodes] == [e.model_dump() for e in want.episodes]
    assert any(e.abandoned for e in got.episodes) and len(got.episodes) == 6


def test_wrapper_state_is_gymnasiums() -> None:
    """A step before reset raises Gymnasium's ResetNeeded; the TimeLimit wrapper counts the
    native steps, so a plain ``env.step`` after them truncates exactly at the limit."""
    task = _limited("td3-reacher-v1", limit=5)
    envs = make_envs(task, 2)
    stepper = stepper_for(task, envs)
    assert stepper is not None
    zero = np.zeros((2, *envs[0].action_space.shape), np.float32)
    with pytest.raises(ResetNeeded):
        stepper.step([0, 1], zero)
    for k, env in enumerate(envs):
        env.reset(seed=k)
    for _ in range(3):
        *_, truncated, _ = stepper.step([0, 1], zero)
        assert not truncated.any()
    assert [env._elapsed_steps for env in envs] == [3, 3]
    assert not envs[0].step(zero[0])[3]  # step 4
    *_, truncated, _ = stepper.step([1, 0], zero)  # env 1's 4th, env 0's 5th
    assert truncated.tolist() == [False, True]
    assert envs[1].step(zero[1])[3]  # env 1's 5th, by Gymnasium


def test_envs_it_cannot_step_exactly_get_no_native_stepper() -> None:
    """An extra wrapper would be skipped by the native step: such envs keep ``env.step``."""
    task = REG.get("td3-reacher-v1")
    wrapped = [gym.wrappers.ClipAction(make_env(task.env))]
    assert stepper_for(task, wrapped) is None
    assert isinstance(make_stepper(task, wrapped), EnvLoop)


@pytest.mark.parametrize("task_id", NATIVE)
def test_native_session_split_over_two_threads_equals_sync_vector_env(
    task_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The physics of a large Step runs on two threads (here forced down to N envs): still
    equal to SyncVectorEnv step for step, and the helper thread ends with the session."""
    import threading

    import ale_robotics.rollouts.mujoco_rollout.stepper as stepper_module

    monkeypatch.setattr(stepper_module, "_SPLIT_AT", 2)
    monkeypatch.setattr(stepper_module.os, "cpu_count", lambda: 2)
    test_native_session_equals_sync_vector_env(task_id, AutoresetMode.SAME_STEP, N)
    assert not [t for t in threading.enumerate() if t.name.startswith("ale-native-step")]
