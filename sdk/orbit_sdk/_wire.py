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
import urllib.request
from typing import Any

import httpx

from ._http11 import DEFAULT_LIMITS, Http11Transport

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
