"""The run options of a remote evaluator's TLS (``--tls-ca``, a client certificate, ``--insecure``).

An evaluator on another host serves TCP listeners with TLS (``evaluator serve
--tls-cert``, see docs/remote-evaluator.md); the harness verifies it against
``--tls-ca`` and, under mutual TLS, presents ``--tls-client-cert/--tls-client-key``.
These go with ``--evaluator HOST:PORT`` only; what they are checked against is
:mod:`ale_robotics.harness.remote.checks`, before the run directory is made.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field

from ale_robotics.harness.options.decl import Flag, OptionGroup

__all__ = ["TlsOptions"]


class TlsOptions(OptionGroup):
    """How the harness reaches an evaluator on TCP: TLS, or plaintext said so."""

    tls_ca: Annotated[Path | None, Flag("--tls-ca", metavar="FILE")] = Field(
        default=None,
        description="The CA that signed the TCP --evaluator's certificate (PEM): the harness "
        "relays both channels to it over TLS.",
    )
    tls_client_cert: Annotated[Path | None, Flag("--tls-client-cert", metavar="FILE")] = Field(
        default=None,
        description="Mutual TLS: the harness's certificate (PEM), signed by the CA the "
        "evaluator's --tls-client-ca names.",
    )
    tls_client_key: Annotated[Path | None, Flag("--tls-client-key", metavar="FILE")] = Field(
        default=None, description="The key of --tls-client-cert (PEM)."
    )
    insecure: Annotated[bool, Flag("--insecure")] = Field(
        default=False,
        description="Plaintext to a TCP --evaluator off loopback (no --tls-ca): the tokens "
        "cross the network in clear.",
    )
