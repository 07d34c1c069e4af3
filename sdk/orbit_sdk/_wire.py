"""The httpx client each SDK object sends through, and the transport that carries its requests.

``httpx.Client.send`` wraps every exchange in layers the SDK does not use: an authentication
flow, redirect handling, event hooks, a timer and a log line per request. For a submission that
was about a sixth of the SDK's CPU per call (docs/performance.md, issue 9). When the SDK knows
the one transport that would carry every request of the client, ``SyncTransport`` and
``AsyncTransport`` hand each request to it themselves (``handle_request``, httpx's public
extension point) and keep the part of ``send`` the SDK relies on: a closed client refuses to
send, the response knows its request and is read in full, and an answer that sets a cookie (an
ingress's affinity cookie) fills the client's cookie jar.

httpx decides that transport as follows, and so do we: one passed in carries everything; without
one, httpx makes its own — unless proxy variables are set in the environment, when some URLs go
through a proxy's transport instead. Then, and when the server URL holds a user name and
password (httpx turns them into basic authentication), requests keep going through ``send``.
"""

from __future__ import annotations

import http.cookiejar
import json
import urllib.request
from collections.abc import Callable
from typing import Any

import httpx

from ._http11 import DEFAULT_LIMITS, DEFAULT_PORTS, Http11Transport

#: Environment proxy schemes httpx honours (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``).
_PROXY_SCHEMES = ("http", "https", "all")


class ResponseCookieJar(http.cookiejar.CookieJar):
    """The clients' cookie jar: httpx hands it every response, and the standard jar rebuilds
    the response's headers as an e-mail message to look for cookies in them (25 of the ~60 µs
    httpx spends on cookies per response, ~2% of a submission's CPU in the SDK;
    docs/performance.md). A response without ``Set-Cookie`` has none to give, so it is skipped;
    one with it (an ingress's affinity cookie) is read as before. Handed anything other than
    httpx's usual response wrapper, the jar reads it as the standard one would."""

    def extract_cookies(self, response: Any, request: Any) -> None:
        headers = getattr(getattr(response, "response", None), "headers", None)
        if isinstance(headers, httpx.Headers) and "set-cookie" not in headers:
            return
        super().extract_cookies(response, request)


def _env_proxies() -> bool:
    proxies = urllib.request.getproxies()
    return any(proxies.get(scheme) for scheme in _PROXY_SCHEMES)


def _direct_possible(server: str) -> bool:
    url = httpx.URL(server)
    return not (url.username or url.password)


def sync_http(
    server: str,
    headers: dict[str, str],
    timeout: float,
    transport: httpx.BaseTransport | None,
    limits: httpx.Limits = DEFAULT_LIMITS,
) -> tuple[httpx.Client, httpx.BaseTransport | None]:
    """The client, and the transport every one of its requests would reach (None: ``send``)."""
    direct = transport
    if direct is None and not _env_proxies():
        direct = Http11Transport(limits=limits)
    client = httpx.Client(
        base_url=server,
        headers=headers,
        timeout=timeout,
        transport=direct,
        cookies=ResponseCookieJar(),
        limits=limits,
    )
    return client, direct if _direct_possible(server) else None


def async_http(
    server: str,
    headers: dict[str, str],
    timeout: float,
    transport: httpx.AsyncBaseTransport | None,
) -> tuple[httpx.AsyncClient, httpx.AsyncBaseTransport | None]:
    """``sync_http``'s twin for ``httpx.AsyncClient``."""
    direct = transport
    if direct is None and not _env_proxies():
        direct = httpx.AsyncHTTPTransport()
    client = httpx.AsyncClient(
        base_url=server,
        headers=headers,
        timeout=timeout,
        transport=direct,
        cookies=ResponseCookieJar(),
    )
    return client, direct if _direct_possible(server) else None


def _closed() -> RuntimeError:
    # httpx's own words for a closed client, so both ways of sending fail alike.
    return RuntimeError("Cannot send a request, as the client has been closed.")


def exchange(
    client: httpx.Client, direct: httpx.BaseTransport | None, request: httpx.Request
) -> httpx.Response:
    """``client.send(request)``, through ``direct`` when there is one (module docstring)."""
    if direct is None:
        return client.send(request)
    if client.is_closed:
        raise _closed()
    response = direct.handle_request(request)
    response.request = request
    return _read_whole(client, response)


def _read_whole(client: httpx.Client, response: httpx.Response) -> httpx.Response:
    """What ``send`` does with an answer the SDK keeps: read in full, its cookies kept."""
    try:
        response.read()
    except BaseException:
        response.close()
        raise
    if "set-cookie" in response.headers:
        client.cookies.extract_cookies(response)
    return response


async def async_exchange(
    client: httpx.AsyncClient, direct: httpx.AsyncBaseTransport | None, request: httpx.Request
) -> httpx.Response:
    """``exchange``'s twin."""
    if direct is None:
        return await client.send(request)
    if client.is_closed:
        raise _closed()
    response = await direct.handle_async_request(request)
    response.request = request
    try:
        await response.aread()
    except BaseException:
        await response.aclose()
        raise
    if "set-cookie" in response.headers:
        client.cookies.extract_cookies(response)
    return response


