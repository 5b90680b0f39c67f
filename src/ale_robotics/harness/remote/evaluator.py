"""A run on an evaluator the harness did not start (``--evaluator``): connect, and close the run.

The harness finds the evaluator's harness channel and token (``evaluator serve``'s
layout: next to its agent socket, else ``--state-dir``), opens the run on a shared
evaluator (a token and a submission directory of its own) or takes the one-run
evaluator's agent token, and on an interrupted run closes it there, which cancels its
unfinished jobs. Apart from :mod:`.run` because none of it concerns an embedded
evaluator or an evaluator container, which :mod:`.run` starts itself.

An evaluator on TCP (``--evaluator HOST:PORT``, replicas ``A,B``) is reached through two
relays (:mod:`.relay`, :func:`open_relays`): the agent's Unix socket, in a
directory of its own that the sandbox binds, and the harness's, beside it in the same
private directory; both carry their connections to the evaluator over TLS.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ale_robotics.client.sdk import AleClient
from ale_robotics.harness.agent.supervisor import latest_job
from ale_robotics.harness.options import RunOptions
from ale_robotics.harness.remote.checks import default_harness_token, remote_tls, tcp_upstreams
from ale_robotics.harness.run_context import RunContext
from ale_robotics.sandboxes.errors import HarnessError
from ale_robotics.v1 import ale_env_pb2 as pb

from .relay import EvaluatorRelay

__all__ = [
    "RemoteRelays",
    "close_remote_run",
    "close_remote_run_with",
    "connect_remote",
    "connect_remote_run",
    "open_relays",
]


@dataclass
class RemoteRelays:
    """A TCP evaluator's two channels as Unix sockets of this harness (see the module doc)."""

    agent: EvaluatorRelay
    """Its socket is alone in its directory: the agent's sandbox binds that directory."""
    harness: EvaluatorRelay
    work: Path

    def close(self) -> None:
        self.agent.close()
        self.harness.close()
        shutil.rmtree(self.work, ignore_errors=True)


def open_relays(opts: RunOptions) -> RemoteRelays | None:
    """The relays to a TCP ``--evaluator`` (None for a Unix socket: no relay needed).

    The options were checked (:func:`.checks.check_remote`) before the run began.
    """
    assert opts.evaluator is not None
    agent_upstreams = tcp_upstreams(opts.evaluator, "--evaluator")
    if agent_upstreams is None:
        return None
    harness_upstreams = tcp_upstreams(opts.evaluator_harness or "", "--evaluator-harness")
    assert harness_upstreams is not None
    tls = remote_tls(opts)
    context = tls.ssl_context() if tls is not None else None
    work = Path(tempfile.mkdtemp(prefix="ale-"))  # 0700, and short: a socket path's limit
    (work / "agent").mkdir()
    try:
        agent = EvaluatorRelay(work / "agent" / "agent.sock", agent_upstreams, context)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    try:
        harness = EvaluatorRelay(work / "harness.sock", harness_upstreams, context)
    except BaseException:
        agent.close()
        shutil.rmtree(work, ignore_errors=True)
        raise
    return RemoteRelays(agent, harness, work)


def connect_remote_run(
    ctx: RunContext, relays: RemoteRelays | None
) -> tuple[RunContext, AleClient, str, str]:
    """The run connected to its separate evaluator: its context (the submission dir that
    evaluator gave it), the harness client, the agent's endpoint and token; the run's
    cancel (an interrupt) closes the run there."""
    opts = ctx.opts
    assert opts.evaluator is not None
    harness, agent_token, submission = connect_remote(
        opts, ctx.task.id, ctx.run_id, ctx.submission, relays
    )
    ctx.phase.cancel = lambda: close_remote_run(harness, ctx.run_id)
    endpoint = relays.agent.address if relays is not None else opts.evaluator
    return dataclasses.replace(ctx, submission=submission), harness, endpoint, agent_token


def connect_remote(
    opts: RunOptions,
    task_id: str,
    run_id: str,
    submission: Path,
    relays: RemoteRelays | None = None,
) -> tuple[AleClient, str, Path]:
    """The harness client, the agent's token and its submission dir on a separate evaluator
    (through ``relays`` for one on TCP).

    Raises :class:`HarnessError` when the tokens it needs cannot be found.
    """
    assert opts.evaluator is not None
    token_file = opts.harness_token_file or default_harness_token(opts)
    if token_file is None:
        raise HarnessError(
            "--evaluator needs --harness-token-file (the evaluator writes harness.token in "
            "its state dir; pass --state-dir if it is not the default one)"
        )
    from ale_robotics.sandboxes.docker.evaluator import harness_client

    agent_endpoint = opts.evaluator
    harness_addr = (
        relays.harness.address
        if relays is not None
        else opts.evaluator_harness or _default_harness_address(agent_endpoint)
    )
    harness = harness_client(  # a docker-exec:// address: through an evaluator container
        harness_addr, token_file.read_text().strip(), task_id=task_id, run_id=run_id
    )
    harness.retry_window_s = opts.evaluator_retry_s  # from its first call: OpenRun too
    try:
        shared = "open_run" in harness.get_spec().raw.capabilities
        if shared:
            # A shared evaluator: this run gets a token and a new, empty directory
            # VOLUME/<run_id>/ of its own; the client closes the run (revoking the
            # token) when it is closed. --agent-token-file is not needed: the shared
            # agent.token reaches no run. --submission-dir, if given, is the volume
            # root as this host mounts it.
            grant = harness.open_run(run_id, task_id)
            agent_token = grant.agent_token
            if grant.submission_dir:
                submission = (
                    opts.submission_volume / grant.submission_subdir
                    if opts.submission_volume is not None
                    else Path(grant.submission_dir)
                ).resolve()
        elif opts.agent_token_file is None:
            raise HarnessError(
                "this evaluator serves one run (--run-id): --evaluator needs "
                "--agent-token-file and --submission-dir too (its run's token, "
                "STATE_DIR/run-tokens/RUN_ID.agent.token unless it was given one, and its "
                "volume); a shared one (no --run-id) needs neither"
            )
        else:
            agent_token = opts.agent_token_file.read_text().strip()
    except BaseException:
        harness.close()
        raise
    return harness, agent_token, submission


def _default_harness_address(agent_endpoint: str) -> str:
    """``evaluator serve``'s harness socket next to its agent socket's directory.

    Its defaults are ``STATE_DIR/agent/agent.sock`` and ``STATE_DIR/harness.sock``;
    anything else (a TCP address) serves both channels on the one given address
    unless ``--evaluator-harness`` says otherwise.
    """
    if agent_endpoint.startswith("unix://"):
        sock = Path(agent_endpoint.removeprefix("unix://"))
        for candidate in (sock.parent.parent / "harness.sock", sock.parent / "harness.sock"):
            if candidate.exists():
                return f"unix://{candidate}"
    return agent_endpoint


def close_remote_run_with(harness: AleClient, run_id: str) -> list[str]:
    """:func:`close_remote_run` on a client of its own, closed afterwards."""
    with harness:
        return close_remote_run(harness, run_id)


def close_remote_run(harness: AleClient, run_id: str) -> list[str]:
    """Close the run on a separate evaluator: its unfinished jobs are cancelled."""
    job = latest_job(harness)  # a run's jobs run in order: only its newest can be unfinished
    r = harness._call(harness.stub.CloseRun, pb.CloseRunRequest(run_id=run_id), retries=1)
    if r.jobs_cancelled and job is not None and not job.terminal:
        return [job.job_id]
    return [f"(unnamed job {i + 1})" for i in range(r.jobs_cancelled)]
