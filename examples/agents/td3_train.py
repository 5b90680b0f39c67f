"""Reference agent: train a TD3 policy with Stable-Baselines3 and submit the actor's weights.

The evaluator never runs agent code: it builds the network named in the task's submission
contract itself and only loads our weights. So this agent's job is (1) train within the
budget, (2) export SB3's actor under the contract's key names, and (3) submit.

Where the simulator runs decides how it trains:

* the task keeps the simulator in the evaluator (``training.simulator`` "evaluator", e.g.
  ``td3-walker2d-repro-v1``): MuJoCo cannot even be imported in the sandbox, so TD3 trains on a
  *practice session* of the batch task (``RemoteEnv``), whose steps the evaluator counts against
  the training budget. Where the task takes checkpoints (GetSpec's "checkpoints" capability),
  every ``--checkpoint-every`` steps the actor is written to the submission dir and committed
  with ``AleClient.submit_checkpoint``: the evaluator evaluates it on hidden seeds at its own
  step count, and those points are the learning curve the faithfulness gate reads. The final
  policy is the last checkpoint, byte for byte.
* otherwise (``td3-inverted-pendulum-v1``, ``td3-halfcheetah-vec-v1``): SB3 trains on a local
  Gymnasium env, as the TD3 authors' code does.

Two modes:

* under the harness (default): the task spec and the budget come from the evaluator through
  ``AleClient``; the weights go to ``client.submission_dir`` (with ``meta.json`` for
  reproduction contracts), are submitted, and the final job state is printed. The official
  metric is computed by the evaluator and never shown here.
* ``--offline --task-config PATH --out DIR``: no evaluator at all (a local simulator is needed).
  The spec is read from the JSON task config, the weights go to DIR and a local deterministic
  rollout check is printed. This is how the shipped checkpoint in ``checkpoints/`` was produced.

No network access is needed at run time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import gymnasium as gym
import numpy as np
import torch
from safetensors.torch import load_file, save_file
from stable_baselines3 import TD3
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.noise import NormalActionNoise

from ale_robotics.tasks import SubmissionContract, TaskSpec

if TYPE_CHECKING:
    from ale_robotics.client import AleClient, CheckpointAck, JobStatus

ExportFormat = Literal["safetensors", "pt"]

#: File name per export format; the contract accepts exactly one of them in the submission dir.
FILE_NAMES: dict[str, str] = {"safetensors": "policy.safetensors", "pt": "policy.pt"}

#: SB3's ``actor.mu`` is Sequential(Linear, ReLU, Linear, ReLU, Linear, Tanh): the Linear layers
#: sit at these indices. The contract's layer names (``policy.layer_names``) map onto them in order.
SB3_LINEAR_INDICES: tuple[int, ...] = (0, 2, 4)

#: Default training length: the smallest count at which all five seeds tried (0-4) had local
#: return 1000 on InvertedPendulum; see the README for the measurements.
DEFAULT_TIMESTEPS = 25_000

#: Environment variable for ``--checkpoint-every`` (the flag wins).
CHECKPOINT_EVERY_ENV = "ALE_CHECKPOINT_EVERY"

#: Checkpoints a run commits when ``--checkpoint-every`` is not given: enough for the
#: learning-curve check (3 points, spread over the training) with one to spare.
DEFAULT_CHECKPOINTS = 4


class WallClockBudget(BaseCallback):
    """Stop training at a deadline so that export and submit still fit in the budget.

    A run that overshoots the budget is killed by the harness with nothing submitted, which is
    strictly worse than submitting a slightly less trained policy.
    """

    def __init__(self, deadline: float) -> None:
        super().__init__()
        self.deadline = deadline
        self.stopped_early = False

    def _on_step(self) -> bool:
        if time.monotonic() >= self.deadline:
            self.stopped_early = True
            return False
        return True


class LearningCurve(BaseCallback):
    """Evaluate the actor locally on public seeds every ``every`` steps: the agent's curve.csv.

    Only possible with a local simulator. It is the agent's own record: the faithfulness gate
    reads the evaluator-measured curve of committed checkpoints instead, never this file.
    """

    def __init__(self, task: TaskSpec, every: int, episodes: int, seed: int) -> None:
        super().__init__()
        self.task = task
        self.every = every
        self.episodes = episodes
        self.seed = seed
        self.rows: list[tuple[int, float]] = []

    def _on_step(self) -> bool:
        n = int(self.model.num_timesteps)
        if n % self.every == 0:
            returns = evaluate_locally(
                actor_state_dict(self.model, layer_names(self.task)),
                self.task.env.gym_id,
                self.episodes,
                self.seed,
                names=layer_names(self.task),
                max_episode_steps=self.task.env.max_episode_steps,
                env_kwargs=self.task.env.kwargs,
            )
            self.rows.append((n, float(np.mean(returns))))
        return True


class Checkpoints:
    """Commit the actor as a checkpoint after each training chunk (tasks that take them).

    The policy file is written into the submission dir and committed with
    ``AleClient.submit_checkpoint``; the evaluator snapshots it, stamps it with its own count of
    the run's practice steps and evaluates it on hidden seeds (it never tells us the return).
    The last commit is the final policy: nothing rewrites the file after it, so the submitted
    policy is the same bytes as the curve's last point, as the faithfulness gate requires.
    """

    def __init__(
        self,
        client: AleClient,
        out_dir: Path,
        fmt: ExportFormat,
        names: list[str],
        contract: SubmissionContract | None,
    ) -> None:
        self.client = client
        self.out_dir = out_dir
        self.fmt: ExportFormat = fmt
        self.names = names
        self.contract = contract
        self.acks: list[CheckpointAck] = []
        self.committed_at: int | None = None
        """Our step count at the last commit (None before the first)."""

    def commit(self, model: TD3) -> Path:
        """Export the actor and commit it; return the policy file's path."""
        path = export_td3_actor(
            model, self.out_dir, self.fmt, names=self.names, contract=self.contract
        )
        ack = self.client.submit_checkpoint()
        self.acks.append(ack)
        self.committed_at = int(model.num_timesteps)
        print(
            f"checkpoint {ack.index} at {self.committed_at} steps (evaluator counted "
            f"{ack.practice_steps}; {ack.checkpoints_left} left)",
            flush=True,
        )
        return path


