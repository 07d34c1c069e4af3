"""The SDK's own httpx transport: HTTP/1.1 over pooled sockets, responses parsed by the standard
library's ``http.client``.

httpx's default transport (httpcore, with h11's pure-Python state machine) spends about twice
the CPU per request of the standard library's parser: measured against one server, a submission's
request and answer cost ~300 µs in ``http.client`` against ~540 in httpcore and ~730 through
``httpx.HTTPTransport`` (docs/performance.md, issue 9). The SDK sends small JSON requests and
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
import http.client
import select
import socket
import ssl
import threading
import time
from typing import Any

import httpx

_DEFAULT_PORTS = {"http": 80, "https": 443}
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
        if scheme not in _DEFAULT_PORTS:
            raise httpx.UnsupportedProtocol(
                f"the SDK's transport speaks http and https, not {scheme!r}"
            )
        timeouts = request.extensions.get("timeout", {})
        origin = (scheme, request.url.host, request.url.port or _DEFAULT_PORTS[scheme])
        self._acquire_slot(timeouts.get("pool"), request)
        try:
            connection = self._idle_connection(origin) or self._connect(origin, timeouts, request)
            try:
                status, reason, headers, body, reusable = self._exchange(
                    connection.sock, request, timeouts
                )
            except BaseException:
                connection.close()
                raise
            self._release(origin, connection, reusable)
        finally:
            if self._slots is not None:
                self._slots.release()
        return httpx.Response(
            status,
            headers=headers,
            stream=httpx.ByteStream(body),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": reason},
            request=request,
        )

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle = [c for connections in self._idle.values() for c in connections]
            self._idle.clear()
            self._idle_count = 0
        for connection in idle:
            connection.close()

    # --- the pool ------------------------------------------------------------------------------
    def _acquire_slot(self, timeout: float | None, request: httpx.Request) -> None:
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
        self, origin: tuple[str, str, int], timeouts: dict[str, Any], request: httpx.Request
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

    # --- one exchange --------------------------------------------------------------------------
    def _exchange(
        self, sock: socket.socket, request: httpx.Request, timeouts: dict[str, Any]
    ) -> tuple[int, bytes, list[tuple[bytes, bytes]], bytes, bool]:
        """Send ``request``, read its whole answer: status, reason, headers, body, and whether
        the connection may carry another request."""
        message = _serialize(request)
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
            status, reason, headers, body, reusable = _read_answer(sock, request, timeouts)
        except httpx.TransportError:
            if unsent is not None:
                raise httpx.WriteError(str(unsent), request=request) from unsent
            raise
        return status, reason, headers, body, reusable and unsent is None


def _read_answer(
    sock: socket.socket, request: httpx.Request, timeouts: dict[str, Any]
) -> tuple[int, bytes, list[tuple[bytes, bytes]], bytes, bool]:
    response = http.client.HTTPResponse(sock, method=request.method)
    try:
        sock.settimeout(timeouts.get("read"))
        try:
            response.begin()
            body = response.read()
        finally:
            response.close()  # its file object; the socket stays ours
    except TimeoutError as exc:
        raise httpx.ReadTimeout(str(exc) or "read timed out", request=request) from exc
    except http.client.HTTPException as exc:  # cut or malformed answer (RemoteDisconnected…)
        raise httpx.RemoteProtocolError(str(exc) or type(exc).__name__, request=request) from exc
    except OSError as exc:
        raise httpx.ReadError(str(exc), request=request) from exc
    headers = [
        (name.encode("latin-1"), value.encode("latin-1")) for name, value in response.msg.items()
    ]
    reason = response.reason.encode("latin-1", "replace")
    return response.status, reason, headers, body, not response.will_close


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
