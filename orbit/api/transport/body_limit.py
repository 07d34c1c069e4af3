"""The request-body size limit as ASGI middleware: refused by ``Content-Length`` before a byte is
read, or as soon as a body without one grows past the limit (api/limits.py explains the limits).

Starlette's own ``max_body_size`` does the same, but answers every 413 in plain text, replacing
the problem document clients rely on; this one raises an HTTP exception that the API's 413
handler turns into a ``payload-too-large`` problem.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` while the route reads the body; FastAPI passes HTTP exceptions
    through to the 413 handler in api/problems.py."""

    def __init__(self) -> None:
        super().__init__(413, "request body too large")


class BodyLimit:
    """ASGI middleware: a request body may be at most ``max_bytes`` (see the module docstring)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        received = 0

        async def limited() -> Message:
            nonlocal received
            if declared is not None and declared > self.max_bytes:
                raise BodyTooLarge  # before reading a single byte
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge
            return message

        await self.app(scope, limited, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
