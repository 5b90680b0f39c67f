"""Checks of a run on a separate evaluator, before the run directory is made.

``--evaluator`` names the evaluator's agent listener: a Unix socket, or ``HOST:PORT``
on TCP, or several (``A:P,B:P``: replicas, tried in order for each connection, see
:mod:`ale_robotics.harness.remote.relay`). A TCP evaluator needs its harness listener
(``--evaluator-harness``: two listeners, two ports, two tokens), its harness token, and
``--tls-ca`` unless every address is a loopback one or ``--insecure`` is given. Each
missing piece is refused here with what to give (exit 2, nothing made), not found out
by the evaluator as "missing or wrong token" once the run has started.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ale_robotics.addresses import is_loopback, split_host_port
from ale_robotics.errors import InvalidArgumentError
from ale_robotics.harness.options import RunSettings, default_state_dir
from ale_robotics.harness.remote.relay import Upstream

if TYPE_CHECKING:
    from ale_robotics.client.tls import ClientTls

__all__ = ["check_remote", "default_harness_token", "remote_tls", "tcp_upstreams"]

_TLS_FLAGS = (("tls_ca", "--tls-ca"), ("tls_client_cert", "--tls-client-cert"),
              ("tls_client_key", "--tls-client-key"), ("insecure", "--insecure"))  # fmt: skip


def tcp_upstreams(value: str, flag: str) -> list[Upstream] | None:
    """``HOST:PORT[,HOST:PORT...]`` -> the upstreams in order; None for a Unix socket or a
    ``docker-exec://`` address (no relay); refused when only some parts are TCP addresses."""
    if value.startswith(("unix:", "/", ".", "docker-exec://")):
        return None
    parts = [p.strip() for p in value.split(",")]
    upstreams = [split_host_port(p) for p in parts]
    if None in upstreams:
        bad = next(p for p, u in zip(parts, upstreams, strict=True) if u is None)
        raise InvalidArgumentError(
            f"{flag} {value}: {bad!r} is no HOST:PORT; give unix://PATH, or HOST:PORT "
            "(several, comma-separated, for replicas)"
        )
    return [u for u in upstreams if u is not None]


def default_harness_token(opts: RunSettings) -> Path | None:
    """``harness.token`` of the evaluator's state dir: the one next to its agent socket
    (``evaluator serve``'s default layout), else ``--state-dir``, else the default."""
    assert opts.evaluator is not None
    candidates = []
    if opts.evaluator.startswith("unix://"):
        sock = Path(opts.evaluator.removeprefix("unix://"))
        candidates += [sock.parent.parent / "harness.token", sock.parent / "harness.token"]
    candidates.append((opts.state_dir or default_state_dir()) / "harness.token")
    return next((c for c in candidates if c.is_file()), None)


def check_remote(opts: RunSettings) -> None:
    """Refuse a separate evaluator's options that cannot work (see the module doc)."""
    agent = tcp_upstreams(opts.evaluator, "--evaluator") if opts.evaluator else None
    if agent is None:
        for name, flag in _TLS_FLAGS:
            if getattr(opts, name):
                raise InvalidArgumentError(
                    f"{flag} is for an evaluator on TCP: it goes with --evaluator HOST:PORT"
                )
    if opts.evaluator is None or opts.evaluator.startswith("docker-exec://"):
        return
    if agent is not None:
        _check_tcp(opts, agent)
    token = opts.harness_token_file or default_harness_token(opts)
    where = "the evaluator host's STATE_DIR/harness.token, copied here"
    if token is None:
        raise InvalidArgumentError(
            f"--evaluator {opts.evaluator} needs its harness token: give --harness-token-file "
            f"FILE ({where if agent is not None else 'STATE_DIR/harness.token'})"
        )
    try:
        if not token.read_text().strip():
            raise InvalidArgumentError(f"--harness-token-file {token} is empty: give {where}")
    except OSError as exc:
        raise InvalidArgumentError(
            f"--harness-token-file {token}: cannot read it ({exc.strerror or exc})"
        ) from None
    remote_tls(opts)


def _check_tcp(opts: RunSettings, agent: list[Upstream]) -> None:
    if opts.evaluator_harness is None:
        raise InvalidArgumentError(
            f"--evaluator {opts.evaluator} is a TCP address: give --evaluator-harness HOST:PORT "
            "too (the evaluator's harness listener, --harness-listen of 'evaluator serve')"
        )
    harness = tcp_upstreams(opts.evaluator_harness, "--evaluator-harness")
    if harness is None:
        raise InvalidArgumentError(
            "--evaluator-harness must be HOST:PORT too when --evaluator is: the harness "
            "reaches both listeners of the evaluator over the same network"
        )
    hosts = agent + harness
    off_loopback = [f"{h}:{p}" for h, p in hosts if not is_loopback(f"[{h}]:{p}")]
    if opts.tls_ca is None and off_loopback and not opts.insecure:
        raise InvalidArgumentError(
            f"--evaluator {off_loopback[0]} is not on this host and its tokens would cross the "
            "network in clear: give --tls-ca FILE (the CA of the evaluator's certificate; see "
            "docs/remote-evaluator.md), or --insecure on a network you trust"
        )


def remote_tls(opts: RunSettings) -> ClientTls | None:
    """The harness's TLS material for a TCP evaluator (read and checked), None: plaintext."""
    if opts.tls_ca is None:
        if opts.tls_client_cert is not None or opts.tls_client_key is not None:
            raise InvalidArgumentError(
                "--tls-client-cert/--tls-client-key go with --tls-ca (the evaluator's CA)"
            )
        return None
    # Imported here: the client's TLS imports gRPC, which a run's checks do without.
    from ale_robotics.client.tls import ClientTls

    return ClientTls.from_files(opts.tls_ca, opts.tls_client_cert, opts.tls_client_key)
