"""The run's model gateway, from the harness's side: start it, hand the sandbox what it
needs to reach it, stop it and keep its account (:mod:`ale_robotics.gateway`).

A run gets a gateway when it is given an upstream (``run --model-upstream URL``, with the
allowed models ``--model NAME`` and ``--model-budget-tokens N``, else the task's
``compute_budget.model_tokens``). The operator's key is read here, from the harness's
environment (:data:`UPSTREAM_KEY_ENV`), and stays in this process: the agent's
environment is built from a short list of variables (:func:`.proc.run_agent`) plus
:attr:`ModelAccess.env`, which holds only the run's own gateway key.

What the agent's sandbox is given (:class:`ModelAccess`):

* ``socket_dir``: the directory of the gateway's Unix socket, to bind into the sandbox at
  the same path (bwrap) or at a mount point of its own (docker: ``wrap`` is told where);
  it holds nothing else;
* ``env``: ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``ANTHROPIC_BASE_URL``,
  ``ANTHROPIC_API_KEY``, ``ALE_MODEL``, ``ALE_MODELS`` (and ``ALE_MODEL_BUDGET_TOKENS``);
* ``wrap(argv)``: the agent command behind the relay (:mod:`ale_robotics.gateway.relay`),
  which listens on ``127.0.0.1:RELAY_PORT`` in the sandbox's own network namespace. An
  agent without a sandbox (``--sandbox none``) shares the host's network: the gateway then
  listens on an ephemeral loopback port itself and nothing is wrapped.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit, urlunsplit

from ale_robotics.gateway import GatewayPolicy, ModelGateway, ModelUsage
from ale_robotics.gateway import relay as relay_module
from ale_robotics.trajectory import TrajectoryWriter
from ale_robotics.trajectory.transcript import TRANSCRIPT_FILE

__all__ = [
    "RELAY_PORT",
    "UPSTREAM_KEY_ENV",
    "ModelAccess",
    "ModelSettings",
    "model_gateway",
]

UPSTREAM_KEY_ENV: Final = "ALE_MODEL_API_KEY"
"""The harness's environment variable with the operator's upstream key."""

RELAY_PORT: Final = 8765
"""The relay's port on the sandbox's own loopback (the same in every sandbox)."""


@dataclass(frozen=True)
class ModelSettings:
    """A run's model gateway settings (the ``run`` options)."""

    upstream: str
    models: tuple[str, ...]
    budget_tokens: int | None = None
    allowed_tools: tuple[str, ...] = ()

    def policy(self, task_budget: int | None) -> GatewayPolicy:
        """The run's policy: ``--model-budget-tokens``, else the task's model token budget."""
        return GatewayPolicy.of(self.models, self.budget_tokens or task_budget, self.allowed_tools)


@dataclass
class ModelAccess:
    """What the agent's sandbox needs to reach the run's gateway (module docstring)."""

    socket_dir: Path
    socket: Path
    env: dict[str, str]
    relay: bool
    gateway: ModelGateway
    usage: ModelUsage | None = field(default=None)
    """The account, once the gateway stopped (:func:`model_gateway`'s block ended)."""

    def stored_bytes(self) -> int:
        """The transcript's bytes (counted against the run's disk quota)."""
        return self.gateway.stored_bytes()

    def quota_breach(self) -> int | None:
        """The transcript's bytes with the call the quota stopped, once it stopped one."""
        return self.gateway.quota_demand if self.gateway.quota_reached.is_set() else None

    def last_call_unix(self) -> float:
        return self.gateway.last_call_unix

    def last_refusal(self) -> tuple[float, str] | None:
        return self.gateway.last_refusal

    def wrap(
        self,
        argv: Sequence[str],
        python: str = sys.executable,
        *,
        relay: str | None = None,
        socket_dir: str | None = None,
    ) -> list[str]:
        """``argv`` started behind the relay (unchanged without one).

        ``relay`` (the relay's file) and ``socket_dir`` (where the sandbox shows
        :attr:`socket_dir`) as the sandbox sees them: by default their host paths (a
        container passes its image's and its mount point).
        """
        if not self.relay:
            return list(argv)
        relay = relay or str(Path(relay_module.__file__).resolve())
        socket = f"{socket_dir}/{self.socket.name}" if socket_dir else str(self.socket)
        return [
            python,
            "-I",
            relay,
            "--unix",
            socket,
            "--port",
            str(RELAY_PORT),
            "--",
            *argv,
        ]


def _shown_url(url: str) -> str:
    """``url`` without credentials (a key in its user part stays out of the trajectory)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


@contextlib.contextmanager
def model_gateway(
    settings: ModelSettings,
    *,
    run_dir: Path,
    trajectory: TrajectoryWriter,
    task_budget: int | None,
    isolated_network: bool,
    quota_bytes: int | None = None,
) -> Iterator[ModelAccess]:
    """The run's gateway, listening while the block runs; its account is in
    :attr:`ModelAccess.usage` once the block ends, and in a ``model_gateway_stopped`` event.

    ``isolated_network``: the agent's sandbox has its own network namespace (bwrap,
    docker), so it reaches the gateway through the relay; else through a loopback port.
    ``quota_bytes``: the run's disk quota, which the transcript counts against.
    """
    policy = settings.policy(task_budget)
    key = os.environ.get(UPSTREAM_KEY_ENV) or None
    # A short path of its own (a Unix socket's path is limited to ~107 bytes), bound
    # whole into the sandbox: nothing else goes in it.
    socket_dir = Path(tempfile.mkdtemp(prefix="ale-gw-"))
    socket_dir.chmod(0o755)
    socket = socket_dir / "gateway.sock"
    gateway = ModelGateway(
        upstream=settings.upstream,
        upstream_key=key,
        policy=policy,
        socket_path=socket,
        transcript=run_dir / TRANSCRIPT_FILE,
        trajectory=trajectory,
        tcp=not isolated_network,
        quota_bytes=quota_bytes,
    )
    try:
        gateway.start()
        base = f"http://127.0.0.1:{RELAY_PORT if isolated_network else gateway.tcp_port}"
        access = ModelAccess(
            socket_dir=socket_dir,
            socket=socket,
            env=gateway.agent_env(base),
            relay=isolated_network,
            gateway=gateway,
        )
        trajectory.append(
            "harness",
            "model_gateway_started",
            {
                "upstream": _shown_url(gateway.upstream),
                "upstream_key": "set" if key else "none",
                "models": list(policy.models),
                "budget_tokens": policy.budget_tokens,
                "tools_allowed": list(policy.allowed_tools),
                "base_url": base,
                "transcript": TRANSCRIPT_FILE,
            },
        )
        try:
            yield access
        finally:
            access.usage = gateway.stop()
            trajectory.append(
                "harness", "model_gateway_stopped", access.usage.model_dump(mode="json")
            )
    finally:
        gateway.stop()
        shutil.rmtree(socket_dir, ignore_errors=True)
