"""The one-by-one submission's usual request answered in one ASGI callable (issue 9).

``POST /v1/namespaces/{ns}/tasks`` is the request Orbit answers most: one per task. Even past
FastAPI's middleware (``hot_routes``) and its per-request dependency solving (``lean_routes``)
it crossed five ASGI layers, a Starlette ``Request`` and ``Response`` and FastAPI's exception
wrappers before and after the route's own work — about a fifth of the HTTP process's CPU per
submission (docs/performance.md).

:class:`FastSubmit` answers the usual request itself: a JSON body with a ``Content-Length``
within the body limit, a token already in the token cache that may submit in the path's
namespace, a namespace and body that the route's own validators accept, and ``params`` within
the payload limit. It runs the same checks with the route's own fields and the same
acceptance (``routes_tasks.accept_submission``), and writes the answer the route writes: the
same status, headers and document, serialised by the route's response field.

Anything else goes the whole way, before anything was submitted: the request is handed to the
hot route (``fallback``) with the body messages read so far played back, so every refusal —
401, 403, 413, 422, a token the cache does not hold — is answered by the code that answers it
today. An error raised by the acceptance itself (a quota, a key conflict, the database gone)
goes through the app's own error layers (``errors``), as it would from the route.
``tests/api/test_fast_submit.py`` sends each kind of request both ways and compares.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from orbit_store.credentials import Credential, Role, hash_api_token

from . import limits, schemas
from .auth import authorize, bearer_token, credential_for
from .context import AppContext
from .routes_tasks import accept_submission, task_location

#: Raises the error ``FastSubmit`` caught, inside the app's error layers (see ``errors``).
Raise = Callable[[Scope, Receive, Send, BaseException], Awaitable[None]]


class FastSubmit:
    """ASGI for the submission route matched by ``hot_routes`` (see the module docstring)."""

    def __init__(
        self,
        app: FastAPI,
        route: APIRoute,
        *,
        fallback: ASGIApp,
        errors: Raise,
        max_body_bytes: int,
    ) -> None:
        if route.body_field is None or route.response_field is None:
            raise RuntimeError(f"{route.path}: the submission route lost its body or answer")
        self.app, self.route = app, route
        self.fallback, self.errors, self.max_body_bytes = fallback, errors, max_body_bytes
        self.path_fields = route.dependant.path_params
        self.body_field, self.response_field = route.body_field, route.response_field

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        declared, authorization = _usual_headers(scope)
        if declared is None or declared > self.max_body_bytes or authorization is None:
            await self.fallback(scope, receive, send)
            return
        messages, body = await _read_body(receive, declared)
        try:
            checked = self._checked(scope, authorization, body) if body is not None else None
        except Exception:  # a refusal, malformed or too deep JSON: the route answers it as ever
            checked = None
        if checked is None:
            await self.fallback(scope, _played_back(messages, receive), send)
            return
        ctx, namespace, submission, credential = checked
        try:
            task, replayed = await accept_submission(ctx, namespace, submission, credential.name)
            content = self._serialised(task)
        except Exception as exc:  # answered as the route's error is (a problem document)
            await self.errors(scope, _played_back(messages, receive), send, exc)
            return
        head = [
            (b"content-length", str(len(content)).encode()),
            (b"content-type", b"application/json"),
            (b"location", task_location(namespace, task.id).encode()),
        ]
        status = 200 if replayed else 201
        await send({"type": "http.response.start", "status": status, "headers": head})
        await send({"type": "http.response.body", "body": content})

    def _checked(
        self, scope: Scope, authorization: str, body: bytes
    ) -> tuple[AppContext, str, schemas.TaskSubmission, Credential] | None:
        """What the route would accept, or None (or the error the route would raise) where it
        would refuse or look further."""
        namespace = scope["path_params"].get("namespace")
        credential = self._cached_credential(authorization, namespace)
        if credential is None:
            return None
        authorize(credential, namespace, Role.SUBMIT)
        for field in self.path_fields:
            if field.validate(scope["path_params"].get(field.alias), loc=("path", field.alias))[1]:
                return None
        document = json.loads(body)  # as FastAPI parses it
        if not isinstance(document, dict):
            return None
        submission, errors = self.body_field.validate(document, loc=("body",))
        if errors or not isinstance(submission, schemas.TaskSubmission):
            return None
        ctx: AppContext = self.app.state.ctx
        limits.check_payload(ctx.settings.max_payload_bytes, params=submission.params)
        return ctx, namespace, submission, credential

    def _cached_credential(self, authorization: str, namespace: str | None) -> Credential | None:
        """The token's credential as ``auth.current_credential`` resolves it, from the cache
        alone (a miss is the route's to look up)."""
        token = bearer_token(authorization)
        found = self.app.state.token_cache.get(hash_api_token(token)) if token else None
        return credential_for(found, namespace) if found else None

    def _serialised(self, task: schemas.Task) -> bytes:
        value, errors = self.response_field.validate(task, loc=("response",))
        if errors:
            raise RuntimeError(f"a submitted task does not fit its answer: {errors}")
        return self.response_field.serialize_json(value, by_alias=True)


def _usual_headers(scope: Scope) -> tuple[int | None, str | None]:
    """The declared body length and the ``Authorization`` value of a JSON request; (None,
    None) for any other request (no length, a length twice, another content type)."""
    length = authorization = None
    json_body = False
    for name, value in scope["headers"]:
        if name == b"content-length":
            if length is not None or not value.isdigit():
                return None, None
            length = int(value)
        elif name == b"content-type":
            json_body = value == b"application/json"
        elif name == b"authorization":
            authorization = value.decode("latin-1")
    return (length, authorization) if json_body else (None, None)


async def _read_body(receive: Receive, declared: int) -> tuple[list[Message], bytes | None]:
    """The body messages as received, and the body: None when it is not exactly the declared
    length of ``http.request`` messages (the route then reads it all again from the start)."""
    messages: list[Message] = []
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages, None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > declared:
            return messages, None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return messages, b"".join(chunks) if size == declared else None


def _played_back(messages: list[Message], receive: Receive) -> Receive:
    """``receive`` that first returns ``messages`` again, in order."""
    pending = list(messages)

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return replay


def error_layers(layers: Callable[[ASGIApp], ASGIApp]) -> Raise:
    """A ``Raise`` through ``layers`` (the app's own error and exception layers, as
    ``hot_routes`` builds them around a route), so an error is answered as the route's is."""

    async def raise_stored(scope: Scope, receive: Receive, send: Send) -> None:
        raise scope.pop("orbit.fast_submit_error")

    wrapped = layers(raise_stored)

    async def answer(scope: Scope, receive: Receive, send: Send, exc: BaseException) -> None:
        scope["orbit.fast_submit_error"] = exc
        await wrapped(scope, receive, send)

    return answer
