"""TLS for the evaluator's TCP listeners, and the rule that keeps tokens off the wire in clear.

A listener on a TCP address carries bearer tokens (the harness's, each run's agent
token) in its requests' metadata: on a network, that needs TLS. :class:`ServerTls` is
the certificate and key an operator gives ``evaluator serve --tls-cert/--tls-key``,
and optionally a client CA (``--tls-client-ca``: mutual TLS, every client presents a
certificate it signed); the listener then serves through gRPC's own credentials
(:func:`grpc.ssl_server_credentials`), health and reflection included.

:func:`check_listener` refuses, before anything starts, a plaintext TCP listener on a
non-loopback address unless the operator said ``--insecure``: a loopback address
(127.0.0.0/8, ::1, localhost) and a Unix socket stay plaintext, since only this host
reaches them. Unix sockets are never TLS: the agent's sandbox reaches its socket as a
file, and the harness relays a remote evaluator's TLS channel to one (see
:mod:`ale_robotics.harness.remote.relay`).

The files are read and checked here with the standard library's :mod:`ssl` (a key
that does not match its certificate, a file that is no PEM), so that a mistake is one
line naming the flag, not a listener that fails each handshake later.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import grpc

from ale_robotics.addresses import is_loopback, normalize_address, split_host_port
from ale_robotics.client.tls import check_ca_file, check_key_pair
from ale_robotics.errors import InvalidArgumentError

__all__ = ["ServerTls", "check_listener", "check_listeners", "listener_tls"]


@dataclass(frozen=True)
class ServerTls:
    """The PEM bytes a TLS listener serves with: its certificate chain and key, and the CA
    its clients' certificates must be signed by (None: no client certificate asked)."""

    cert_chain: bytes = field(repr=False)
    private_key: bytes = field(repr=False)
    client_ca: bytes | None = field(default=None, repr=False)

    @classmethod
    def from_files(cls, cert: Path, key: Path, client_ca: Path | None = None) -> ServerTls:
        """Read and check the files (``--tls-cert``, ``--tls-key``, ``--tls-client-ca``).

        Raises :class:`InvalidArgumentError` naming the flag whose file is missing, is no
        PEM, or (the key) does not match the certificate.
        """
        cert_pem, key_pem = check_key_pair(
            cert,
            key,
            ("--tls-cert", "--tls-key"),
            server=True,
            hint=": give the server's certificate and its key",
        )
        ca_pem = None if client_ca is None else check_ca_file(client_ca, "--tls-client-ca")
        return cls(cert_pem, key_pem, ca_pem)

    def credentials(self) -> grpc.ServerCredentials:
        """gRPC's server credentials: TLS, and mutual TLS given a client CA."""
        return grpc.ssl_server_credentials(
            [(self.private_key, self.cert_chain)],
            root_certificates=self.client_ca,
            require_client_auth=self.client_ca is not None,
        )


def check_listener(flag: str, address: str, tls: ServerTls | None, insecure: bool) -> None:
    """Refuse a plaintext TCP listener on a non-loopback address unless ``insecure``.

    ``flag`` names the option that gave ``address`` (``--agent-listen``), for the message.
    """
    addr = normalize_address(address)
    if addr.startswith("unix://") or tls is not None or insecure or is_loopback(addr):
        return
    raise InvalidArgumentError(
        f"{flag} {address} is a TCP address other hosts can reach, and its tokens would "
        "cross the network in clear: give --tls-cert FILE --tls-key FILE (see "
        "docs/remote-evaluator.md), listen on a loopback address or unix://PATH, or pass "
        "--insecure on a network you trust"
    )


def check_listeners(
    listeners: dict[str, str | None], tls: ServerTls | None, insecure: bool
) -> None:
    """:func:`check_listener` for each given listener (flag -> address, None: its Unix
    default), and refuse TLS files with no TCP listener to serve them on."""
    for flag, address in listeners.items():
        if address is not None:
            check_listener(flag, address, tls, insecure)
    tcp = [a for a in listeners.values() if a is not None and split_host_port(a) is not None]
    if tls is not None and not tcp:
        raise InvalidArgumentError(
            "--tls-cert is for TCP listeners, and both listeners are Unix sockets (always "
            "plaintext): give --agent-listen/--harness-listen HOST:PORT, or leave --tls-* out"
        )


def listener_tls(
    cert: Path | None,
    key: Path | None,
    client_ca: Path | None,
    listeners: dict[str, str | None],
    insecure: bool,
) -> ServerTls | None:
    """``serve``'s ``--tls-cert/--tls-key/--tls-client-ca`` read and checked, and its
    ``listeners`` (flag -> address) checked against them (:func:`check_listeners`): all
    before anything is made."""
    tls = None
    if cert is None and key is None:
        if client_ca is not None:
            raise InvalidArgumentError("--tls-client-ca goes with --tls-cert and --tls-key")
    elif cert is None or key is None:
        raise InvalidArgumentError("--tls-cert and --tls-key go together")
    else:
        tls = ServerTls.from_files(cert, key, client_ca)
    check_listeners(listeners, tls, insecure)
    return tls