def checkpoint_interval(
    requested: int | None, timesteps: int, max_checkpoints: int | None = None
) -> int:
    """Steps between checkpoints: the request (flag, else ``ALE_CHECKPOINT_EVERY``), else
    a quarter of the run; raised where the run would commit more than the task allows."""
    every = requested
    if every is None and os.environ.get(CHECKPOINT_EVERY_ENV, "").strip():
        every = int(os.environ[CHECKPOINT_EVERY_ENV])
    if every is None:
        every = math.ceil(timesteps / DEFAULT_CHECKPOINTS)
    if every <= 0:
        raise ValueError(f"checkpoint interval must be positive, got {every}")
    if max_checkpoints is not None:
        every = max(every, math.ceil(timesteps / max_checkpoints))
    return max(1, every)


def write_reproduction_evidence(
    out_dir: Path, steps: int, seed: int, curve: LearningCurve | None = None
) -> None:
    """``meta.json`` (the declared algorithm and our step count), and ``curve.csv`` (step,
    eval_return) when a local curve was measured: what reproduction contracts ask for."""
    if curve is not None:
        lines = ["step,eval_return", *(f"{s},{r!r}" for s, r in curve.rows)]
        (out_dir / "curve.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    meta: dict[str, Any] = {
        "algorithm": "TD3",
        "training_steps": steps,
        "seeds": [seed],
        "library": "stable-baselines3",
    }
    if curve is not None:
        meta["final_eval_return"] = curve.rows[-1][1] if curve.rows else None
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")


def load_task_config(path: Path) -> TaskSpec:
    """Read a task config file directly (offline mode: no evaluator, same schema it serves)."""
    return TaskSpec.model_validate_json(path.read_text(encoding="utf-8"))


def make_env(task: TaskSpec) -> gym.Env[Any, Any]:
    """Build the task's environment exactly as the config names it (id, kwargs, horizon)."""
    return gym.make(
        task.env.gym_id, max_episode_steps=task.env.max_episode_steps, **task.env.kwargs
    )


def layer_names(task: TaskSpec | None) -> list[str]:
    """Contract layer names (``l1``, ``l2``, ``l3``); the TD3 paper's names if none are given."""
    if task is not None and task.policy is not None:
        return list(task.policy.layer_names)
    return ["l1", "l2", "l3"]


