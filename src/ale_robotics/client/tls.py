"""A client's TLS material for an evaluator's TCP listener: the CA, and a certificate of its own.

An evaluator served with ``--tls-cert`` (see :mod:`ale_robotics.evaluator.server.tls`)
is reached through TLS; one with ``--tls-client-ca`` also asks each client for a
certificate that CA signed (mutual TLS). :class:`ClientTls` reads and checks the files
once and gives them in both forms a client needs: gRPC channel credentials
(:meth:`ClientTls.credentials`, for :class:`~ale_robotics.client.sdk.AleClient`) and an
:class:`ssl.SSLContext` speaking HTTP/2 (:meth:`ClientTls.ssl_context`, for the
harness's relay, which carries a sandboxed agent's plaintext gRPC to the evaluator).

The server's certificate must name the host the client dials (a DNS or IP
subjectAltName), as HTTPS does: both forms check it.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from ale_robotics.errors import InvalidArgumentError

__all__ = ["ClientTls", "check_ca_file", "check_key_pair", "read_pem", "ssl_reason"]


def read_pem(path: Path, flag: str) -> bytes:
    """The bytes of ``path``; :class:`InvalidArgumentError` naming ``flag`` when unreadable."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InvalidArgumentError(
            f"{flag} {path}: cannot read it ({exc.strerror or exc}): give a PEM file this "
            "user can read"
        ) from None


def ssl_reason(exc: Exception) -> str:
    """What ``ssl`` says went wrong, in words."""
    reason = getattr(exc, "reason", None) or str(exc)
    return str(reason).lower().replace("_", " ")


def check_key_pair(
    cert: Path, key: Path, flags: tuple[str, str], *, server: bool, hint: str = ""
) -> tuple[bytes, bytes]:
    """The PEM of a certificate and its private key, checked to match (as ``ssl`` loads
    them for a server or a client); InvalidArgumentError naming ``flags`` otherwise."""
    cert_pem, key_pem = read_pem(cert, flags[0]), read_pem(key, flags[1])
    try:
        protocol = ssl.PROTOCOL_TLS_SERVER if server else ssl.PROTOCOL_TLS_CLIENT
        ssl.SSLContext(protocol).load_cert_chain(cert, key)
    except (ssl.SSLError, ValueError) as exc:
        raise InvalidArgumentError(
            f"{flags[0]} {cert} and {flags[1]} {key} are no matching PEM certificate and "
            f"private key ({ssl_reason(exc)}){hint}"
        ) from None
    return cert_pem, key_pem


def check_ca_file(path: Path, flag: str) -> bytes:
    """The PEM bytes of a CA file; refused (naming ``flag``) when it holds no certificate."""
    pem = read_pem(path, flag)
    try:
        ssl.create_default_context(cadata=pem.decode("ascii", "replace"))
    except (ssl.SSLError, ValueError) as exc:
        raise InvalidArgumentError(
            f"{flag} {path} holds no PEM CA certificate ({ssl_reason(exc)}): give the CA's "
            "certificate (ca.pem)"
        ) from None
    return pem


@dataclass(frozen=True)
class ClientTls:
    """A CA to verify the evaluator's certificate with, and an optional client certificate."""

    ca: bytes = field(repr=False)
    cert_file: Path | None = None
    key_file: Path | None = None

    @classmethod
    def from_files(
        cls,
        ca: Path,
        cert: Path | None = None,
        key: Path | None = None,
        *,
        flags: tuple[str, str, str] = ("--tls-ca", "--tls-client-cert", "--tls-client-key"),
    ) -> ClientTls:
        """Read and check the files; :class:`InvalidArgumentError` naming the flag (of
        ``flags``: CA, certificate, key) of a file that is missing or wrong."""
        ca_flag, cert_flag, key_flag = flags
        pem = check_ca_file(ca, ca_flag)
        if (cert is None) != (key is None):
            raise InvalidArgumentError(
                f"{cert_flag} and {key_flag} go together: the client's certificate and its key"
            )
        if cert is not None and key is not None:
            check_key_pair(cert, key, (cert_flag, key_flag), server=False)
        return cls(pem, cert, key)

    def credentials(self) -> grpc.ChannelCredentials:
        """gRPC channel credentials: the CA, and the client certificate if any."""
        cert = self.cert_file.read_bytes() if self.cert_file is not None else None
        key = self.key_file.read_bytes() if self.key_file is not None else None
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca, private_key=key, certificate_chain=cert
        )

    def ssl_context(self) -> ssl.SSLContext:
        """A client context that verifies the server against the CA (host name included),
        presents the client certificate if any, and negotiates HTTP/2 (``h2``, which a
        gRPC server requires of a TLS client)."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_verify_locations(cadata=self.ca.decode("ascii", "replace"))
        if self.cert_file is not None and self.key_file is not None:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        ctx.set_alpn_protocols(["h2"])
        return ctx
