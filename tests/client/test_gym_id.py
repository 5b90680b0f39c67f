"""The Gymnasium id the docs register pastes safely into common RL code (issue 34).

The TD3 authors' ``main.py`` (github.com/sfujim/TD3) names everything it writes after
the env id (``f"{policy}_{env}_{seed}"`` under ``./results`` and ``./models``), and
makes its envs with ``gym.make(env)``. With the README's old id ``ale/Hopper-v1`` it
died on ``./results/TD3_ale/Hopper-v1_0.npy`` (no such directory). The test below
does what that script does with the id, in Gymnasium's API, for a few steps against a
real evaluator: the same file names, the same calls.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.registration import parse_env_id
from helpers import run_bound_evaluator

from ale_robotics.tasks import Registry

ROOT = Path(__file__).resolve().parents[2]
RUN = "run-gym-id-1"
_REGISTER = re.compile(r"""gym\.register\(\s*["']([^"']+)["']""")
_GYM_ID_CONSTANT = re.compile(r"""^GYM_ID = ["']([^"']+)["']""", re.MULTILINE)


def _docs_text() -> str:
    """The README and the manual in docs/ (where the Gymnasium section lives)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return "\n".join(p.read_text() for p in pages)


def _documented_ids() -> dict[str, list[str]]:
    """Every Gymnasium id the docs and examples register for a task, by file."""
    found = {
        "docs": _REGISTER.findall(_docs_text()),
        "remote_env.py": _REGISTER.findall(
            (ROOT / "src/ale_robotics/client/remote_env.py").read_text()
        ),
    }
    for example in sorted((ROOT / "examples").rglob("*.py")):
        text = example.read_text()
        if "gym.register(" in text:
            found[example.name] = _REGISTER.findall(text) + _GYM_ID_CONSTANT.findall(text)
    return found


def test_the_documented_ids_have_no_namespace_and_no_slash() -> None:
    ids = _documented_ids()
    assert ids["docs"] and ids["remote_env.py"] and ids["cleanrl_ppo.py"], ids
    for where, gym_ids in ids.items():
        for gym_id in gym_ids:
            namespace, _name, version = parse_env_id(gym_id)
            assert "/" not in gym_id and namespace is None, f"{where}: {gym_id}"
            assert not gym_id.upper().startswith("ALE/"), f"{where}: {gym_id}"  # Atari's
            assert version is not None, f"{where}: {gym_id} (a versioned id)"


def _eval_policy(env_name: str, seed: int, steps: int) -> float:
    """TD3's eval_policy, cut short: a fresh env of the id, a fixed seed, a few steps."""
    eval_env = gym.make(env_name)
    try:
        eval_env.reset(seed=seed + 100)
        total = 0.0
        for _ in range(steps):
            action = eval_env.action_space.sample()
            _state, reward, terminated, truncated, _ = eval_env.step(action)
            total += float(reward)
            if terminated or truncated:
                eval_env.reset()
        return total
    finally:
        eval_env.close()


def _td3_main(env_name: str, *, policy: str = "TD3", seed: int = 0, steps: int = 20) -> str:
    """What TD3's main.py does with ``--env``, in Gymnasium's API; returns its file name."""
    file_name = f"{policy}_{env_name}_{seed}"
    if not os.path.exists("./results"):
        os.makedirs("./results")
    if not os.path.exists("./models"):  # --save_model
        os.makedirs("./models")
    env = gym.make(env_name)
    try:
        env.action_space.seed(seed)
        np.random.seed(seed)
        assert env.observation_space.shape is not None and env.action_space.shape is not None
        state_dim = env.observation_space.shape[0]
        action_dim = env.action_space.shape[0]
        max_action = float(env.action_space.high[0])  # type: ignore[attr-defined]
        assert state_dim > 0 and action_dim > 0 and max_action > 0
        evaluations = [_eval_policy(env_name, seed, steps)]
        state, _ = env.reset(seed=seed)
        max_steps = env.spec.max_episode_steps if env.spec is not None else None
        assert max_steps is not None  # TD3's done_bool needs the step limit
        replay_buffer: list[tuple[Any, ...]] = []
        episode_timesteps = 0
        for _t in range(steps):
            episode_timesteps += 1
            action = env.action_space.sample()  # TD3's start_timesteps: random actions
            next_state, reward, terminated, truncated, _ = env.step(action)
            done_bool = float(terminated) if episode_timesteps < max_steps else 0.0
            replay_buffer.append((state, action, next_state, reward, done_bool))
            state = next_state
            if terminated or truncated:
                state, _ = env.reset()
                episode_timesteps = 0
        assert len(replay_buffer) == steps
        evaluations.append(_eval_policy(env_name, seed, steps))
        np.save(f"./results/{file_name}", evaluations)
        np.save(f"./models/{file_name}_actor", np.zeros(action_dim))  # policy.save's names
    finally:
        env.close()
    return file_name


def test_td3_main_runs_with_the_readme_id(
    registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    readme_id = _documented_ids()["docs"][0]
    readme = _docs_text()
    task = re.search(
        rf"""gym\.register\("{re.escape(readme_id)}".*?"task_id": "([^"]+)\"""", readme, re.S
    )
    assert task is not None, "the docs' snippet names its task"
    monkeypatch.chdir(tmp_path)  # TD3 writes ./results and ./models where it runs
    with run_bound_evaluator(registry, task.group(1), RUN) as ev:
        env_vars: dict[str, Any] = {
            "ALE_ENDPOINT": ev.agent_address,
            "ALE_TOKEN": ev.agent_token,
            "ALE_RUN_ID": RUN,
        }
        gym.register(
            readme_id,
            entry_point="ale_robotics.client:RemoteEnv",
            kwargs={"task_id": task.group(1), "env": env_vars},
        )
        try:
            file_name = _td3_main(readme_id)
        finally:
            del gym.registry[readme_id]
    assert file_name == f"TD3_{readme_id}_0"
    assert (tmp_path / "results" / f"{file_name}.npy").is_file()
    assert (tmp_path / "models" / f"{file_name}_actor.npy").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["models", "results"]
