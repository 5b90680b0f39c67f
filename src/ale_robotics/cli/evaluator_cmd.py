"""``ale-robotics evaluator``: serve the trusted evaluator, print its public key."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from pathlib import Path
from typing import Annotated

import typer

from ale_robotics import __version__
from ale_robotics.cli.app import console, evaluator_app, friendly, out

__all__: list[str] = []


@evaluator_app.command("serve")
@friendly
def evaluator_serve(
    state_dir: Annotated[Path, typer.Option(help="Secret, tokens, keys, job store.")],
    agent_listen: Annotated[
        str | None, typer.Option(help="Agent listener (default unix://STATE_DIR/agent.sock).")
    ] = None,
    harness_listen: Annotated[
        str | None, typer.Option(help="Harness listener (default unix://STATE_DIR/harness.sock).")
    ] = None,
    agent_token_file: Annotated[Path | None, typer.Option(help="Agent token to accept.")] = None,
    harness_token_file: Annotated[
        Path | None, typer.Option(help="Harness token to accept.")
    ] = None,
    submission_dir: Annotated[
        Path | None, typer.Option(help="The shared submission volume.")
    ] = None,
    task: Annotated[str | None, typer.Option(help="Serve only this task.")] = None,
    run_id: Annotated[
        str | None,
        typer.Option(
            help="Accept only this run, with agent.token as its token. Without it the "
            "evaluator is shared: the harness opens each run (OpenRun), which gets a token and "
            "a directory SUBMISSION_DIR/<run_id>/ of its own."
        ),
    ] = None,
    workers: Annotated[int | None, typer.Option(help="Rollout worker processes.")] = None,
    max_sessions: Annotated[
        int | None,
        typer.Option(help="Concurrent interactive sessions per run (overrides the tasks' limit)."),
    ] = None,
    max_sessions_total: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Concurrent interactive sessions of all runs together (default: 64, and at "
            "least the per-run limit).",
        ),
    ] = None,
) -> None:
    """Serve AleEnv on two listeners until interrupted (Ctrl-C or SIGTERM)."""
    from ale_robotics.evaluator import EvaluatorConfig, serve

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    running = serve(
        EvaluatorConfig(
            state_dir,
            submission_dir,
            task_id=task,
            run_id=run_id,
            workers=workers,
            max_sessions=max_sessions,
            max_sessions_total=max_sessions_total,
            # shared: each run's agent uses the token OpenRun issued for it
            per_run_tokens=run_id is None,
        ),
        agent_listen=agent_listen,
        harness_listen=harness_listen,
        agent_token_file=agent_token_file,
        harness_token_file=harness_token_file,
    )
    if run_id is None:
        tokens = (
            f"  harness token: {state_dir / 'harness.token'} (unless given)\n"
            "  runs: shared; the harness opens each run (OpenRun) and gets its agent token;\n"
            f"  {state_dir / 'agent.token'} reads GetSpec and practice sessions outside runs only"
        )
    else:
        tokens = (
            f"  run {run_id}; tokens: {state_dir / 'agent.token'} and "
            f"{state_dir / 'harness.token'} (unless given)"
        )
    console.print(
        f"evaluator {__version__} serving\n  agent channel:   {running.agent_address}\n"
        f"  harness channel: {running.harness_address}\n{tokens}",
        highlight=False,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with contextlib.suppress(KeyboardInterrupt):
        stop.wait()
    running.stop()


@evaluator_app.command("public-key")
@friendly
def evaluator_public_key(
    state_dir: Annotated[Path, typer.Option(help="The evaluator's state dir.")],
) -> None:
    """Print the evaluator's Ed25519 public key (hex), for 'trajectory verify --public-key'."""
    from ale_robotics.evaluator.state import StateDir
    from ale_robotics.trajectory import EvaluatorSigner

    out.print(EvaluatorSigner.load_or_create(StateDir(state_dir).signing_key_path).public_key_hex)
