"""A Unix socket of the harness relayed to a remote evaluator's TCP listener, over TLS.

An agent sandbox has no network: it reaches the evaluator through a Unix socket bound
into it (the directory of the socket, as for an embedded evaluator). For an evaluator
on another host (``run --evaluator HOST:PORT``) the harness makes that socket an
:class:`EvaluatorRelay`: each connection the agent opens on it is carried, byte for
byte, to the remote listener, through TLS when the evaluator serves TLS. The agent
speaks plaintext HTTP/2 (gRPC) to the socket, as it does to any Unix socket; the
harness holds the TLS connection upstream (the CA, and the client certificate of
mutual TLS, never enter the sandbox) and offers ``h2`` by ALPN, as a gRPC client does.
A byte relay serves every RPC alike (unary, streams, reflection): it reads no frame.

``upstreams`` are the evaluator's replicas: for each new connection they are tried in
order until one accepts (a TCP connect and, with TLS, a verified handshake), so a
dead replica costs the agent a reconnect (gRPC reconnects by itself), not the run.
The harness's own channel is relayed the same way, from a socket in a private
directory, so that both channels fail over alike.

The relay runs an asyncio loop on a daemon thread of its own; :meth:`close` stops it,
cuts the open connections and removes the socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import threading
from collections.abc import Sequence
from pathlib import Path

__all__ = ["EvaluatorRelay", "Upstream"]

log = logging.getLogger(__name__)

Upstream = tuple[str, int]
"""A replica's listener: (host, port)."""

_CHUNK = 256 * 1024


class EvaluatorRelay:
    """A Unix socket at ``path`` whose every connection goes to the first of ``upstreams``
    that accepts it, through TLS given ``tls`` (see the module doc)."""

    def __init__(
        self,
        path: Path,
        upstreams: Sequence[Upstream],
        tls: ssl.SSLContext | None,
        *,
        connect_timeout_s: float = 5.0,
    ) -> None:
        if not upstreams:
            raise ValueError("a relay needs at least one upstream")
        self.path = path
        self.upstreams = tuple(upstreams)
        self.connect_timeout_s = connect_timeout_s
        self.connections = [0] * len(self.upstreams)
        """Connections relayed to each upstream so far (for logs and tests)."""
        self.refused = [0] * len(self.upstreams)
        """Connections each upstream refused (closed port, failed handshake, timeout)."""
        self._tls = tls
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.AbstractServer | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="ale-evaluator-relay", daemon=True
        )
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(timeout=10)
        except BaseException:
            self.close()
            raise

    @property
    def address(self) -> str:
        """The relay's endpoint, as a gRPC client (or the agent's ``ALE_ENDPOINT``) names it."""
        return f"unix://{self.path}"

    async def _listen(self) -> None:
        self._server = await asyncio.start_unix_server(self._relay, path=str(self.path))

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            upstream = await self._connect()
            if upstream is None:
                return
            up_reader, up_writer = upstream
            self._writers.add(up_writer)
            try:
                pipes = {
                    asyncio.create_task(_pipe(reader, up_writer)),
                    asyncio.create_task(_pipe(up_reader, writer)),
                }
                # HTTP/2 never half-closes: once either side ends, the connection has.
                _, pending = await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
                for task in pending:
                    task.cancel()
            finally:
                self._writers.discard(up_writer)
                _close(up_writer)
        finally:
            self._writers.discard(writer)
            _close(writer)

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """The first upstream, in order, that accepts a connection (and a TLS handshake)."""
        for i, (host, port) in enumerate(self.upstreams):
            try:
                conn = await asyncio.wait_for(
                    asyncio.open_connection(
                        host,
                        port,
                        ssl=self._tls,
                        server_hostname=host if self._tls is not None else None,
                    ),
                    self.connect_timeout_s,
                )
            except (OSError, TimeoutError) as exc:  # ssl.SSLError is an OSError
                self.refused[i] += 1
                log.warning("evaluator %s:%d did not take a connection: %s", host, port, exc)
                continue
            self.connections[i] += 1
            return conn
        log.error("no evaluator of %s took the connection", _names(self.upstreams))
        return None

    def close(self) -> None:
        """Stop accepting, cut every open connection, remove the socket (idempotent)."""
        if self._loop.is_closed():
            return
        if self._loop.is_running():
            with contextlib.suppress(TimeoutError, RuntimeError):
                asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=5)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        if not self._loop.is_running():
            self._loop.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        for task in asyncio.all_tasks() - {asyncio.current_task()}:
            task.cancel()

    def __enter__(self) -> EvaluatorRelay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    """Copy ``src`` to ``dst`` until either ends."""
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while data := await src.read(_CHUNK):
            dst.write(data)
            await dst.drain()


def _close(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, RuntimeError):
        writer.close()


def _names(upstreams: Sequence[Upstream]) -> str:
    return ", ".join(f"{h}:{p}" for h, p in upstreams)
