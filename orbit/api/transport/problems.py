"""RFC 9457 problem details: one error shape everywhere, with a stable ``type`` per kind."""

from __future__ import annotations

import logging
from typing import Any

import sqlalchemy as sa
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from orbit.api.transport import limits, request_ids
from orbit.api.transport.request_ids import request_id
from orbit_store import errors as store
from orbit_store.db import data_refused, is_data_error

PROBLEM_BASE = "https://orbit.dev/problems/"
MEDIA_TYPE = "application/problem+json"

log = logging.getLogger("orbit.api")

TITLES = {
    "unauthorized": "Missing or invalid bearer token",
    "forbidden": "The token may not do this in this namespace",
    "not-found": "Not found",
    "validation": "The request is not valid",
    "payload-too-large": "The request is too large",
    "idempotency-conflict": "Idempotency key reused for a different request",
    "conflict": "The request conflicts with the current state",
    "quota-exceeded": "A quota refused the request; nothing was written",
    "lease-lost": "The lease is no longer held",
    "stale-attempt": "The attempt is no longer the task's current attempt",
    "invalid-attempt-token": "The attempt token is wrong",
    "cancel-requested": "The task was cancelled before it started",
    "gate-closed": "The task's execution gate is closed",
    "restore-fenced": "The attempt was granted before a restore fence",
    "dispatch-closed": "Dispatch is closed by a restore fence; retry after it reopens",
    "unavailable": "Temporarily unavailable; retry",
    "outcome-unknown": "The outcome is unknown: the database connection was lost at commit",
    "internal": "Internal error",
}


class ApiProblem(Exception):
    def __init__(self, status: int, slug: str, detail: str | None = None, **extra: Any) -> None:
        super().__init__(detail or TITLES[slug])
        self.status, self.slug, self.detail, self.extra = status, slug, detail, extra


def problem(
    status: int, slug: str, detail: str | None, request: Request, **extra: Any
) -> JSONResponse:
    body = {
        "type": PROBLEM_BASE + slug,
        "title": TITLES[slug],
        "status": status,
        "detail": detail,
        "instance": request.url.path,
        **extra,
    }
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE, headers=headers)


_STORE_ERRORS: list[tuple[type[Exception], int, str]] = [
    (store.IdempotencyConflict, 409, "idempotency-conflict"),
    (store.DispatchClosed, 503, "dispatch-closed"),
    (store.NotFound, 404, "not-found"),
    (store.Conflict, 409, "conflict"),
    (store.InvalidRequest, 422, "validation"),
    (store.QuotaExceeded, 429, "quota-exceeded"),
    (store.SchemaOutOfDate, 503, "unavailable"),
]

#: Said for a commit whose acknowledgement was lost (never the driver's own text).
OUTCOME_UNKNOWN_DETAIL = (
    "the connection to the database was lost while the change was being committed: it may or "
    "may not have been made. Retrying the same request is safe: Orbit resolves it by its stable "
    "identity (the idempotency key of a submission, the attempt id and token of a worker call). "
    "A submission without an idempotency key may then exist twice; look it up first."
)
TRANSIENT_DETAIL = (
    "the database stayed busy (deadlock or lock wait) through the server's own retries; nothing "
    "was changed. Retry shortly."
)


def store_status(exc: store.StoreError) -> tuple[int, str]:
    """The HTTP status and problem slug a store error is answered with."""
    for cls, status, slug in _STORE_ERRORS:
        if isinstance(exc, cls):
            return status, slug
    return 500, "internal"


def problem_body(status: int, slug: str, detail: str | None, instance: str) -> dict[str, Any]:
    """A problem document as data: what a batch answers for one refused item."""
    return {
        "type": PROBLEM_BASE + slug,
        "title": TITLES[slug],
        "status": status,
        "detail": detail,
        "instance": instance,
    }


def not_storable_extra(exc: limits.NotStorable) -> dict[str, Any]:
    """The members a 422 for JSON that cannot be stored carries besides the detail."""
    error = {"loc": ["body", exc.path or exc.field], "msg": exc.reason, "type": "json_not_storable"}
    return {"field": exc.field, "errors": [error]}


