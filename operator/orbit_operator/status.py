"""Writing ``.status``: observedGeneration, the kind's own fields, and the Ready condition
(a metav1.Condition; docs/reference/crds.md#status-and-the-ready-condition)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, MutableMapping
from functools import cache
from typing import Any

from orbit.reconcile.admission import schema_of

READY = "Ready"
TRUE, FALSE, UNKNOWN = "True", "False", "Unknown"
MAX_MESSAGE = 32768

Status = MutableMapping[str, Any]


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@cache
def status_fields_of(kind: str) -> frozenset[str]:
    """The status fields the kind's CRD declares besides observedGeneration and conditions
    (an API server prunes anything else)."""
    status = schema_of(kind)["properties"].get("status", {})
    return frozenset(status.get("properties", {})) - {"observedGeneration", "conditions"}


def generation_of(body: Mapping[str, Any]) -> int:
    return int((body.get("metadata") or {}).get("generation") or 1)


def current_ready(body: Mapping[str, Any]) -> dict[str, Any] | None:
    conditions = (body.get("status") or {}).get("conditions") or []
    return next((dict(c) for c in conditions if c.get("type") == READY), None)


def is_news(body: Mapping[str, Any], status: str, reason: str, message: str) -> bool:
    """Whether this Ready differs from the one the body shows (worth a log line and an Event;
    the resync timers repeat the same findings every interval)."""
    ready = current_ready(body)
    return ready is None or (ready.get("status"), ready.get("reason"), ready.get("message")) != (
        status,
        reason,
        message[:MAX_MESSAGE],
    )


def ready_conditions(
    body: Mapping[str, Any], status: str, reason: str, message: str
) -> list[dict[str, Any]]:
    """The body's conditions with Ready replaced; its lastTransitionTime moves only when its
    status changes."""
    existing = list((body.get("status") or {}).get("conditions") or [])
    previous = current_ready(body)
    since = now_rfc3339()
    if previous is not None and previous.get("status") == status:
        since = previous.get("lastTransitionTime") or since
    ready = {
        "type": READY,
        "status": status,
        "reason": reason,
        "message": message[:MAX_MESSAGE],
        "lastTransitionTime": since,
        "observedGeneration": generation_of(body),
    }
    return [dict(c) for c in existing if c.get("type") != READY] + [ready]


def write_ready(
    out: Status,
    body: Mapping[str, Any],
    kind: str,
    *,
    status: str,
    reason: str,
    message: str,
    applied: bool,
    fields: Mapping[str, Any] | None = None,
) -> None:
    """Record the Ready condition in ``out`` (a Kopf ``patch.status`` or a plain dict).

    ``applied`` says the spec of this generation is in effect (observedGeneration moves);
    ``fields`` are the kind's status values (only those its CRD declares are kept).
    """
    allowed = status_fields_of(kind)
    for key, value in (fields or {}).items():
        if key in allowed:
            out[key] = value
    if applied:
        out["observedGeneration"] = generation_of(body)
    out["conditions"] = ready_conditions(body, status, reason, message)
