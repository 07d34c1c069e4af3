"""The task lifecycle's requests dispatched from the top of the ASGI stack (issue 9).

A request to FastAPI 0.165 passes eight middleware layers before its route: Starlette's error
and exception layers, FastAPI's telemetry, body-limit and exit-stack layers, Orbit's request ids
and body limit, and a router that matches each request twice against routers it includes
(``_IncludedRouter``). For a one-by-one submission that was about a quarter of the HTTP
process's CPU spent before the route's own code (docs/performance.md).

:class:`HotRoutes` sits where Starlette's middleware stack begins, under
:class:`~orbit.api.request_ids.RequestIds` (so every answer has its ``X-Request-Id``, a 500
too: as a middleware added to FastAPI it sat inside Starlette's error layer). A POST to one of
the :data:`HOT` paths is matched here, once, against that route alone, and goes through only
the layers whose behaviour it needs, the same classes as on the full stack, in the same order:

- ``ServerErrorMiddleware`` with the app's 500 handler: an unexpected error is a 500 problem,
  logged by the server;
- :class:`~orbit.api.body_limit.BodyLimit`: both body limits, a 413 problem;
- ``ExceptionMiddleware`` with the app's handlers: every error is the problem document it is
  on the full stack;
- FastAPI's ``AsyncExitStackMiddleware``, which FastAPI's request handler requires;

then the route itself (``APIRoute.handle``: FastAPI's own handler, or a ``LeanRoute``'s). The
one-by-one submission goes first to ``fast_submit.FastSubmit``, which answers its usual request
itself and hands every other one to this path.

Everything else takes the full stack: other methods and paths, a path that only nearly matches
(a trailing slash), an app served under a ``root_path``. The layers left out do nothing for
these routes: FastAPI's telemetry is off (``app._no_framework_telemetry``), its own body limit
is unset (Orbit's is ``BodyLimit``). ``tests/api/test_hot_routes.py`` sends the same requests
both ways and compares the answers.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI
from fastapi.middleware.asyncexitstack import AsyncExitStackMiddleware
from fastapi.routing import APIRoute
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from .body_limit import BodyLimit
from .fast_submit import FastSubmit, error_layers

#: The requests a task's lifecycle makes, each at least once per task.
HOT = (
    "/v1/namespaces/{namespace}/tasks",  # submit
    "/v1/namespaces/{namespace}/tasks:batch",  # submit_many
    "/v1/worker-sessions/{session_id}/lease",
    "/v1/attempts:start",
    "/v1/attempts:complete",
    "/v1/attempts/heartbeat",
    "/v1/attempts/{attempt_id}/start",
    "/v1/attempts/{attempt_id}/complete",
)
METHOD = "POST"


class HotRoutes:
    """ASGI: the :data:`HOT` routes straight to their route, everything else to ``full``."""

    def __init__(self, app: FastAPI, full: ASGIApp, *, max_body_bytes: int) -> None:
        self.app, self.full = app, full
        self.routes = _hot_routes(app)
        error_handler = next(
            (h for key, h in app.exception_handlers.items() if key in (500, Exception)), None
        )
        handlers = {
            key: h for key, h in app.exception_handlers.items() if key not in (500, Exception)
        }

        def errors(inner: ASGIApp) -> ASGIApp:
            return ServerErrorMiddleware(inner, handler=error_handler, debug=app.debug)

        def exceptions(inner: ASGIApp) -> ASGIApp:
            return ExceptionMiddleware(inner, handlers=handlers, debug=app.debug)

        routed = exceptions(AsyncExitStackMiddleware(self._route))
        self.dispatch = errors(BodyLimit(routed, max_bytes=max_body_bytes))
        self.fast_submit = FastSubmit(
            app,
            self.routes[0][1],  # HOT[0]: the one-by-one submission
            fallback=self.dispatch,
            errors=error_layers(lambda inner: errors(exceptions(inner))),
            max_body_bytes=max_body_bytes,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == METHOD and not scope.get("root_path"):
            path = scope["path"]
            for regex, route in self.routes:
                match = regex.match(path)
                if match is not None:
                    scope["path_params"] = match.groupdict()
                    scope["route"], scope["endpoint"] = route, route.endpoint
                    scope.setdefault("router", self.app.router)
                    dispatch = (
                        self.fast_submit if route is self.fast_submit.route else self.dispatch
                    )
                    await dispatch(scope, receive, send)
                    return
        await self.full(scope, receive, send)

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        await scope["route"].handle(scope, receive, send)


def _hot_routes(app: FastAPI) -> list[tuple[re.Pattern[str], APIRoute]]:
    """Each :data:`HOT` path's POST route, with the regex Starlette matches it by. Its path
    parameters must be plain strings (Starlette's ``str`` convertor): the value is passed on
    as matched, as the full stack passes it."""
    found: dict[str, APIRoute] = {}
    for route in _api_routes(app):
        if route.path in HOT and METHOD in (route.methods or ()) and route.path not in found:
            found[route.path] = route
    missing = [path for path in HOT if path not in found]
    if missing:
        raise RuntimeError(f"hot routes not declared by the app: {missing}")
    for route in found.values():
        kinds = {name: type(c).__name__ for name, c in route.param_convertors.items()}
        if any(kind != "StringConvertor" for kind in kinds.values()):
            raise RuntimeError(f"hot route {route.path}: path parameters must be str: {kinds}")
    return [(found[path].path_regex, found[path]) for path in HOT]


def _api_routes(app: FastAPI) -> list[APIRoute]:
    """Every ``APIRoute`` the app serves, in the order the full stack tries them."""
    routes: list[Any] = []
    for route in app.routes:
        original = getattr(route, "original_router", None)  # FastAPI 0.16x: an included router
        if original is not None:
            routes += [r for r in original.routes if isinstance(r, APIRoute)]
        elif isinstance(route, APIRoute):
            routes.append(route)
    return routes
