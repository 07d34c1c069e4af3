"""Every API call as a ``Call`` value: paths, bodies and retry properties in one place.

The sync client, the async client and the worker all build their requests here, so the three can
never disagree about a path, a body field or whether a call may be resent.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from typing import Any, Required, TypedDict, Unpack, cast
from urllib.parse import quote

from .transport import Call, RetryPolicy


def _seg(value: str) -> str:
    """Quote one path segment: an id or name must never be able to add path levels."""
    return quote(str(value), safe="")


def _ns(namespace: str) -> str:
    return f"/v1/namespaces/{_seg(namespace)}"


def _rfc3339(value: dt.datetime, name: str) -> str:
    if value.tzinfo is None or value.utcoffset() is None:
        # A naive datetime is ambiguous (local time? UTC?) and the server decides with database
        # time in UTC; refuse rather than guess and schedule hours off.
        raise ValueError(f"{name} must be timezone-aware (e.g. datetime.now(timezone.utc))")
    return value.isoformat()


def new_idempotency_key() -> str:
    return str(uuid.uuid4())


class SubmitOptions(TypedDict, total=False):
    """The keywords of one submission, defined once: ``Client.submit``, ``AsyncClient.submit``,
    each item of ``submit_many`` and :func:`submission_body` all take exactly these. Only
    ``handler`` is required; ``queue`` is ``"default"`` and ``params`` ``{}`` when left out."""

    handler: Required[str]
    queue: str
    params: Any
    idempotency_key: str | None
    delay: float | dt.timedelta | None
    available_at: dt.datetime | None
    deadline_at: dt.datetime | None
    priority: int | None
    concurrency_key: str | None
    concurrency_limit: int | None
    max_attempts: int | None
    backoff_initial_seconds: float | None
    backoff_max_seconds: float | None
    backoff_multiplier: float | None
    safety: str | None


_OPTIONAL = ("priority", "concurrency_key", "concurrency_limit", "safety")
_RETRY = ("max_attempts", "backoff_initial_seconds", "backoff_max_seconds", "backoff_multiplier")


def submission_body(**options: Unpack[SubmitOptions]) -> dict[str, Any]:
    """The TaskSubmission body. The key is fixed here, before the first try, so every retry of
    this submission is the same request under the same key (the server replays, never doubles)."""
    unknown = sorted(set(options) - set(SubmitOptions.__annotations__))
    if unknown:  # what a misspelt keyword of a plain signature would raise
        raise TypeError(f"unexpected submission keyword(s): {', '.join(unknown)}")
    if "handler" not in options:
        raise TypeError("a submission needs its handler")
    delay, available_at = options.get("delay"), options.get("available_at")
    deadline_at, idempotency_key = options.get("deadline_at"), options.get("idempotency_key")
    if delay is not None and available_at is not None:
        raise ValueError("pass either delay or available_at, not both")
    if idempotency_key is not None and not idempotency_key.strip():
        # An empty key is a caller's bug (an unset variable), not a request for a fresh one:
        # replacing it would turn the caller's retries into duplicate tasks.
        raise ValueError("idempotency_key must not be empty; omit it to have one generated")
    params = options.get("params")
    body: dict[str, Any] = {
        "queue": options.get("queue", "default"),
        "handler": options["handler"],
        "params": {} if params is None else params,
        "idempotency_key": new_idempotency_key() if idempotency_key is None else idempotency_key,
    }
    if delay is not None:
        body["delay_seconds"] = (
            delay.total_seconds() if isinstance(delay, dt.timedelta) else float(delay)
        )
    if available_at is not None:
        body["available_at"] = _rfc3339(available_at, "available_at")
    if deadline_at is not None:
        body["deadline_at"] = _rfc3339(deadline_at, "deadline_at")
    given: dict[str, Any] = dict(options)
    body.update({k: given[k] for k in _OPTIONAL if given.get(k) is not None})
    retry = {k: given[k] for k in _RETRY if given.get(k) is not None}
    if retry:
        body["retry"] = retry
    return body


def submission_options(body: Mapping[str, Any]) -> SubmitOptions:
    """The inverse of :func:`submission_body`: the keywords that build ``body`` again, its key
    included, so a stored body (the outbox's) is sent again as the very same request."""
    copied = ("queue", "handler", "params", "idempotency_key", *_OPTIONAL)
    options: dict[str, Any] = {k: body[k] for k in copied if k in body}
    if "delay_seconds" in body:
        options["delay"] = body["delay_seconds"]
    for instant in ("available_at", "deadline_at"):
        if instant in body:
            options[instant] = dt.datetime.fromisoformat(body[instant])
    options.update(body.get("retry") or {})
    return cast(SubmitOptions, options)


# --- client calls --------------------------------------------------------------------------


def whoami() -> Call:
    return Call("GET", "/v1/whoami")


def submit(namespace: str, body: dict[str, Any]) -> Call:
    assert body.get("idempotency_key"), "submissions are only resent under their key"
    return Call("POST", f"{_ns(namespace)}/tasks", json=body)


def get_task(namespace: str, task_id: str) -> Call:
    return Call("GET", f"{_ns(namespace)}/tasks/{_seg(task_id)}")


def list_tasks(
    namespace: str,
    *,
    queue: str | None = None,
    state: str | None = None,
    page_size: int = 50,
    page_token: str | None = None,
    handler: str | None = None,
) -> Call:
    params = {
        "queue": queue,
        "state": state,
        "handler": handler,
        "page_size": page_size,
        "page_token": page_token,
    }
    return Call("GET", f"{_ns(namespace)}/tasks", params=params)


def cancel_task(namespace: str, task_id: str, reason: str = "") -> Call:
    # Idempotent on the server: a second cancel of the same task changes nothing.
    return Call("POST", f"{_ns(namespace)}/tasks/{_seg(task_id)}/cancel", json={"reason": reason})


def review_task(
    namespace: str,
    task_id: str,
    *,
    decision: str,
    reason: str,
    evidence_ref: str,
    expected_state_version: int,
    execution_ended: bool,
) -> Call:
    # Not resent after an unclear failure: a second try would meet the new state_version and
    # answer 409 although the first one applied. Read the task to find out instead.
    return Call(
        "POST",
        f"{_ns(namespace)}/tasks/{_seg(task_id)}/review",
        idempotent=False,
        json={
            "decision": decision,
            "reason": reason,
            "evidence_ref": evidence_ref,
            "expected_state_version": expected_state_version,
            "execution_ended": execution_ended,
        },
    )


def retry_task(
    namespace: str,
    task_id: str,
    *,
    reason: str,
    expected_state_version: int,
    safe_to_retry: bool,
) -> Call:
    # A lost reply is resolved by the 409's retry_task_id (one successor per task).
    return Call(
        "POST",
        f"{_ns(namespace)}/tasks/{_seg(task_id)}/retry",
        idempotent=False,
        json={
            "reason": reason,
            "expected_state_version": expected_state_version,
            "safe_to_retry": safe_to_retry,
        },
    )


# --- worker protocol -----------------------------------------------------------------------


def create_session(
    namespace: str,
    worker_name: str,
    queues: list[str],
    ttl_seconds: int,
    pod_uid: str | None,
    handlers: list[str] | None = None,
    registration_key: str | None = None,
) -> Call:
    # ``registration_key``: the same on every resend of this registration, so a copy that
    # reaches the server late answers the session it opened instead of replacing the one the
    # worker uses. ``handlers``: the server grants only tasks of these (None: any handler).
    body: dict[str, Any] = {
        "namespace": namespace,
        "worker_name": worker_name,
        "queues": queues,
        "ttl_seconds": ttl_seconds,
    }
    if registration_key is not None:
        body["registration_key"] = registration_key
    if handlers is not None:
        body["handlers"] = handlers
    if pod_uid:
        body["pod_uid"] = pod_uid
    return Call("POST", "/v1/worker-sessions", json=body)


#: Seconds added to a long poll's HTTP read timeout, so the server answers before we give up.
LONG_POLL_MARGIN = 10.0


def lease(
    session_id: str,
    max_tasks: int,
    wait_seconds: float,
    start_handlers: list[str] | None = None,
    reports: list[dict[str, Any]] | None = None,
    budget: float | None = None,
) -> Call:
    """``start_handlers`` (worker protocol 3): handlers declared safe, whose grants the server
    starts with the lease. ``reports`` (protocol 4): outcomes of finished attempts, as the
    items of ``complete_attempts``, answered in the lease's own answer; with them the request
    does not long-poll (their answers would wait for it) and gives up within ``budget``. Each
    is sent only when there are any: older servers refuse the fields."""
    body: dict[str, Any] = {"max_tasks": max_tasks, "wait_seconds": wait_seconds}
    if start_handlers:
        body["start_handlers"] = start_handlers
    if reports:
        body["reports"] = reports
        body["wait_seconds"] = wait_seconds = 0
    return Call(
        "POST",
        f"/v1/worker-sessions/{_seg(session_id)}/lease",
        json=body,
        idempotent=False,
        timeout=wait_seconds + LONG_POLL_MARGIN,
        retry=RetryPolicy(max_attempts=3, max_elapsed=5.0),  # only not-sent errors qualify
        budget=budget if reports else None,
    )


def drain_session(session_id: str) -> Call:
    return Call("POST", f"/v1/worker-sessions/{_seg(session_id)}/drain")


def close_session(session_id: str) -> Call:
    return Call("DELETE", f"/v1/worker-sessions/{_seg(session_id)}")


def start_attempt(
    attempt_id: str, token: str, safety: str | None = None, budget: float | None = None
) -> Call:
    """Idempotent: an attempt that is already RUNNING answers started + already_started.
    ``safety`` is the handler's declaration; the server keeps the stricter of it and the task's
    own class, so only ``"unsafe"`` can change anything and only that is worth sending."""
    body = {"token": token}
    if safety == "unsafe":
        body["safety"] = safety
    return Call("POST", f"/v1/attempts/{_seg(attempt_id)}/start", json=body, budget=budget)


def heartbeat(
    session_id: str | None,
    items: list[tuple[str, str]],
    retry: RetryPolicy,
    budget: float,
    progress: Mapping[str, dict[str, Any]] | None = None,
) -> Call:
    """``budget``: a beat stuck on a slow answer must not hold up the next one (a lease
    renewed every interval lapses after a few missed beats). ``progress``: attempt id → the
    handler's latest progress, for the attempts that reported some since the last beat."""
    news = progress or {}
    body: dict[str, Any] = {
        "items": [
            {"attempt_id": a, "token": t, **({"progress": news[a]} if a in news else {})}
            for a, t in items
        ]
    }
    if session_id is not None:
        body["session_id"] = session_id
    return Call("POST", "/v1/attempts/heartbeat", json=body, retry=retry, budget=budget)


def complete_attempt(
    attempt_id: str,
    token: str,
    outcome: str,
    *,
    result: Any = None,
    error: Any = None,
    retryable: bool = False,
    budget: float | None = None,
) -> Call:
    # Idempotent: the same report again answers ``duplicate``.
    body = {
        "token": token,
        "outcome": outcome,
        "result": result,
        "error": error,
        "retryable": retryable,
    }
    return Call("POST", f"/v1/attempts/{_seg(attempt_id)}/complete", json=body, budget=budget)


def start_attempts(items: list[dict[str, Any]], budget: float | None = None) -> Call:
    """Worker protocol 2: ``items`` of ``{"attempt_id", "token", "safety"?}``, one transaction,
    one answer per item. Idempotent like the single start."""
    return Call("POST", "/v1/attempts:start", json={"items": items}, budget=budget)


def complete_attempts(items: list[dict[str, Any]], budget: float | None = None) -> Call:
    """Worker protocol 2: ``items`` of completions with their ``attempt_id``; one answer per
    item. Idempotent: the same reports again answer ``duplicate``."""
    return Call("POST", "/v1/attempts:complete", json={"items": items}, budget=budget)
