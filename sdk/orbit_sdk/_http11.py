"""The SDK's own httpx transport: HTTP/1.1 over pooled sockets, answers parsed by ``httptools``
(llhttp, the C parser uvicorn uses).

httpx's default transport (httpcore, with h11's pure-Python state machine) spends about twice
the CPU per request of the standard library's parser: measured against one server, a submission's
request and answer cost ~300 µs in ``http.client`` against ~540 in httpcore and ~730 through
``httpx.HTTPTransport`` (docs/performance.md, issue 9). ``httptools`` reads an answer in about a
sixth of ``http.client``'s time (~6 against ~35 µs). The SDK sends small JSON requests and
reads every answer in full, so it needs little of what httpcore adds (HTTP/2, streaming, proxies
and Unix sockets stay with httpx, which the SDK still uses whenever a proxy is configured or a
transport is passed in: ``_wire``).

What it keeps of httpx's transport, because the SDK relies on it:

- **The same errors**: a refused or failed connect is ``httpx.ConnectError`` (``ConnectTimeout``),
  no free connection ``PoolTimeout`` — nothing was sent, so any call may be retried; a failure
  while sending is ``WriteError``/``WriteTimeout``, while reading ``ReadError``/``ReadTimeout``,
  a malformed or cut answer ``RemoteProtocolError`` — the request may have been applied.
- **The same timeouts**, per request (``connect``, ``write``, ``read``, ``pool``).
- **The same pool limits** (``httpx.Limits``): at most ``max_connections`` in use at once, at
  most ``max_keepalive_connections`` kept idle, each for ``keepalive_expiry`` seconds (uvicorn
  closes an idle connection after 5 s: a client that keeps it longer sends into a closing socket).
- **No request sent on a connection the server has closed**: an idle connection is checked for
  readability before reuse (a closed one reads EOF), as httpcore does, so a non-idempotent call
  is not lost to a stale keep-alive.
- **TLS with httpx's defaults** (``httpx.create_ssl_context()``: certifi's CAs, ``SSL_CERT_FILE``).
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import threading
import time
from typing import Any

import httptools
import httpx

DEFAULT_PORTS = {"http": 80, "https": 443}
#: httpx's own default pool limits (``httpx.Client``'s, which it does not export).
DEFAULT_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)


class _Connection:
    """One socket to one origin; ``idle_since`` while it waits in the pool."""

    __slots__ = ("idle_since", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.idle_since = sock, 0.0

    def stale(self, now: float, expiry: float | None) -> bool:
        """Kept too long, or readable while idle: the server closed it (EOF) or sent what no
        request asked for. Either way no request may go on it."""
        if expiry is not None and now - self.idle_since > expiry:
            return True
        if isinstance(self.sock, ssl.SSLSocket) and self.sock.pending():
            return True
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):  # closed underneath us
            return True
        return bool(readable)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class Http11Transport(httpx.BaseTransport):
    """HTTP/1.1 keep-alive transport for ``http://`` and ``https://`` URLs (module docstring).
    Thread-safe: each request holds its own connection from the pool."""

    def __init__(
        self,
        limits: httpx.Limits = DEFAULT_LIMITS,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._limits = limits
        self._ssl_context = ssl_context
        self._lock = threading.Lock()
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._idle_count = 0
        self._slots = (
            threading.BoundedSemaphore(limits.max_connections)
            if limits.max_connections is not None
            else None
        )
        self._closed = False

    @property
    def max_connections(self) -> int | None:
        return self._limits.max_connections

    # --- httpx.BaseTransport -------------------------------------------------------------------
    def handle_request(self, request: httpx.Request) -> httpx.Response:
        scheme = request.url.scheme
        if scheme not in DEFAULT_PORTS:
            raise httpx.UnsupportedProtocol(
                f"the SDK's transport speaks http and https, not {scheme!r}"
            )
        origin = (scheme, request.url.host, request.url.port or DEFAULT_PORTS[scheme])
        timeouts = request.extensions.get("timeout", {})
        answer = self.exchange(origin, _serialize(request), request.method, timeouts, request)
        return answer.response(request)

    def exchange(
        self,
        origin: tuple[str, str, int],
        message: bytes,
        method: str,
        timeouts: dict[str, Any],
        request: httpx.Request | None = None,
    ) -> Answer:
        """Send ``message`` (a whole HTTP/1.1 request) to ``origin`` on a pooled connection and
        read its whole answer; httpx's errors (module docstring), naming ``request`` if given."""
        self._acquire_slot(timeouts.get("pool"), request)
        try:
            connection = self._idle_connection(origin) or self._connect(origin, timeouts, request)
            try:
                answer = _exchange(connection.sock, message, method, timeouts, request)
            except BaseException:
                connection.close()
                raise
            self._release(origin, connection, answer.reusable)
        finally:
            if self._slots is not None:
                self._slots.release()
        return answer

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle = [c for connections in self._idle.values() for c in connections]
            self._idle.clear()
            self._idle_count = 0
        for connection in idle:
            connection.close()

    # --- the pool ------------------------------------------------------------------------------
    def _acquire_slot(self, timeout: float | None, request: httpx.Request | None) -> None:
        if self._slots is None:
            return
        if not self._slots.acquire(timeout=timeout):
            raise httpx.PoolTimeout(
                "no connection of the pool became free in time", request=request
            )

    def _idle_connection(self, origin: tuple[str, str, int]) -> _Connection | None:
        """The most recently used idle connection to ``origin`` that is still usable."""
        now, dropped = time.monotonic(), []
        found = None
        with self._lock:
            connections = self._idle.get(origin)
            while connections:
                candidate = connections.pop()
                self._idle_count -= 1
                if candidate.stale(now, self._limits.keepalive_expiry):
                    dropped.append(candidate)
                    continue
                found = candidate
                break
        for connection in dropped:
            connection.close()
        return found

    def _release(
        self, origin: tuple[str, str, int], connection: _Connection, reusable: bool
    ) -> None:
        keep = self._limits.max_keepalive_connections
        with self._lock:
            if reusable and not self._closed and (keep is None or self._idle_count < keep):
                connection.idle_since = time.monotonic()
                self._idle.setdefault(origin, []).append(connection)
                self._idle_count += 1
                return
        connection.close()

    def _connect(
        self,
        origin: tuple[str, str, int],
        timeouts: dict[str, Any],
        request: httpx.Request | None,
    ) -> _Connection:
        scheme, host, port = origin
        if self._closed:
            raise RuntimeError("Cannot send a request, as the transport has been closed.")
        try:
            sock = socket.create_connection((host, port), timeout=timeouts.get("connect"))
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(str(exc) or "connect timed out", request=request) from exc
        except OSError as exc:
            raise httpx.ConnectError(str(exc), request=request) from exc
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if scheme == "https":
                sock = self._tls().wrap_socket(sock, server_hostname=host)
        except TimeoutError as exc:
            sock.close()
            raise httpx.ConnectTimeout(
                str(exc) or "TLS handshake timed out", request=request
            ) from exc
        except OSError as exc:  # ssl.SSLError is an OSError: a certificate that does not verify
            sock.close()
            raise httpx.ConnectError(str(exc), request=request) from exc
        return _Connection(sock)

    def _tls(self) -> ssl.SSLContext:
        if self._ssl_context is None:
            self._ssl_context = httpx.create_ssl_context()
        return self._ssl_context