def train(
    task: TaskSpec,
    seed: int,
    timesteps: int,
    deadline: float,
    learning_starts: int = 1000,
    noise_std: float = 0.1,
    curve: LearningCurve | None = None,
    *,
    env: gym.Env[Any, Any] | None = None,
    every: int | None = None,
    on_chunk: Callable[[TD3], object] | None = None,
) -> tuple[TD3, int, bool]:
    """Train TD3 on the task's env; return the model, steps actually done, and early-stop flag.

    ``env`` defaults to a local env of the task (``make_env``); a practice session
    (``RemoteEnv``) trains the same way. With ``every``, training runs in chunks of that many
    steps and ``on_chunk(model)`` is called after each one (and after a final, shorter chunk,
    or one cut by the deadline): the weights it sees are exactly those at that step count.

    Hyperparameters follow the TD3 paper where SB3's defaults differ: 1000 random start steps
    and Gaussian exploration noise of 0.1 x the action bound. Actor and critics both use the
    contract's hidden sizes, because only an actor of exactly that shape can be submitted.
    """
    if task.policy is None:
        raise ValueError(f"task {task.id} declares no policy architecture to train")
    env = env if env is not None else make_env(task)
    space = env.action_space
    if not isinstance(space, gym.spaces.Box):
        raise ValueError(f"TD3 needs a continuous (Box) action space, got {space}")
    # The evaluator scales tanh outputs by the action space's high bound; SB3 maps [-1, 1] onto
    # [low, high]. The two agree only for a symmetric box.
    if not np.allclose(space.low, -space.high):
        raise ValueError(f"action space {space} is not symmetric; the contract's scaling differs")
    n_actions = int(np.prod(space.shape))
    noise = NormalActionNoise(
        mean=np.zeros(n_actions), sigma=noise_std * np.ones(n_actions)
    )  # SB3 adds the noise in the actor's [-1, 1] units, so 0.1 here is 0.1 x the bound.
    model = TD3(
        "MlpPolicy",
        env,
        learning_starts=learning_starts,
        action_noise=noise,
        policy_kwargs={"net_arch": list(task.policy.hidden_sizes)},
        seed=seed,
        device="cpu",
        verbose=0,
    )
    callback = WallClockBudget(deadline)
    callbacks: list[BaseCallback] = [callback] if curve is None else [callback, curve]
    chunk = every if every is not None else timesteps
    while model.num_timesteps < timesteps and not callback.stopped_early:
        steps = min(chunk, timesteps - int(model.num_timesteps))
        before = int(model.num_timesteps)
        # reset_num_timesteps=False: the next chunk carries on the same episode and counter.
        model.learn(
            total_timesteps=steps,
            callback=callbacks,
            progress_bar=False,
            reset_num_timesteps=False,
        )
        if on_chunk is not None and model.num_timesteps > before:
            on_chunk(model)
    env.close()
    return model, int(model.num_timesteps), callback.stopped_early


def actor_state_dict(model: TD3, names: list[str]) -> dict[str, torch.Tensor]:
    """SB3's actor Linear layers under the contract's names, as float32 contiguous CPU tensors."""
    mu = model.actor.mu
    linears = [mu[i] for i in SB3_LINEAR_INDICES]
    if not all(isinstance(layer, torch.nn.Linear) for layer in linears) or len(mu) != 6:
        raise ValueError(f"unexpected SB3 actor layout: {mu}")
    if len(names) != len(linears):
        raise ValueError(f"contract names {len(names)} layers, the SB3 actor has {len(linears)}")
    state: dict[str, torch.Tensor] = {}
    for name, layer in zip(names, linears, strict=True):
        for part in ("weight", "bias"):
            tensor = getattr(layer, part).detach().to(device="cpu", dtype=torch.float32)
            state[f"{name}.{part}"] = tensor.clone().contiguous()
    return state


def check_state_dict(
    state: Mapping[str, torch.Tensor], contract: SubmissionContract | None = None
) -> None:
    """Fail here, before submitting, on what the evaluator would REJECT (NaN/inf, keys, shapes)."""
    for key, tensor in state.items():
        if tensor.dtype != torch.float32:
            raise ValueError(f"{key}: dtype {tensor.dtype}, the contract requires float32")
        if not bool(torch.isfinite(tensor).all()):
            raise ValueError(
                f"{key}: contains NaN or inf; the evaluator rejects non-finite weights"
            )
    if contract is None or not contract.tensors:
        return
    expected = {rule.key: list(rule.shape) for rule in contract.tensors}
    if set(state) != set(expected):
        raise ValueError(
            f"state-dict keys {sorted(state)} differ from the contract's {sorted(expected)}"
        )
    for key, shape in expected.items():
        if list(state[key].shape) != shape:
            raise ValueError(f"{key}: shape {list(state[key].shape)}, contract requires {shape}")


