"""Schedule: mirrors spec into the `schedules` row (a changed spec is a new version, starting
from now); status shows the last and next fire and the latest occurrences, read from MySQL.

Deleting the resource deletes the schedule; its occurrences stay as history and the tasks it
fired are left to finish.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa

from orbit_store.payload import DEFAULT_MAX_PAYLOAD_BYTES, oversize
from orbit_store.pulse.model import Safety
from orbit_store.schedules import declare
from orbit_store.schedules.cron import to_utc, zone_of
from orbit_store.schedules.model import (
    ConcurrencyPolicy,
    InvalidSchedule,
    MisfirePolicy,
    ScheduleSpec,
    ScheduleView,
    TaskTemplate,
)
from orbit_store.schedules.queries import get_schedule

from .queue import require_declared_queues
from .resource import Deletion, InvalidSpec, Outcome, Resource

#: Where a store field lives in the resource (InvalidSpec names the resource's field).
FIELD_PATHS = {
    "cron": "spec.schedule",
    "time_zone": "spec.timeZone",
    "task.handler": "spec.taskTemplate.handler",
    "task.queue": "spec.taskTemplate.queue",
    "end_at": "spec.endAt",
    "catch_up_limit": "spec.catchUpLimit",
    "starting_deadline_seconds": "spec.startingDeadlineSeconds",
}
STATUS_OCCURRENCES = 5
#: The server's own variable (`orbit server --max-payload-bytes`): the operator and `orbit apply`
#: hold a template to the limit every task submitted through the API is held to.
MAX_PAYLOAD_ENV = "ORBIT_MAX_PAYLOAD_BYTES"


def _instant(resource: Resource, field: str) -> dt.datetime | None:
    value = resource.spec.get(field)
    if value is None:
        return None
    try:
        return to_utc(dt.datetime.fromisoformat(str(value)))
    except ValueError:
        raise InvalidSpec(
            f"spec.{field}", f"{value!r} is not an RFC 3339 date-time such as 2026-01-31T09:00:00Z"
        ) from None


def spec_of(resource: Resource) -> ScheduleSpec:
    """The store's spec for the resource, checked (InvalidSpec names the field and the fix)."""
    spec = resource.spec
    template = spec["taskTemplate"]
    safety = template.get("safety")
    schedule = ScheduleSpec(
        name=resource.name,
        cron=spec["schedule"],
        time_zone=spec["timeZone"],
        task=TaskTemplate(
            handler=template["handler"],
            queue=template["queue"],
            params=template.get("params", {}),
            priority=template.get("priority"),
            safety=Safety(safety) if safety else None,
            max_attempts=template.get("maxAttempts"),
        ),
        suspended=spec["suspend"],
        concurrency_policy=ConcurrencyPolicy(spec["concurrencyPolicy"]),
        starting_deadline_seconds=spec.get("startingDeadlineSeconds"),
        misfire_policy=MisfirePolicy(spec["misfirePolicy"]),
        catch_up_limit=spec["catchUpLimit"],
        start_at=_instant(resource, "startAt"),
        end_at=_instant(resource, "endAt"),
    )
    with _as_invalid_spec():
        declare.validate(schedule)
    too_large = oversize(_payload_limit(), params=schedule.task.params)
    if too_large is not None:
        raise InvalidSpec("spec.taskTemplate.params", too_large.detail)
    return schedule


def _payload_limit() -> int:
    raw = os.environ.get(MAX_PAYLOAD_ENV, "")
    return int(raw) if raw.isdigit() else DEFAULT_MAX_PAYLOAD_BYTES


def validate(resource: Resource) -> None:
    """What `orbit apply` checks before writing anything (expression, zone, bounds)."""
    spec_of(resource)


def reconcile(conn: sa.Connection, resource: Resource) -> Outcome:
    spec = spec_of(resource)
    require_declared_queues(conn, resource, FIELD_PATHS["task.queue"], [spec.task.queue])
    with _as_invalid_spec():
        written = declare.declare_schedule(
            conn,
            resource.namespace,
            spec,
            source=resource.source,
            spec_generation=resource.generation,
        )
    view = get_schedule(conn, resource.namespace, resource.name, occurrences=STATUS_OCCURRENCES)
    assert view is not None  # written in this transaction
    return Outcome(changed=written.changed, message=_message(view), status=status_of(view))


def delete(conn: sa.Connection, resource: Resource) -> Deletion:
    declare.delete_declared_schedule(conn, resource.namespace, resource.name)
    return Deletion(done=True, message="schedule removed (its occurrences stay as history)")


def status_of(view: ScheduleView) -> dict[str, Any]:
    return {
        "version": view.version,
        "state": view.state,
        "lastScheduleTime": _rfc3339(view.last_fire_at),
        "nextScheduleTime": _rfc3339(view.next_fire_at),
        "activeTasks": view.active_tasks,
        "recentOccurrences": [
            {
                "scheduledTime": _rfc3339(o.scheduled_at),
                "instants": o.instants,
                "status": o.status.value,
                "reason": o.reason,
                "message": o.message,
                **({"taskId": o.task_id} if o.task_id else {}),
                **({"taskState": o.task_state} if o.task_state else {}),
            }
            for o in view.occurrences
        ],
    }


def _message(view: ScheduleView) -> str:
    if view.state == "Suspended":
        return "suspended: nothing fires until spec.suspend is false"
    if view.state == "Ended":
        end = view.spec.end_at
        bound = f"endAt {_rfc3339(end)}" if end else "the last instant the expression matches"
        return f"ended: no instant is left before {bound}"
    assert view.next_fire_at is not None
    local = view.next_fire_at.replace(tzinfo=dt.UTC).astimezone(zone_of(view.spec.time_zone))
    return f"next fire {_rfc3339(view.next_fire_at)} ({local:%Y-%m-%d %H:%M %Z})"


def _rfc3339(value: dt.datetime | None) -> str | None:
    return None if value is None else value.strftime("%Y-%m-%dT%H:%M:%SZ")


@contextlib.contextmanager
def _as_invalid_spec() -> Iterator[None]:
    """Turn the store's InvalidSchedule into InvalidSpec naming the resource's field."""
    try:
        yield
    except InvalidSchedule as exc:
        raise InvalidSpec(FIELD_PATHS.get(exc.field, "spec"), exc.message) from exc
