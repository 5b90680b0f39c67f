"""``ale-robotics evaluator``: serve the trusted evaluator, print its public key.

Both commands default ``--state-dir`` to the dir ``ale-robotics run`` gives its
embedded evaluators (``STATE_HOME/evaluator``, :func:`ale_robotics.paths.state_home`),
so ``public-key`` prints the key that signed a default run's trajectory, and a
shared ``serve`` beside such runs uses their job store (each process holds only
the jobs it runs; see :mod:`ale_robotics.evaluator.store`).

``serve --store postgresql://...`` puts the job store in PostgreSQL instead of the
state dir's SQLite file, so several ``serve`` replicas (on several hosts) share
one queue: each job runs on one of them, and one that dies has its jobs taken
over by another once their leases run out. The replicas need the same secret and
signing key, and the same snapshots dir and submission volume: give them one
state dir on a shared volume.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ale_robotics import __version__
from ale_robotics.cli.app import ExecutorOpt, RayAddressOpt, console, evaluator_app, friendly
from ale_robotics.errors import InvalidArgumentError
from ale_robotics.paths import state_home

if TYPE_CHECKING:
    from ale_robotics.evaluator.server.listeners import RunningEvaluator
    from ale_robotics.evaluator.server.metrics import MetricsServer

__all__: list[str] = []

DEFAULT_DRAIN_S = 600.0
"""How long a draining ``serve`` lets its running job finish (``--drain-s``)."""

StateDirOpt = Annotated[
    Path | None,
    typer.Option(
        help="Secret, tokens, keys, job store (default: STATE_HOME/evaluator, the dir "
        "'ale-robotics run' uses; STATE_HOME is $XDG_STATE_HOME/ale-robotics).",
        show_default=False,
    ),
]


def _state_dir(given: Path | None) -> Path:
    """The state dir to use, created if missing; a clear error when it cannot be one."""
    path = (given if given is not None else state_home() / "evaluator").absolute()
    if path.exists() and not path.is_dir():
        raise InvalidArgumentError(f"--state-dir {path} is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidArgumentError(
            f"--state-dir {path} cannot be created: {exc.strerror or exc}"
        ) from None
    if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
        raise InvalidArgumentError(f"--state-dir {path} is not writable by this user")
    return path


@evaluator_app.command("serve")
@friendly
def evaluator_serve(
    state_dir: StateDirOpt = None,
    agent_listen: Annotated[
        str | None,
        typer.Option(
            rich_help_panel="Listeners",
            metavar="ADDR",
            help="Agent listener (default unix://STATE_DIR/agent/agent.sock).",
        ),
    ] = None,
    harness_listen: Annotated[
        str | None,
        typer.Option(
            rich_help_panel="Listeners",
            metavar="ADDR",
            help="Harness listener (default unix://STATE_DIR/harness.sock).",
        ),
    ] = None,
    agent_token_file: Annotated[
        Path | None,
        typer.Option(rich_help_panel="Listeners", metavar="FILE", help="Agent token to accept."),
    ] = None,
    harness_token_file: Annotated[
        Path | None,
        typer.Option(rich_help_panel="Listeners", metavar="FILE", help="Harness token to accept."),
    ] = None,
    metrics_listen: Annotated[
        str | None,
        typer.Option(
            "--metrics-listen",
            rich_help_panel="Listeners",
            metavar="HOST:PORT",
            help="Serve Prometheus metrics at http://HOST:PORT/metrics (jobs by state, queue "
            "depth, durations, failures, sessions, agent steps). No authentication: a "
            "loopback address unless --insecure.",
        ),
    ] = None,
    tls_cert: Annotated[
        Path | None,
        typer.Option(
            rich_help_panel="TLS",
            metavar="FILE",
            help="TCP listeners serve TLS with this PEM certificate (its subjectAltName "
            "naming the host clients dial) and --tls-key.",
        ),
    ] = None,
    tls_key: Annotated[
        Path | None,
        typer.Option(rich_help_panel="TLS", metavar="FILE", help="The certificate's PEM key."),
    ] = None,
    tls_client_ca: Annotated[
        Path | None,
        typer.Option(
            rich_help_panel="TLS",
            metavar="FILE",
            help="Mutual TLS: clients must present a certificate this CA signed.",
        ),
    ] = None,
    insecure: Annotated[
        bool,
        typer.Option(
            "--insecure",
            rich_help_panel="TLS",
            help="Allow a plaintext TCP listener on a non-loopback address (tokens in clear: "
            "a network you trust only). Loopback addresses and unix:// are always allowed.",
        ),
    ] = False,
    submission_dir: Annotated[
        Path | None,
        typer.Option(
            rich_help_panel="Runs",
            metavar="DIR",
            help="The shared submission volume (default: STATE_DIR/submissions; a shared "
            "evaluator gives each run SUBMISSION_DIR/<run_id>/).",
            show_default=False,
        ),
    ] = None,
    task: Annotated[
        str | None,
        typer.Option(rich_help_panel="Runs", metavar="TASK_ID", help="Serve only this task."),
    ] = None,
    run_id: Annotated[
        str | None,
        typer.Option(
            rich_help_panel="Runs",
            metavar="RUN_ID",
            help="Accept only this run, with a token of its own (--agent-token-file, else "
            "RUN_ID.agent.token in STATE_DIR/run-tokens, made once). Without it the evaluator is "
            "shared: the harness opens each run (OpenRun), which gets a token and a directory "
            "SUBMISSION_DIR/<run_id>/ of its own.",
        ),
    ] = None,
    allow_practice_without_run: Annotated[
        bool,
        typer.Option(
            "--allow-practice-without-run",
            rich_help_panel="Runs",
            help="A shared evaluator: let STATE_DIR/practice.token (made now, a secret of the "
            "operator, never given to any run's agent) open practice sessions outside any run, "
            "which count against no run's budget. Off: no token practises outside a run.",
        ),
    ] = False,
    workers: Annotated[
        int | None,
        typer.Option(rich_help_panel="Execution", metavar="N", help="Rollout worker processes."),
    ] = None,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
    max_sessions: Annotated[
        int | None,
        typer.Option(
            rich_help_panel="Execution",
            metavar="N",
            help="Concurrent interactive sessions per run (overrides the tasks' limit).",
        ),
    ] = None,
    max_sessions_total: Annotated[
        int | None,
        typer.Option(
            rich_help_panel="Execution",
            metavar="N",
            min=1,
            help="Concurrent interactive sessions of all runs together (default: 64, and at "
            "least the per-run limit).",
        ),
    ] = None,
    job_lease_s: Annotated[
        float | None,
        typer.Option(
            rich_help_panel="Execution",
            metavar="SECONDS",
            min=0.1,
            help="Seconds this process's hold on a running job lasts unrenewed (default 15; "
            "renewed every third of it). A job of a process that died is taken over this long "
            "after its last renewal by an evaluator on the same state dir that may run it.",
            show_default=False,
        ),
    ] = None,
    videos: Annotated[
        int,
        typer.Option(
            "--videos",
            rich_help_panel="Execution",
            metavar="K",
            min=0,
            max=10,
            help="The most hidden-seed episodes of a run rendered to video once its official "
            "result is recorded, when its harness asks (0: keep nothing for videos, render "
            "none).",
        ),
    ] = 3,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            rich_help_panel="Execution",
            metavar="URL",
            help="The job store (default: STATE_DIR/jobs.sqlite3): a SQLite file path, or "
            "postgresql://USER@HOST/DB for evaluator replicas sharing one database "
            "(start each with the same --store, state dir and submission dir).",
            show_default=False,
        ),
    ] = None,
    drain_s: Annotated[
        float,
        typer.Option(
            "--drain-s",
            rich_help_panel="Execution",
            metavar="SECONDS",
            min=0,
            help="On the first SIGTERM or Ctrl-C: seconds the running job gets to finish "
            "(no job is claimed, OpenSession and OpenRun are refused meanwhile); one still "
            "running then is requeued at once for another evaluator. A second signal stops "
            "at once.",
        ),
    ] = DEFAULT_DRAIN_S,
) -> None:
    """Serve AleEnv on two listeners until interrupted (Ctrl-C or SIGTERM).

    The first signal drains (``--drain-s``): no more jobs are claimed, the running job
    finishes or, past the drain, is requeued for another evaluator, open sessions are
    closed with UNAVAILABLE, and the process prints what it did, "evaluator stopped",
    and exits 0. A second signal stops at once: a running job's rollouts are stopped,
    the job stays RUNNING and its lease runs out (another evaluator on the store may
    then take it over).
    """
    _check_submission_dir(submission_dir)  # before the state dir is made
    from ale_robotics.evaluator.server.tls import listener_tls

    listeners = {"--agent-listen": agent_listen, "--harness-listen": harness_listen}
    tls = listener_tls(tls_cert, tls_key, tls_client_ca, listeners, insecure)
    if metrics_listen is not None:
        from ale_robotics.evaluator.server.metrics import check_metrics_address

        check_metrics_address(metrics_listen, insecure=insecure)
    root = _state_dir(state_dir)
    if allow_practice_without_run and run_id is not None:
        raise InvalidArgumentError(
            "--allow-practice-without-run is for a shared evaluator (without --run-id): an "
            "evaluator bound to one run counts all its practice against that run"
        )
    signals = _Signals()

    from ale_robotics.evaluator import EvaluatorConfig, serve
    from ale_robotics.evaluator.execution import check_executor
    from ale_robotics.evaluator.runs.access import check_run_id
    from ale_robotics.evaluator.state.directory import StateDir
    from ale_robotics.evaluator.store import DEFAULT_LEASE_S

    check_executor(executor, ray_address)  # refused before anything starts, as the store
    store_url = _store_url(store)
    volume = _submission_volume(root, submission_dir)
    if run_id is not None and agent_token_file is None:
        # the run's own token, never the shared agent.token (which no agent may hold)
        agent_token_file = StateDir(root).run_agent_token_file(check_run_id(run_id))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    running = serve(
        EvaluatorConfig(
            root,
            volume,
            task_id=task,
            run_id=run_id,
            workers=workers,
            max_sessions=max_sessions,
            max_sessions_total=max_sessions_total,
            # shared: each run's agent uses the token OpenRun issued for it
            per_run_tokens=run_id is None,
            practice_without_run=allow_practice_without_run,
            job_lease_s=DEFAULT_LEASE_S if job_lease_s is None else job_lease_s,
            store_url=store_url,
            executor=executor,
            ray_address=ray_address,
            video_episodes=videos,
        ),
        agent_listen=agent_listen,
        harness_listen=harness_listen,
        agent_token_file=agent_token_file,
        harness_token_file=harness_token_file,
        tls=tls,
        insecure=insecure,
    )
    _print_serving(
        running,
        root,
        store_url=store_url,
        run_id=run_id,
        agent_token_file=agent_token_file,
        practice_without_run=allow_practice_without_run,
        ray_address=ray_address,
    )
    metrics = _serve_metrics(running, metrics_listen, insecure)
    while not signals.first.wait(1.0):
        pass
    _drain(running, drain_s, signals.second)
    if metrics is not None:
        metrics.stop()
    running.stop()
    console.print("evaluator stopped", highlight=False)


def _serve_metrics(
    running: RunningEvaluator, address: str | None, insecure: bool
) -> MetricsServer | None:
    """The ``--metrics-listen`` endpoint; the evaluator is stopped when it cannot listen."""
    if address is None:
        return None
    from ale_robotics.evaluator.server.metrics import serve_metrics

    try:
        server = serve_metrics(running.evaluator, address, insecure=insecure)
    except BaseException:
        running.stop()
        raise
    console.print(f"  metrics:         http://{server.address}/metrics", highlight=False)
    return server


def _drain(running: RunningEvaluator, drain_s: float, interrupt: threading.Event) -> None:
    """The first signal's drain (:mod:`..evaluator.server.drain`); a second cuts it short."""
    report = running.drain(
        drain_s, interrupt=interrupt, say=lambda line: console.print(line, highlight=False)
    )
    if report.interrupted:
        console.print("drain cut short by a second signal: stopping now", highlight=False)