def export_td3_actor(
    model: TD3,
    out_dir: Path,
    fmt: ExportFormat = "safetensors",
    *,
    names: list[str] | None = None,
    contract: SubmissionContract | None = None,
) -> Path:
    """Write the TD3 actor per the contract and return the file's path.

    The contract accepts exactly one policy file, so the other format's file is removed if an
    earlier run left it behind; otherwise the submission would be rejected as ambiguous.
    """
    state = actor_state_dict(model, names or ["l1", "l2", "l3"])
    check_state_dict(state, contract)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / FILE_NAMES[fmt]
    for other in FILE_NAMES.values():
        stale = out_dir / other
        if other != path.name and (stale.exists() or stale.is_symlink()):
            stale.unlink()
    if fmt == "safetensors":
        save_file(state, str(path))
    else:
        torch.save(state, path)
    return path


def load_policy_file(path: Path) -> dict[str, torch.Tensor]:
    """Load an exported policy the way the evaluator does: no pickle (``weights_only``)."""
    if path.suffix == ".safetensors":
        return load_file(str(path))
    loaded = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(loaded, dict):
        raise ValueError(f"{path} holds a {type(loaded).__name__}, not a state dict")
    return loaded


def evaluate_locally(
    state_dict: Mapping[str, torch.Tensor | np.ndarray],
    gym_id: str,
    episodes: int,
    seed: int,
    *,
    names: list[str] | None = None,
    max_episode_steps: int | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
) -> list[float]:
    """Run deterministic episodes with the exported weights in plain numpy; return the returns.

    This is deliberately independent of SB3 and torch modules: it rebuilds the contract's MLP
    (relu, relu, tanh x action high) from the state dict alone, so it catches export mistakes
    (wrong layer order, transposes, missing scaling) that evaluating the SB3 model would not.
    It is the agent's own sanity check on public seeds, not the official metric.
    """
    layers = names or ["l1", "l2", "l3"]

    def as_array(value: torch.Tensor | np.ndarray) -> np.ndarray:
        if isinstance(value, torch.Tensor):
            return np.asarray(value.detach().cpu().numpy(), dtype=np.float64)
        return np.asarray(value, dtype=np.float64)

    weights = [as_array(state_dict[f"{n}.weight"]) for n in layers]
    biases = [as_array(state_dict[f"{n}.bias"]) for n in layers]
    env = gym.make(gym_id, max_episode_steps=max_episode_steps, **dict(env_kwargs or {}))
    space = env.action_space
    assert isinstance(space, gym.spaces.Box)
    high = np.asarray(space.high, dtype=np.float64)

    def act(obs: np.ndarray) -> np.ndarray:
        h = np.asarray(obs, dtype=np.float64)
        for w, b in zip(weights[:-1], biases[:-1], strict=True):
            h = np.maximum(w @ h + b, 0.0)
        return np.asarray(np.tanh(weights[-1] @ h + biases[-1]) * high, dtype=np.float32)

    returns: list[float] = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(act(obs))
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return returns


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--offline", action="store_true", help="no evaluator: needs --task-config")
    parser.add_argument("--task-config", type=Path, help="task config JSON (offline mode)")
    parser.add_argument("--out", type=Path, help="output directory (offline mode)")
    parser.add_argument(
        "--seed",
        type=int,
        default=int(os.environ.get("ALE_SEED", 0)),
        help="Training seed (default: $ALE_SEED, which an eval set sets per repetition, else 0).",
    )
    parser.add_argument("--timesteps", type=int, default=DEFAULT_TIMESTEPS)
    parser.add_argument("--format", choices=sorted(FILE_NAMES), default="safetensors")
    parser.add_argument("--learning-starts", type=int, default=1000)
    parser.add_argument("--noise-std", type=float, default=0.1, help="x the action bound")
    parser.add_argument(
        "--budget-s", type=float, help="wall-clock budget; under the harness the spec's wins"
    )
    parser.add_argument(
        "--margin-s", type=float, default=120.0, help="budget kept back for export and submit"
    )
    parser.add_argument("--check-episodes", type=int, default=10, help="local check (offline)")
    parser.add_argument("--check-seed", type=int, default=1000, help="first local-check seed")
    parser.add_argument("--meta", type=Path, help="offline: also write a JSON record of the run")
    parser.add_argument(
        "--checkpoint-every",
        "--curve-every",
        dest="checkpoint_every",
        type=int,
        help="steps between learning-curve points: committed checkpoints where the task takes "
        f"them, local evaluations otherwise (default: ${CHECKPOINT_EVERY_ENV}, else a quarter "
        "of --timesteps)",
    )
    parser.add_argument(
        "--curve-episodes",
        type=int,
        default=3,
        help="local curve.csv (simulator on the agent's side only): episodes per point",
    )
    args = parser.parse_args(argv)
    if args.offline and (args.task_config is None or args.out is None):
        parser.error("--offline needs --task-config and --out")
    if not args.offline and (args.task_config is not None or args.out is not None):
        parser.error("--task-config/--out are offline options; under the harness the spec rules")
    return args


