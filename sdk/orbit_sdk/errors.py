"""Typed errors: one class per problem ``type`` the server sends, plus the handler-side signals.

Callers branch on classes (``except LeaseLost``), never on message text: the server's problem
``type`` URL is the stable part of an error, titles and details are for humans. An unknown ``type``
(a newer server) falls back to the class for its HTTP status, so old clients keep working.
"""

from __future__ import annotations

from typing import Any

from .models import Problem

PROBLEM_BASE = "https://orbit.dev/problems/"


class OrbitError(Exception):
    """An error answer from Orbit (or a client-side stand-in for one, see ``client_side``).

    ``problem`` is the RFC 9457 body; ``status`` and ``type`` are shortcuts into it.
    """

    slug: str | None = None
    default_status: int = 500

    def __init__(self, problem: Problem, *, client_side: bool = False) -> None:
        self.problem = problem
        #: True when no server said this (unreachable server, wait timeout): the request's
        #: effect on the server is unknown, or there was no request.
        self.client_side = client_side
        text = problem.title if client_side else f"{problem.title} ({problem.status})"
        if problem.detail:
            text += f": {problem.detail}"
        if problem.errors:  # the part that says what to fix: name every field
            text += " [" + "; ".join(f"{n}: {m}" for n, m in field_errors(problem)) + "]"
        super().__init__(text)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled (multiprocessing, task queues) as what it was made from: Exception's default
        # would call __init__ with the message alone and fail where it is unpickled.
        return (_rebuild, (type(self), self.problem, self.client_side), self.__dict__)

    @property
    def status(self) -> int:
        return self.problem.status

    @property
    def type(self) -> str:
        return self.problem.type

    @classmethod
    def from_detail(cls, detail: str, *, title: str | None = None) -> OrbitError:
        """Build a client-side error of this class; used where no server answer exists."""
        slug = cls.slug or "about:blank"
        problem = Problem(
            type=PROBLEM_BASE + slug if cls.slug else slug,
            title=title or cls.__name__,
            status=cls.default_status,
            detail=detail,
        )
        return cls(problem, client_side=True)


def _rebuild(cls: type[OrbitError], problem: Problem, client_side: bool) -> OrbitError:
    return cls(problem, client_side=client_side)


class Unauthorized(OrbitError):
    slug, default_status = "unauthorized", 401


class Forbidden(OrbitError):
    slug, default_status = "forbidden", 403


class NotFound(OrbitError):
    slug, default_status = "not-found", 404


class ValidationFailed(OrbitError):
    """The request was malformed; ``fields`` names each offending field and what it needs."""

    slug, default_status = "validation", 422

    @property
    def fields(self) -> list[tuple[str, str]]:
        """``(field, message)`` pairs, fields named as in the API (``retry.max_attempts``)."""
        return field_errors(self.problem)

    @classmethod
    def for_field(cls, field: str, message: str) -> ValidationFailed:
        """The error a request that was never sent gets: what the server would have answered
        for ``field`` (named as in the API)."""
        problem = Problem(
            type=PROBLEM_BASE + "validation",
            title="The request is not valid",
            status=422,
            detail=f"{field}: {message}",
            errors=[{"loc": ["body", field], "msg": message, "type": "json_not_storable"}],
        )
        return cls(problem, client_side=True)


class PayloadTooLarge(OrbitError):
    """The request body, params or result is larger than the server accepts (413); the
    problem's ``field`` and ``limit_bytes`` say which and how much."""

    slug, default_status = "payload-too-large", 413


class Conflict(OrbitError):
    slug, default_status = "conflict", 409


class IdempotencyConflict(Conflict):
    """The idempotency key was already used for a *different* request."""

    slug = "idempotency-conflict"


class QuotaExceeded(OrbitError):
    """A namespace or queue quota refused the submission; retry later or raise the quota."""

    slug, default_status = "quota-exceeded", 429


class LeaseLost(Conflict):
    slug = "lease-lost"


class StaleAttempt(Conflict):
    """A newer attempt superseded this one; a late report is kept as evidence, never applied."""

    slug = "stale-attempt"


class CancelRequested(Conflict):
    slug = "cancel-requested"


class GateClosed(Conflict):
    slug = "gate-closed"


class FencedByRestore(Conflict):
    """The attempt was granted before a restore fence (Orbit's database was restored from a
    backup): it may not start, renew or complete; a report is kept as evidence only."""

    slug = "restore-fenced"