class _Signals:
    """SIGINT and SIGTERM counted: ``first`` asks for a drain, ``second`` to stop at once.

    Installed before the heavy imports and the start, so that a signal at any point from
    here on is such a request, never a KeyboardInterrupt traceback.
    """

    def __init__(self) -> None:
        self.first = threading.Event()
        self.second = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, *_: object) -> None:
        (self.second if self.first.is_set() else self.first).set()


def _store_url(store: str | None) -> str | None:
    """``--store`` as the evaluator takes it (a SQLite path made absolute), None for the
    state dir's own; a mistyped URL is refused here, before anything starts."""
    from ale_robotics.evaluator.store.factory import StoreKind, parse_store_url

    if store is None:
        return None
    where = parse_store_url(store)
    return str(Path(where.target).absolute()) if where.kind is StoreKind.SQLITE else store


def _check_submission_dir(submission_dir: Path | None) -> None:
    """A given ``--submission-dir`` must be an existing directory: it is the volume the
    agents' sandboxes share with the evaluator, so a missing one is a mistyped path or a
    volume not mounted, refused before anything starts (it used to start and fail every
    submission)."""
    if submission_dir is None or submission_dir.is_dir():
        return
    what = "is not a directory" if submission_dir.exists() else "does not exist"
    raise InvalidArgumentError(
        f"--submission-dir {submission_dir} {what}: give the directory the agents' "
        "submissions are written to (mount the shared volume first), or leave it out for "
        "STATE_DIR/submissions"
    )


