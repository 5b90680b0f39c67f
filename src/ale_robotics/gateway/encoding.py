"""Decoding what the upstream compressed although the gateway asked it not to.

The gateway asks the upstream for ``Accept-Encoding: identity`` and answers the agent in
plain bytes, without ``Content-Encoding``: the agent's SDK gets what it can read, and the
gateway reads the usage out of the decoded body (a proxy or a provider may compress
anyway). HTTP's two common codings are decoded with :mod:`zlib`, incrementally, so a
stream stays a stream; an answer in any other coding is refused (a 502 saying which),
since the gateway could neither meter it nor hand it on readable.

The gateway's HTTP client decodes nothing itself (``auto_decompress=False``): it would
raise on a coding it cannot decode before the gateway saw the answer's status.
"""

from __future__ import annotations

import zlib
from typing import Final

__all__ = ["DecodeError", "Decoder", "decoder_for"]

_IDENTITY: Final = frozenset({"", "identity"})


class DecodeError(ValueError):
    """An answer the gateway cannot decode: its coding, or its bytes."""


class Decoder:
    """One answer's body decoded as its bytes arrive (``gzip``, ``x-gzip``, ``deflate``)."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self._z: zlib._Decompress | None = None  # deflate's format is known at its first byte
        if coding in ("gzip", "x-gzip"):
            self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif coding != "deflate":
            raise DecodeError(f"content-encoding {coding!r}")

    def feed(self, data: bytes) -> bytes:
        if not data:
            return b""
        if self._z is None:
            # HTTP's "deflate" is zlib's format, but some servers send raw deflate.
            zlib_format = data[0] & 0x0F == 8
            self._z = zlib.decompressobj(zlib.MAX_WBITS if zlib_format else -zlib.MAX_WBITS)
        try:
            return self._z.decompress(data)
        except zlib.error as exc:
            raise DecodeError(f"{self.coding} body that does not decode ({exc})") from None

    def end(self) -> bytes:
        if self._z is None:
            return b""
        try:
            return self._z.flush()
        except zlib.error as exc:
            raise DecodeError(f"{self.coding} body that does not decode ({exc})") from None


def decoder_for(content_encoding: str) -> Decoder | None:
    """The decoder for an answer's ``Content-Encoding`` (None: identity). Raises
    :class:`DecodeError` for a coding the gateway cannot decode."""
    coding = content_encoding.strip().lower()
    return None if coding in _IDENTITY else Decoder(coding)