class Answer:
    """A whole answer: status, reason phrase, headers as sent, the body (de-chunked, not
    decoded), and whether the connection may carry another request."""

    __slots__ = ("body", "headers", "reason", "reusable", "status")

    def __init__(
        self,
        status: int,
        reason: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        reusable: bool,
    ) -> None:
        self.status, self.reason, self.headers = status, reason, headers
        self.body, self.reusable = body, reusable

    def response(self, request: httpx.Request) -> httpx.Response:
        """As httpx's response to ``request`` (unread: httpx decodes the body as it reads)."""
        return httpx.Response(
            self.status,
            headers=self.headers,
            stream=httpx.ByteStream(self.body),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": self.reason},
            request=request,
        )


def _exchange(
    sock: socket.socket,
    message: bytes,
    method: str,
    timeouts: dict[str, Any],
    request: httpx.Request | None,
) -> Answer:
    """Send ``message``, read its whole answer."""
    unsent: OSError | None = None
    try:
        sock.settimeout(timeouts.get("write"))
        sock.sendall(message)
    except TimeoutError as exc:
        raise httpx.WriteTimeout(str(exc) or "write timed out", request=request) from exc
    except OSError as exc:
        # The server may have answered before reading the whole body (a 413) and closed:
        # that answer is read, as httpcore reads it; without one, the write failed.
        unsent = exc
    try:
        answer = _read_answer(sock, method, timeouts, request)
    except httpx.TransportError:
        if unsent is not None:
            raise httpx.WriteError(str(unsent), request=request) from unsent
        raise
    answer.reusable = answer.reusable and unsent is None
    return answer