def _submission_volume(root: Path, submission_dir: Path | None) -> Path:
    """``--submission-dir`` (checked by :func:`_check_submission_dir`), else
    ``STATE_DIR/submissions`` (made if missing)."""
    if submission_dir is not None:
        return submission_dir.absolute()
    volume = root / "submissions"
    volume.mkdir(exist_ok=True)
    return volume


def _print_serving(
    running: RunningEvaluator,
    root: Path,
    *,
    store_url: str | None,
    run_id: str | None,
    agent_token_file: Path | None,
    practice_without_run: bool,
    ray_address: str | None,
) -> None:
    """What the operator needs once it serves: its channels, store, executor and tokens
    (stderr: a separate step so that the command reads as the serve's steps)."""
    from ale_robotics.evaluator.store import redacted

    if run_id is None:
        tokens = (
            f"  harness token: {root / 'harness.token'} (unless given)\n"
            "  runs: shared; the harness opens each run (OpenRun) and gets its agent token;\n"
            f"  {root / 'agent.token'} reads GetSpec only\n"
            + (
                f"  practice outside runs: {root / 'practice.token'} (never give it to an agent)"
                if practice_without_run
                else "  practice outside runs: off (--allow-practice-without-run)"
            )
        )
    else:
        tokens = (
            f"  run {run_id}; tokens: {agent_token_file} and "
            f"{root / 'harness.token'} (unless given)"
        )
    console.print(
        f"evaluator {__version__} serving\n  state dir:       {root}\n"
        f"  agent channel:   {running.agent_address}\n"
        f"  harness channel: {running.harness_address}\n"
        f"  job store:       {redacted(store_url) if store_url else root / 'jobs.sqlite3'}\n"
        f"  executor:        {running.evaluator.pool.kind} ({running.evaluator.pool.workers} "
        f"workers{', Ray at ' + ray_address if ray_address else ''})\n"
        f"{tokens}",
        highlight=False,
    )


@evaluator_app.command("public-key")
@friendly
def evaluator_public_key(
    state_dir: StateDirOpt = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help='One JSON document: {"public_key": "<hex>", "state_dir": "<path>"}.'
        ),
    ] = False,
) -> None:
    """Print the evaluator's Ed25519 public key (hex), for 'trajectory verify --public-key'.

    Creates the key (and the state dir) on first use, as the evaluator would.
    """
    from ale_robotics.evaluator.state.directory import StateDir
    from ale_robotics.trajectory import EvaluatorSigner

    root = _state_dir(state_dir)
    key = EvaluatorSigner.load_or_create(StateDir(root).signing_key_path).public_key_hex
    # typer.echo, not a rich console: those wrap long lines at the terminal width
    if as_json:
        typer.echo(json.dumps({"public_key": key, "state_dir": str(root)}))
    else:
        typer.echo(key)
