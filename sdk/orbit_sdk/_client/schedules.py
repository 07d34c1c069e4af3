"""Schedule methods of ``Client`` and ``AsyncClient`` (mixed in), and the calls they send.

A create or delete is not resent when its first try may have been applied (a resend would
answer 409 or 404 for what actually succeeded); reads, suspend/resume and an unconditional
update are (the server applies the same spec once).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from .._wire.calls import _ns, _rfc3339, _seg
from .._wire.transport import AsyncTransport, Call, SyncTransport
from ..models import Schedule, SchedulePage, SchedulePreview


def schedule_body(
    *,
    cron: str,
    handler: str,
    time_zone: str = "UTC",
    queue: str = "default",
    params: Any = None,
    suspend: bool = False,
    concurrency_policy: str = "Allow",
    starting_deadline_seconds: int | None = None,
    misfire_policy: str = "FireOnce",
    catch_up_limit: int = 1,
    start_at: dt.datetime | None = None,
    end_at: dt.datetime | None = None,
    priority: int | None = None,
    safety: str | None = None,
    max_attempts: int | None = None,
    reason: str = "",
) -> dict[str, Any]:
    task = {"handler": handler, "queue": queue, "params": {} if params is None else params}
    optional = {"priority": priority, "safety": safety, "max_attempts": max_attempts}
    task.update({k: v for k, v in optional.items() if v is not None})
    body: dict[str, Any] = {
        "cron": cron,
        "time_zone": time_zone,
        "task": task,
        "suspend": suspend,
        "concurrency_policy": concurrency_policy,
        "misfire_policy": misfire_policy,
        "catch_up_limit": catch_up_limit,
    }
    if starting_deadline_seconds is not None:
        body["starting_deadline_seconds"] = starting_deadline_seconds
    if start_at is not None:
        body["start_at"] = _rfc3339(start_at, "start_at")
    if end_at is not None:
        body["end_at"] = _rfc3339(end_at, "end_at")
    if reason:
        body["reason"] = reason
    return body


def _path(namespace: str, name: str | None = None, action: str = "") -> str:
    path = f"{_ns(namespace)}/schedules"
    if name is not None:
        path += f"/{_seg(name)}"
    return path + (f"/{action}" if action else "")


def create_call(namespace: str, name: str, spec: dict[str, Any]) -> Call:
    return Call("POST", _path(namespace), json={"name": name, **spec}, idempotent=False)


def update_call(
    namespace: str, name: str, spec: dict[str, Any], expected_version: int | None
) -> Call:
    body = {**spec, "expected_version": expected_version} if expected_version else spec
    return Call("PUT", _path(namespace, name), json=body, idempotent=expected_version is None)


def get_call(namespace: str, name: str, occurrences: int = 10) -> Call:
    return Call("GET", _path(namespace, name), params={"occurrences": occurrences})


def list_call(namespace: str, page_size: int, page_token: str | None) -> Call:
    params = {"page_size": page_size, "page_token": page_token}
    return Call("GET", _path(namespace), params=params)


def suspend_call(namespace: str, name: str, suspend: bool, reason: str = "") -> Call:
    action = "suspend" if suspend else "resume"
    return Call("POST", _path(namespace, name, action), json={"reason": reason})


def delete_call(namespace: str, name: str, reason: str = "") -> Call:
    return Call("DELETE", _path(namespace, name), params={"reason": reason}, idempotent=False)


def preview_call(
    namespace: str,
    cron: str,
    time_zone: str,
    after: dt.datetime | None,
    count: int,
) -> Call:
    body: dict[str, Any] = {"cron": cron, "time_zone": time_zone, "count": count}
    if after is not None:
        body["after"] = _rfc3339(after, "after")
    return Call("POST", _path(namespace, None, "preview"), json=body)


class ScheduleMethods:
    """``Client``'s schedule methods. ``**spec`` is :func:`schedule_body`'s keywords."""

    _transport: SyncTransport

    def create_schedule(self, namespace: str, name: str, **spec: Any) -> Schedule:
        """Create a schedule: ``cron`` and ``handler`` are required; see the API for the rest
        (``reason`` goes to the audit log). ``Conflict`` if the name is taken,
        ``ValidationFailed`` names a bad field."""
        call = create_call(namespace, name, schedule_body(**spec))
        return Schedule.model_validate(self._transport.send(call).json())

    def update_schedule(
        self, namespace: str, name: str, *, expected_version: int | None = None, **spec: Any
    ) -> Schedule:
        """Replace the spec (a new version, starting from now). With ``expected_version``, only
        if nobody changed it since you read it (``Conflict`` otherwise)."""
        call = update_call(namespace, name, schedule_body(**spec), expected_version)
        return Schedule.model_validate(self._transport.send(call).json())

    def get_schedule(self, namespace: str, name: str, occurrences: int = 10) -> Schedule:
        """The schedule with its last/next fire and its ``occurrences`` newest occurrences."""
        call = get_call(namespace, name, occurrences)
        return Schedule.model_validate(self._transport.send(call).json())

    def list_schedules(
        self, namespace: str, page_size: int = 100, page_token: str | None = None
    ) -> SchedulePage:
        call = list_call(namespace, page_size, page_token)
        return SchedulePage.model_validate(self._transport.send(call).json())

    def suspend_schedule(self, namespace: str, name: str, reason: str = "") -> Schedule:
        """Nothing fires until resumed (audited, with ``reason``)."""
        return Schedule.model_validate(
            self._transport.send(suspend_call(namespace, name, True, reason)).json()
        )

    def resume_schedule(self, namespace: str, name: str, reason: str = "") -> Schedule:
        """Resume from now: instants that passed while suspended do not fire (audited)."""
        return Schedule.model_validate(
            self._transport.send(suspend_call(namespace, name, False, reason)).json()
        )

    def delete_schedule(self, namespace: str, name: str, reason: str = "") -> None:
        """Delete it (audited, with ``reason``); its occurrences stay as history."""
        self._transport.send(delete_call(namespace, name, reason))

    def preview_schedule(
        self,
        namespace: str,
        cron: str,
        time_zone: str = "UTC",
        *,
        after: dt.datetime | None = None,
        count: int = 10,
    ) -> SchedulePreview:
        """The next ``count`` instants ``cron`` fires at in ``time_zone`` (UTC and local)."""
        call = preview_call(namespace, cron, time_zone, after, count)
        return SchedulePreview.model_validate(self._transport.send(call).json())


class AsyncScheduleMethods:
    """``AsyncClient``'s schedule methods (see :class:`ScheduleMethods`)."""

    _transport: AsyncTransport

    async def create_schedule(self, namespace: str, name: str, **spec: Any) -> Schedule:
        call = create_call(namespace, name, schedule_body(**spec))
        return Schedule.model_validate((await self._transport.send(call)).json())

    async def update_schedule(
        self, namespace: str, name: str, *, expected_version: int | None = None, **spec: Any
    ) -> Schedule:
        call = update_call(namespace, name, schedule_body(**spec), expected_version)
        return Schedule.model_validate((await self._transport.send(call)).json())

    async def get_schedule(self, namespace: str, name: str, occurrences: int = 10) -> Schedule:
        call = get_call(namespace, name, occurrences)
        return Schedule.model_validate((await self._transport.send(call)).json())

    async def list_schedules(
        self, namespace: str, page_size: int = 100, page_token: str | None = None
    ) -> SchedulePage:
        call = list_call(namespace, page_size, page_token)
        return SchedulePage.model_validate((await self._transport.send(call)).json())

    async def suspend_schedule(self, namespace: str, name: str, reason: str = "") -> Schedule:
        response = await self._transport.send(suspend_call(namespace, name, True, reason))
        return Schedule.model_validate(response.json())

    async def resume_schedule(self, namespace: str, name: str, reason: str = "") -> Schedule:
        response = await self._transport.send(suspend_call(namespace, name, False, reason))
        return Schedule.model_validate(response.json())

    async def delete_schedule(self, namespace: str, name: str, reason: str = "") -> None:
        await self._transport.send(delete_call(namespace, name, reason))

    async def preview_schedule(
        self,
        namespace: str,
        cron: str,
        time_zone: str = "UTC",
        *,
        after: dt.datetime | None = None,
        count: int = 10,
    ) -> SchedulePreview:
        call = preview_call(namespace, cron, time_zone, after, count)
        return SchedulePreview.model_validate((await self._transport.send(call)).json())
