"""uvicorn's HTTP/1.1 protocol (httptools), with each answer written to its socket once (issue 9).

uvicorn writes an answer as the ASGI app sends it: the status line and headers when the app sends
``http.response.start``, the body when it sends ``http.response.body`` — two ``send`` calls, and
over TCP two segments, each waking the client. Orbit's answers are small JSON documents sent in
one body message, so the second write follows the first within the same turn of the event loop.
A profile of `orbit server` under one-by-one submissions put those writes at about a tenth of the
HTTP process's busy time (docs/performance.md).

:class:`CoalescingHttpToolsProtocol` hands its request cycles a transport that gathers the
writes made in one turn of the event loop and sends them together at the end of that turn
(``loop.call_soon``): one ``send`` for headers and body. Everything else is the real transport's:
flow control (pause and resume) acts on it directly, and closing sends what was gathered first,
so no byte is lost or reordered. An answer streamed over several turns is sent turn by turn, as
before. ``tests/api/test_http_protocol.py`` serves real requests through it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class _CoalescingTransport:
    """The writes of one event-loop turn in one ``send``; the rest is the real transport."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport, self._loop = transport, loop
        self._gathered: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not self._gathered:
            self._loop.call_soon(self.flush)
        self._gathered.append(bytes(data))

    def flush(self) -> None:
        if not self._gathered:
            return
        data = b"".join(self._gathered)
        self._gathered.clear()
        if not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class CoalescingHttpToolsProtocol(HttpToolsProtocol):
    """``uvicorn.Config(http=...)``: see the module docstring."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # The request cycles and the protocol's own answers (400, 503) write through this;
        # FlowControl keeps the real transport it was given above.
        self.transport = _CoalescingTransport(transport, self.loop)  # type: ignore[assignment]


#: What ``orbit server`` passes to ``uvicorn.Config``, with one process or several.
UVICORN_PROTOCOLS: dict[str, Any] = {
    "http": CoalescingHttpToolsProtocol,
    "ws": "none",  # Orbit serves no WebSocket
}