class LeanAnswer:
    """A 2xx answer read whole, without an ``httpx.Response``: what the SDK's callers use of a
    successful answer (``json()``, ``status_code``)."""

    __slots__ = ("content", "status_code")
    is_success = True

    def __init__(self, status_code: int, content: bytes) -> None:
        self.status_code, self.content = status_code, content

    def json(self, **kwargs: Any) -> Any:
        return json.loads(self.content, **kwargs)


#: What sending a call gives back: httpx's response, or a lean 2xx answer.
Answered = httpx.Response | LeanAnswer

#: Answer headers only httpx knows what to do with (decoding, the cookie jar).
_HTTPX_HEADERS = frozenset({b"content-encoding", b"set-cookie"})


class LeanWire:
    """Sends a call straight to the SDK's own transport as bytes, without building an
    ``httpx.Request`` and reading the answer into an ``httpx.Response`` (issue 9): one
    ``Client.submit`` cost the SDK ~400 µs of CPU under load, where a bare socket with the same
    parser and ``Task`` model costs ~110 (docs/performance.md).

    It writes what httpx would send for the same call — the request line, ``Host``, the client's
    headers as they are at the time of the call, and the JSON body as httpx encodes it
    (``Content-Length``, ``Content-Type``) — and a 2xx answer comes back as a
    :class:`LeanAnswer`. Everything else is left to httpx: an answer that is not 2xx or that
    carries ``Content-Encoding`` or ``Set-Cookie`` is read into an ``httpx.Response`` (the
    request built then), and a call is not sent this way at all when it has query parameters,
    when the client holds cookies (its ``Cookie`` header is httpx's to write) or for HEAD."""

    def __init__(self, client: httpx.Client, transport: Http11Transport) -> None:
        self.client, self.transport = client, transport
        #: path -> (origin, request target, Host line); paths with ids are unbounded: capped.
        self._targets: dict[str, tuple[tuple[str, str, int], bytes, bytes]] = {}
        self._heads: dict[tuple[tuple[bytes, bytes], ...], tuple[bytes, frozenset[bytes]]] = {}

    MAX_PATHS = 512

    def takes(self, method: str, params: Any) -> bool:
        return not params and method != "HEAD" and not len(self.client.cookies.jar)

    def exchange(
        self,
        method: str,
        path: str,
        body: Any,
        timeouts: dict[str, Any],
        request: Callable[[], httpx.Request],
    ) -> Answered:
        """Send the call, read its answer; ``request`` builds the httpx request an answer that
        needs httpx is attached to."""
        client = self.client
        if client.is_closed:
            raise _closed()
        origin, target, host = self._target(path)
        head, named = self._head(tuple(client.headers.raw))
        content = b""
        if body is not None:  # as httpx encodes ``json=``
            text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
            content = text.encode()
        # In httpx's order: Host (and an empty body's length) before the client's headers, a
        # JSON body's length and type after them.
        first = b"" if b"host" in named else host
        last = b""
        if content:
            if b"content-length" not in named:
                last = b"Content-Length: %d\r\n" % len(content)
            if b"content-type" not in named:
                last += b"Content-Type: application/json\r\n"
        elif method in ("POST", "PUT", "PATCH") and b"content-length" not in named:
            first += b"Content-Length: 0\r\n"
        message = b"%s %s HTTP/1.1\r\n%s%s%s\r\n%s" % (
            method.encode("ascii"),
            target,
            first,
            head,
            last,
            content,
        )
        answer = self.transport.exchange(origin, message, method, timeouts)
        if 200 <= answer.status < 300 and not any(
            name.lower() in _HTTPX_HEADERS for name, _ in answer.headers
        ):
            return LeanAnswer(answer.status, answer.body)
        return _read_whole(client, answer.response(request()))

    def _target(self, path: str) -> tuple[tuple[str, str, int], bytes, bytes]:
        found = self._targets.get(path)
        if found is None:
            if len(self._targets) >= self.MAX_PATHS:
                self._targets.clear()
            url = self.client.build_request("GET", path).url  # the client's own resolution
            origin = (url.scheme, url.host, url.port or DEFAULT_PORTS[url.scheme])
            found = self._targets[path] = (origin, url.raw_path, b"Host: %s\r\n" % url.netloc)
        return found

    def _head(self, raw: tuple[tuple[bytes, bytes], ...]) -> tuple[bytes, frozenset[bytes]]:
        """The client's headers as request lines, and their names (lower case)."""
        found = self._heads.get(raw)
        if found is None:
            if len(self._heads) >= 16:
                self._heads.clear()
            lines = b"".join(name + b": " + value + b"\r\n" for name, value in raw)
            found = self._heads[raw] = (lines, frozenset(name.lower() for name, _ in raw))
        return found