def versions() -> dict[str, str]:
    """Library versions that affect the trained weights, for reproducibility records."""
    import gymnasium
    import mujoco
    import stable_baselines3

    return {
        "python": sys.version.split()[0],
        "stable_baselines3": stable_baselines3.__version__,
        "torch": torch.__version__,
        "gymnasium": gymnasium.__version__,
        "mujoco": mujoco.__version__,
        "numpy": np.__version__,
    }


def run_offline(args: argparse.Namespace, started: float) -> int:
    """Train, export to ``--out`` and print the local check; no evaluator involved."""
    task = load_task_config(args.task_config)
    budget = args.budget_s if args.budget_s is not None else float("inf")
    deadline = started + budget - args.margin_s
    t0 = time.monotonic()
    model, steps, stopped = train(
        task, args.seed, args.timesteps, deadline, args.learning_starts, args.noise_std
    )
    train_s = time.monotonic() - t0
    names = layer_names(task)
    path = export_td3_actor(model, args.out, args.format, names=names, contract=task.contract)
    state = load_policy_file(path)  # round-trip through the file, as the evaluator reads it
    check_state_dict(state, task.contract)
    returns = evaluate_locally(
        state,
        task.env.gym_id,
        args.check_episodes,
        args.check_seed,
        names=names,
        max_episode_steps=task.env.max_episode_steps,
        env_kwargs=task.env.kwargs,
    )
    mean = float(np.mean(returns)) if returns else float("nan")
    print(f"trained {steps} steps in {train_s:.1f}s{' (stopped at budget)' if stopped else ''}")
    print(f"wrote {path} ({path.stat().st_size} bytes)")
    print(f"local check: mean return {mean:.2f} over {len(returns)} episodes: {returns}")
    if args.meta is not None:
        meta = {
            "command": " ".join(["python", *sys.argv]),
            "task_id": task.id,
            "gym_id": task.env.gym_id,
            "seed": args.seed,
            "timesteps_requested": args.timesteps,
            "timesteps_done": steps,
            "stopped_at_budget": stopped,
            "hyperparameters": {
                "algorithm": "TD3 (stable-baselines3)",
                "net_arch": list(task.policy.hidden_sizes) if task.policy else None,
                "learning_starts": args.learning_starts,
                "action_noise": f"Normal(0, {args.noise_std} x action bound)",
                "other": "stable-baselines3 TD3 defaults",
                "torch_threads": torch.get_num_threads(),
            },
            "train_wall_clock_s": round(train_s, 1),
            "total_wall_clock_s": round(time.monotonic() - started, 1),
            "versions": versions(),
            "file": path.name,
            "file_bytes": path.stat().st_size,
            "local_check": {
                "what": "deterministic numpy rollouts of the exported file; not the official "
                "metric (the evaluator uses its own hidden seeds)",
                "episodes": len(returns),
                "seeds": [args.check_seed + i for i in range(len(returns))],
                "returns": returns,
                "mean_return": mean,
            },
        }
        args.meta.parent.mkdir(parents=True, exist_ok=True)
        args.meta.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.meta}")
    return 0


class ProgressPrinter:
    """``AleClient.wait`` progress callback: one line per change of state or episode count."""

    def __init__(self) -> None:
        self.last: tuple[str, int, int] | None = None

    def __call__(self, status: JobStatus) -> None:
        key = (status.state, status.episodes_done, status.episodes_total)
        if key != self.last:
            self.last = key
            print(f"  {status.state} {status.episodes_done}/{status.episodes_total}", flush=True)


