"""Certificates for TLS tests, made with the ``openssl`` commands docs/remote-evaluator.md gives.

A CA, a server certificate whose subjectAltName names the loopback addresses the tests
dial, and a client certificate (mutual TLS); each test gets its own, in its tmp dir.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["Certs", "make_certs"]


@dataclass(frozen=True)
class Certs:
    ca: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _signed(
    d: Path, name: str, subject: str, ext: str, ca: tuple[str, str] = ("ca.pem", "ca.key")
) -> None:
    (d / f"{name}.ext").write_text(ext)
    _openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=d,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", ca[0], "-CAkey", ca[1],
        "-CAcreateserial", "-days", "2", "-out", f"{name}.pem", "-extfile", f"{name}.ext",
        cwd=d,
    )  # fmt: skip


def make_certs(d: Path, san: str = "IP:127.0.0.1,IP:127.0.0.2,DNS:localhost") -> Certs:
    """A CA, a server certificate for ``san`` and a client certificate, in ``d``."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (apt-get install openssl)")
    d.mkdir(parents=True, exist_ok=True)
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=ale test CA",
        cwd=d,
    )  # fmt: skip
    _signed(d, "server", "/CN=evaluator", f"subjectAltName={san}\nextendedKeyUsage=serverAuth\n")
    _signed(d, "client", "/CN=harness", "extendedKeyUsage=clientAuth\n")
    return Certs(
        ca=d / "ca.pem",
        ca_key=d / "ca.key",
        server_cert=d / "server.pem",
        server_key=d / "server.key",
        client_cert=d / "client.pem",
        client_key=d / "client.key",
    )
