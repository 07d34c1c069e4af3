"""Routes that answer like FastAPI without FastAPI's per-request dependency solving (issue 9).

FastAPI works out, on every request, what each parameter of an endpoint needs: it walks the
dependency tree, re-examines each parameter's annotation, builds cache keys, and calls each
dependency through the same generic machinery. For the one-by-one submission — the request
Orbit answers most — that was about a fifth of the server's CPU per request
(docs/performance.md). ``LeanRoute`` does the same work with what it worked out once, when the
route was made: a validator per path parameter, one for the JSON body, and a plain call per
dependency from ``REQUEST_DEPENDENCIES``.

It keeps FastAPI's contract: the endpoint and its declaration are unchanged (so is the OpenAPI
document, which FastAPI still builds from them); the body is read and parsed first (a 413 or
malformed JSON is answered before authentication, as FastAPI does), then the dependencies run
(a 401 before validation), then the path and body are validated with the same pydantic
constraints and the same error locations, and the answer is serialised by the response model.
``tests/api/test_lean_routes.py`` sends the same requests to both kinds of route and compares
the answers. A route whose endpoint needs anything else (query, header or cookie parameters,
forms, other dependencies) is refused when it is made, not served differently.
"""

from __future__ import annotations

import email.message
import json
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from fastapi import Request, Response
from fastapi.datastructures import DefaultPlaceholder
from fastapi.exceptions import RequestValidationError, ResponseValidationError
from fastapi.routing import APIRoute, APIRouter
from fastapi.utils import is_body_allowed_for_status_code
from starlette.exceptions import HTTPException

from .auth import current_credential
from .context import app_context


async def _credential(request: Request) -> Any:
    return await current_credential(request, request.headers.get("authorization"))


#: The dependencies a lean route may have, each as a function of the request alone.
REQUEST_DEPENDENCIES: dict[Callable[..., Any], Callable[[Request], Awaitable[Any]]] = {
    current_credential: _credential,
    app_context: app_context,
}

_MISSING = object()
Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])


class LeanRoute(APIRoute):
    """An ``APIRoute`` whose handler was worked out once (see the module docstring). Use it as
    ``route_class_override`` of the hottest routes only: anything it does not support makes
    the route fail at start-up with the reason."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        return _LeanHandler(self).handle


def lean_post(router: APIRouter, path: str, **declared: Any) -> Callable[[Endpoint], Endpoint]:
    """``@router.post(path, ...)`` made a ``LeanRoute`` (FastAPI's decorator cannot choose the
    route class of one route)."""

    def register(endpoint: Endpoint) -> Endpoint:
        router.add_api_route(
            path, endpoint, methods=["POST"], route_class_override=LeanRoute, **declared
        )
        return endpoint

    return register


def _is_json(content_type: str | None) -> bool:
    """FastAPI's test: ``application/json`` or ``application/*+json``, parameters ignored."""
    if not content_type:
        return False
    if content_type == "application/json":  # what every client sends: no header parsing
        return True
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


class _LeanHandler:
    def __init__(self, route: APIRoute) -> None:
        dependant = route.dependant
        unsupported = [
            kind
            for kind, present in (
                ("query parameters", dependant.query_params),
                ("header parameters", dependant.header_params),
                ("cookie parameters", dependant.cookie_params),
                ("several body parameters", len(dependant.body_params) > 1),
                ("background tasks", dependant.background_tasks_param_name),
                ("a generator endpoint", route.is_json_stream or route.is_sse_stream),
                ("response model options", _response_options(route)),
                ("no response model", route.response_field is None),
                ("a response class", not isinstance(route.response_class, DefaultPlaceholder)),
            )
            if present
        ]
        self.dependencies: list[tuple[str, Callable[[Request], Awaitable[Any]]]] = []
        for sub in dependant.dependencies:
            resolve = REQUEST_DEPENDENCIES.get(sub.call) if sub.call and sub.name else None
            if resolve is None or sub.name is None:
                unsupported.append(f"the dependency {sub.name or sub.call!r}")
            else:
                self.dependencies.append((sub.name, resolve))
        if unsupported or dependant.call is None:
            raise TypeError(f"LeanRoute {route.path}: unsupported {', '.join(unsupported)}")
        self.endpoint = dependant.call
        # FastAPI's own fields (its validators, its error locations), worked out once.
        self.path = dependant.path_params
        self.body = route.body_field
        self.request_name = dependant.request_param_name
        self.response_name = dependant.response_param_name
        self.status_code = route.status_code
        self.response_field = route.response_field

    async def handle(self, request: Request) -> Response:
        body = await self._read_body(request) if self.body is not None else _MISSING
        values: dict[str, Any] = {}
        for name, resolve in self.dependencies:
            values[name] = await resolve(request)
        errors = self._validate(request, body, values)
        if errors:
            raise RequestValidationError(errors, body=None if body is _MISSING else body)
        if self.request_name:
            values[self.request_name] = request
        sub_response = Response()
        del sub_response.headers["content-length"]
        sub_response.status_code = None  # type: ignore[assignment]
        if self.response_name:
            values[self.response_name] = sub_response
        raw = await self.endpoint(**values)
        if isinstance(raw, Response):
            return raw
        return self._answer(raw, sub_response)

    async def _read_body(self, request: Request) -> Any:
        """As FastAPI reads a JSON body: parsed when the content type says JSON, else bytes."""
        try:
            body = await request.body()
            if not body:
                return _MISSING
            if _is_json(request.headers.get("content-type")):
                return json.loads(body)
            return body
        except json.JSONDecodeError as e:
            error = {"type": "json_invalid", "loc": ("body", e.pos), "msg": "JSON decode error"}
            raise RequestValidationError(
                [{**error, "input": {}, "ctx": {"error": e.msg}}], body=e.doc
            ) from e
        except HTTPException:
            raise
        except Exception as e:
            raise HTTPException(400, "There was an error parsing the body") from e

    def _validate(self, request: Request, body: Any, values: dict[str, Any]) -> list[Any]:
        """Path parameters, then the body: FastAPI's order, validators and locations."""
        errors: list[Any] = []
        for field in self.path:
            value, found = field.validate(
                request.path_params.get(field.alias), loc=("path", field.alias)
            )
            errors += found
            values[field.name] = value
        body_field = self.body
        if body_field is not None:
            if body is _MISSING and body_field.field_info.is_required():
                errors.append(
                    {"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}
                )
            elif body is not _MISSING:
                values[body_field.name], found = body_field.validate(body, loc=("body",))
                errors += found
        return errors

    def _answer(self, raw: Any, sub_response: Response) -> Response:
        """The endpoint's value through its response model, as FastAPI serialises it."""
        assert self.response_field is not None
        value, errors = self.response_field.validate(raw, loc=("response",))
        if errors:
            raise ResponseValidationError(errors, body=raw)
        status = sub_response.status_code or self.status_code or 200
        content = self.response_field.serialize_json(value, by_alias=True)
        response = Response(content, status_code=status, media_type="application/json")
        if not is_body_allowed_for_status_code(status):
            response.body = b""
        response.headers.raw.extend(sub_response.headers.raw)
        return response


def _response_options(route: APIRoute) -> bool:
    return bool(
        route.response_model_include
        or route.response_model_exclude
        or route.response_model_exclude_unset
        or route.response_model_exclude_defaults
        or route.response_model_exclude_none
        or not route.response_model_by_alias
    )