class InvalidAttemptToken(Forbidden):
    slug = "invalid-attempt-token"


class Unavailable(OrbitError):
    """The server (or its database) cannot answer now; the same request may succeed later."""

    slug, default_status = "unavailable", 503


class DispatchClosed(Unavailable):
    """A restore fence closed dispatch: nothing is leased until an operator reopens it. Workers
    wait and ask again."""

    slug = "dispatch-closed"


class CommitOutcomeUnknown(Unavailable):
    """The server lost its database connection while committing this request: the change may
    or may not have been made. Retrying the same request is safe for calls with a stable
    identity (a submission's idempotency key, an attempt's id and token); the SDK's transport
    retries those like any other 503."""

    slug = "outcome-unknown"


class ServerUnreachable(Unavailable):
    """No HTTP answer at all (connection refused, timeouts) after the transport's retries.

    Whether a request that was sent had an effect is unknown: retry only idempotent operations
    (submissions carry an idempotency key for exactly this reason).
    """


class TimeoutExpired(OrbitError, TimeoutError):
    """``wait()`` ran out of time; ``task`` is the last state seen (the task keeps running)."""

    slug, default_status = "timeout", 408

    def __init__(self, problem: Problem, *, client_side: bool = True, task: Any = None) -> None:
        super().__init__(problem, client_side=client_side)
        self.task = task


PROBLEM_CLASSES: dict[str, type[OrbitError]] = {
    cls.slug: cls
    for cls in (
        Unauthorized,
        Forbidden,
        NotFound,
        ValidationFailed,
        PayloadTooLarge,
        IdempotencyConflict,
        Conflict,
        QuotaExceeded,
        LeaseLost,
        StaleAttempt,
        InvalidAttemptToken,
        CancelRequested,
        GateClosed,
        FencedByRestore,
        Unavailable,
        DispatchClosed,
        CommitOutcomeUnknown,
    )
    if cls.slug is not None
}

STATUS_CLASSES: dict[int, type[OrbitError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    422: ValidationFailed,
    429: QuotaExceeded,
    502: Unavailable,  # a gateway's answer, usually without a problem body
    503: Unavailable,
    504: Unavailable,
}


#: Where in the request a field was (FastAPI's ``loc`` prefixes); not part of its name.
_LOCATIONS = frozenset({"body", "query", "path", "header", "cookie"})


def field_name(loc: list[Any] | tuple[Any, ...]) -> str:
    """``["body", "retry", "max_attempts"]`` → ``"retry.max_attempts"``; list indexes as ``[i]``."""
    parts = list(loc[1:] if loc and loc[0] in _LOCATIONS else loc)
    name = ""
    for part in parts:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name or "<request>"


def field_errors(problem: Problem) -> list[tuple[str, str]]:
    """The fields a problem names: its ``errors`` list, or its ``field`` member."""
    found = [
        (field_name(e.get("loc") or ()), str(e.get("msg") or "is not valid"))
        for e in problem.errors or ()
        if isinstance(e, dict)
    ]
    extra = problem.model_extra or {}
    if not found and isinstance(extra.get("field"), str):
        found.append((extra["field"], problem.detail or problem.title))
    return found


def error_for_problem(problem: Problem) -> OrbitError:
    """The typed error for a problem body: by ``type`` slug, else by status, else the base."""
    cls: type[OrbitError] | None = None
    if problem.type.startswith(PROBLEM_BASE):
        cls = PROBLEM_CLASSES.get(problem.type.removeprefix(PROBLEM_BASE))
    if cls is None:
        cls = STATUS_CLASSES.get(problem.status, OrbitError)
    return cls(problem)


# --- raised by handlers --------------------------------------------------------------------


class HandlerSignal(Exception):
    """Base of the exceptions a handler raises to choose its attempt's outcome."""


class RetryableError(HandlerSignal):
    """A transient failure: reported as ``failed`` with ``retryable=True``, so the task runs
    again after the queue's backoff while attempts remain."""


class OutcomeUnknown(HandlerSignal):
    """The handler cannot tell whether its side effects happened (e.g. a payment call timed
    out). Reported as ``unknown``: the task goes to NEEDS_REVIEW instead of being re-run."""


class Cancelled(HandlerSignal):
    """The handler stopped because ``ctx.cancel_requested`` became true; reported as
    ``cancelled``. Raising it without a cancel request is reported as a plain failure."""