def run_harness(args: argparse.Namespace, started: float) -> int:
    """Train within the evaluator's budget, write to the submission dir, submit and wait."""
    from ale_robotics.client import AleClient, RemoteEnv  # offline mode needs no SDK

    client = AleClient.from_env()
    if client.submission_dir is None:
        print("error: ALE_SUBMISSION_DIR is not set; run under the harness or use --offline")
        return 2
    spec = client.get_spec()
    task = spec.task
    contract = spec.contract if spec.contract is not None else task.contract
    # A budget of 0 means the evaluator set none.
    budget = float(spec.budget_s) if spec.budget_s > 0 else float("inf")
    if args.budget_s is not None:
        budget = min(budget, args.budget_s)
    deadline = started + budget - args.margin_s
    if contract is not None:
        accepted = contract.file_for_role("policy").names
        if FILE_NAMES[args.format] not in accepted:
            print(f"error: contract does not accept {FILE_NAMES[args.format]}: {sorted(accepted)}")
            return 2
    # The simulator in the evaluator: train on a practice session, which it counts.
    remote = task.simulator_in_evaluator
    timesteps = args.timesteps
    left = spec.training_agent_steps_left
    if remote and left is not None and timesteps > left:
        print(f"the training budget leaves {left} practice steps: training {left}", flush=True)
        timesteps = left
    settings = task.training.checkpoints if task.training is not None else None
    takes_checkpoints = "checkpoints" in spec.raw.capabilities and settings is not None
    every = checkpoint_interval(
        args.checkpoint_every, timesteps, settings.max_checkpoints if settings else None
    )
    where = "a practice session of the evaluator" if remote else "a local env"
    print(
        f"task {task.id}: training up to {timesteps} steps on {where}, budget {budget:.0f}s"
        + (f", a checkpoint every {every} steps" if takes_checkpoints else ""),
        flush=True,
    )
    roles = {f.role for f in contract.files} if contract is not None else set()
    curve = (  # the agent's own curve.csv needs a local simulator to evaluate on
        LearningCurve(task, every, args.curve_episodes, args.check_seed)
        if {"meta", "curve"} <= roles and not remote
        else None
    )
    names = layer_names(task)
    checkpoints = (
        Checkpoints(client, client.submission_dir, args.format, names, contract)
        if takes_checkpoints
        else None
    )
    env = RemoteEnv(client, kind="practice") if remote else None
    model, steps, stopped = train(
        task,
        args.seed,
        timesteps,
        deadline,
        args.learning_starts,
        args.noise_std,
        curve,
        env=env,
        every=every if checkpoints is not None else None,
        on_chunk=checkpoints.commit if checkpoints is not None else None,
    )
    print(f"trained {steps} steps{' (stopped at budget)' if stopped else ''}", flush=True)
    if checkpoints is not None and checkpoints.committed_at != steps:
        checkpoints.commit(model)  # the final policy must be the curve's last point
    if checkpoints is not None:
        # The last checkpoint's file, untouched since: the submission is those very bytes.
        path = client.submission_dir / FILE_NAMES[args.format]
    else:
        path = export_td3_actor(
            model, client.submission_dir, args.format, names=names, contract=contract
        )
    if "meta" in roles:
        write_reproduction_evidence(client.submission_dir, steps, args.seed, curve)
        extra = f"curve.csv ({len(curve.rows)} points) and " if curve is not None else ""
        print(f"wrote {extra}meta.json", flush=True)
    check_state_dict(load_policy_file(path), contract)
    print(f"wrote {path}; submitting", flush=True)
    job_id = client.submit()
    print(f"submitted job {job_id}; waiting for the evaluator", flush=True)
    status = client.wait(job_id, on_progress=ProgressPrinter())
    print(f"job {job_id}: {status.state} ({status.episodes_done}/{status.episodes_total} episodes)")
    if status.state != "SUCCEEDED":
        source = f" [{status.failure_source}]" if status.failure_source else ""
        print(f"error: job did not succeed{source}: {status.failure_reason or '(no reason given)'}")
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    args = parse_args(argv)
    # Shared CPUs: one thread keeps training polite and makes CPU results reproducible.
    torch.set_num_threads(1)
    return run_offline(args, started) if args.offline else run_harness(args, started)


if __name__ == "__main__":
    sys.exit(main())