class _Reading:
    """httptools' callbacks for one request's answer. The final answer is taken whole when its
    message completes (an interim 1xx answer is skipped; an answer to HEAD ends with its
    headers); any message begun after it means bytes no request asked for."""

    __slots__ = ("body", "extra", "final", "head", "headers", "headers_done", "parser", "reason")

    def __init__(self, method: str) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.head = method == "HEAD"
        self.final: Answer | None = None
        self.extra = False  # bytes after the final answer: the connection is not reused
        self.on_message_begin()

    def on_message_begin(self) -> None:
        if self.final is not None:
            self.extra = True
            return
        self.reason = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.headers_done = False

    def on_status(self, reason: bytes) -> None:
        if self.final is None:
            self.reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.final is None:
            self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        if self.final is None:
            self.headers_done = True
            if self.head:
                self._take(self.parser.get_status_code(), b"")

    def on_body(self, chunk: bytes) -> None:
        if self.final is None:
            self.body.append(chunk)

    def on_message_complete(self) -> None:
        if self.final is None:
            status = self.parser.get_status_code()
            if 100 <= status < 200 and status != 101:  # an interim answer: the final follows
                self.on_message_begin()
            else:
                self._take(status, b"".join(self.body))

    def _take(self, status: int, body: bytes) -> None:
        # Read in the callback: llhttp forgets a message's status and keep-alive once it ends.
        keep = self.parser.should_keep_alive()
        self.final = Answer(status, self.reason, self.headers, body, keep)


def _read_answer(
    sock: socket.socket, method: str, timeouts: dict[str, Any], request: httpx.Request | None
) -> Answer:
    reading = _Reading(method)
    try:
        sock.settimeout(timeouts.get("read"))
        while reading.final is None:
            data = sock.recv(65536)
            if not data:
                return _at_eof(reading, request)
            reading.parser.feed_data(data)
    except TimeoutError as exc:
        raise httpx.ReadTimeout(str(exc) or "read timed out", request=request) from exc
    except httptools.HttpParserError as exc:  # malformed answer, or bytes after it
        if reading.final is None:
            raise httpx.RemoteProtocolError(str(exc), request=request) from exc
        reading.extra = True
    except OSError as exc:
        raise httpx.ReadError(str(exc), request=request) from exc
    final = reading.final
    final.reusable = final.reusable and not reading.extra
    return final


def _at_eof(reading: _Reading, request: httpx.Request | None) -> Answer:
    """The server closed the connection: the answer ends here if it is one whose body runs to
    the close (neither a length nor chunks); anything else was cut short."""
    if not reading.headers_done:
        raise httpx.RemoteProtocolError(
            "the server closed the connection without an answer"
            if not reading.headers
            else "the server closed the connection in the middle of an answer's headers",
            request=request,
        )
    framed = {name.lower() for name, _ in reading.headers} & {
        b"content-length",
        b"transfer-encoding",
    }
    if framed:
        raise httpx.RemoteProtocolError(
            "the server closed the connection before the answer's body was complete",
            request=request,
        )
    status = reading.parser.get_status_code()
    return Answer(status, reading.reason, reading.headers, b"".join(reading.body), False)


def _serialize(request: httpx.Request) -> bytes:
    """The request line, httpx's headers (``Host`` and ``Content-Length`` among them) and the
    body, in one buffer: one ``send`` per request."""
    body = request.read()
    head = [b"%s %s HTTP/1.1" % (request.method.encode("ascii"), request.url.raw_path)]
    head.extend(name + b": " + value for name, value in request.headers.raw)
    chunked = request.headers.get("transfer-encoding", "").lower() == "chunked"
    return b"\r\n".join(head) + b"\r\n\r\n" + (_chunked(body) if chunked else body)


def _chunked(body: bytes) -> bytes:
    return (b"%x\r\n%s\r\n" % (len(body), body) if body else b"") + b"0\r\n\r\n"