def install(app: FastAPI) -> None:
    @app.exception_handler(ApiProblem)
    async def _api_problem(request: Request, exc: ApiProblem) -> JSONResponse:
        return problem(exc.status, exc.slug, exc.detail, request, **exc.extra)

    @app.exception_handler(store.AlreadyRetried)
    async def _already_retried(request: Request, exc: store.AlreadyRetried) -> JSONResponse:
        return problem(409, "conflict", str(exc), request, retry_task_id=exc.successor_id)

    @app.exception_handler(store.CommitOutcomeUnknown)
    async def _outcome_unknown(request: Request, exc: store.CommitOutcomeUnknown) -> JSONResponse:
        rid = request_id(request)
        log.warning(
            "database connection lost at commit: outcome unknown",
            extra={
                "request_id": rid,
                "method": request.method,
                "path": request.url.path,
                "error": str(exc),
            },
        )
        return problem(
            503, "outcome-unknown", OUTCOME_UNKNOWN_DETAIL, request, request_id=rid, retry_safe=True
        )

    @app.exception_handler(store.TransientStoreError)
    async def _transient(request: Request, exc: store.TransientStoreError) -> JSONResponse:
        rid = request_id(request)
        log.warning(
            "database busy through every retry",
            extra={"request_id": rid, "path": request.url.path, "error": str(exc)},
        )
        return problem(503, "unavailable", TRANSIENT_DETAIL, request, request_id=rid)

    @app.exception_handler(store.InvalidInput)
    async def _invalid_input(request: Request, exc: store.InvalidInput) -> JSONResponse:
        """Every problem, each where the request's validation errors put theirs."""
        details = [
            {"loc": ["body", *e.loc], "msg": e.message, "type": "schema"} for e in exc.errors
        ]
        return problem(422, "validation", str(exc), request, errors=details)

    @app.exception_handler(store.StoreError)
    async def _store_error(request: Request, exc: store.StoreError) -> JSONResponse:
        status, slug = store_status(exc)
        return problem(status, slug, str(exc), request)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        details = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg"), "type": e.get("type")}
            for e in exc.errors()
        ]
        return problem(
            422, "validation", "the request body or parameters are invalid", request, errors=details
        )

    @app.exception_handler(limits.NotStorable)
    async def _not_storable(request: Request, exc: limits.NotStorable) -> JSONResponse:
        return problem(422, "validation", exc.detail, request, **not_storable_extra(exc))

    @app.exception_handler(limits.PayloadTooLarge)
    async def _too_large(request: Request, exc: limits.PayloadTooLarge) -> JSONResponse:
        return problem(
            413,
            "payload-too-large",
            exc.detail,
            request,
            field=exc.field,
            size_bytes=exc.size_bytes,
            limit_bytes=exc.limit_bytes,
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 413:  # the body limit (max_body_size) stopped reading the body
            limit = request.app.state.ctx.settings.max_payload_bytes
            return problem(
                413,
                "payload-too-large",
                limits.body_too_large_detail(limit),
                request,
                field="body",
                limit_bytes=limits.body_limit(limit),
            )
        slug = {401: "unauthorized", 403: "forbidden", 404: "not-found", 405: "validation"}.get(
            exc.status_code, "validation" if exc.status_code < 500 else "internal"
        )
        return problem(exc.status_code, slug, str(exc.detail), request)

    @app.exception_handler(sa.exc.DataError)
    async def _data_error(request: Request, exc: sa.exc.DataError) -> JSONResponse:
        return problem(422, "validation", str(data_refused(exc)), request)

    @app.exception_handler(sa.exc.OperationalError)
    @app.exception_handler(sa.exc.TimeoutError)
    async def _database_unavailable(request: Request, exc: Exception) -> JSONResponse:
        if is_data_error(exc):  # a value refused by the database: the request's fault
            assert isinstance(exc, sa.exc.DBAPIError)
            return problem(422, "validation", str(data_refused(exc)), request)
        rid = request_id(request)
        log.warning(
            "database unavailable",
            extra={"request_id": rid, "path": request.url.path, "error": exc.__class__.__name__},
        )
        return problem(
            503,
            "unavailable",
            "the database is unavailable; retry shortly",
            request,
            request_id=rid,
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        rid = request_id(request)
        log.exception("unhandled error", extra={"request_id": rid, "path": request.url.path})
        answer = problem(
            500,
            "internal",
            "unexpected server error; see the server log",
            request,
            request_id=rid,
        )
        # Starlette answers a 500 from its outermost layer, past the request-id middleware.
        if rid is not None:
            answer.headers[request_ids.HEADER] = rid
        return answer
