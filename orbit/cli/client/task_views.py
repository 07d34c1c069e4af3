"""How tasks look in table output: list columns, the `get` description, event lines, and why a
task is in its state (the reason of the event that put it there)."""

from __future__ import annotations

from typing import Any

from orbit.cli.client.progress_view import progress_text
from orbit.cli.output import Column, cell, print_fields, print_section
from orbit_sdk import Task, TaskDetail, TaskEvent

TASK_COLUMNS = [
    Column.field("id"),
    Column.field("queue"),
    Column.field("handler"),
    Column.field("state"),
    Column("ATTEMPTS", lambda t: f"{t.attempts_used}/{t.max_attempts}"),
    Column.field("created_at"),
    Column.field("priority", wide=True),
    Column.field("safety", wide=True),
    Column.field("available_at", wide=True),
    Column.field("finished_at", wide=True),
    Column.field("retry_of", wide=True),
]

ATTEMPT_COLUMNS = [
    Column.field("generation"),
    Column.field("id"),
    Column.field("state"),
    Column.field("outcome"),
    Column.field("outcome_reason"),
    Column.field("started_at"),
    Column.field("finished_at"),
    Column("PROGRESS", lambda a: progress_text(a.progress) if a.progress else None, wide=True),
]

EVENT_COLUMNS = [
    Column.field("at"),
    Column.field("state_version"),
    Column("FROM_STATE", lambda e: e.from_state or "-"),
    Column.field("to_state"),
    Column.field("reason"),
    Column.field("actor"),
]

#: What a person can do about a task in this state.
#: Why a WAITING task waits (the API's ``waiting_reason``), in words.
WAITING_REASONS = {
    "ready": "ready to be leased",
    "scheduled": "scheduled: not due before available_at",
    "gate_closed": "its execution gate is closed (its workflow is paused)",
    "concurrency_limit": "its concurrency key has no free permit",
}


def waiting(task: Task) -> str:
    """Why a WAITING task waits, and whether any live worker can run it at all."""
    why = WAITING_REASONS.get(task.waiting_reason or "", task.waiting_reason or "")
    if task.runnable_by_live_worker is False:
        why += (
            f"; no live worker serves queue {task.queue!r} with handler {task.handler!r}: it "
            "will not start until one does"
        )
    return why


NEXT_STEP = {
    "NEEDS_REVIEW": "settle it: orbit task review {id} --decision succeeded|failed --reason … "
    "--evidence … --expected-version {version} --execution-ended",
    "FAILED": "run it again: orbit task retry {id} --reason … --expected-version {version} "
    "--safe-to-retry",
}


def state_reason(task: TaskDetail) -> str | None:
    """Why the task is in its state: the reason of the last event that moved it there."""
    for event in reversed(task.events):
        if event.to_state == task.state:
            return event.reason
    return None


def describe_task(task: Task, wide: bool) -> None:
    """`orbit task get` in table output: the task's fields, why it is in its state, what to do
    next, then its attempts and events."""
    pairs: list[tuple[str, Any]] = [
        ("id", task.id),
        ("namespace", task.namespace),
        ("queue", task.queue),
        ("handler", task.handler),
        ("state", task.state),
    ]
    if isinstance(task, TaskDetail):
        pairs.append(("reason", state_reason(task)))
        if task.progress is not None:
            pairs.append(
                ("progress", f"{progress_text(task.progress)}  (at {cell(task.progress.at)})")
            )
    if task.state == "WAITING":
        pairs.append(("waiting", waiting(task)))
    step = NEXT_STEP.get(task.state)
    if step and not task.retry_of:
        pairs.append(("next", step.format(id=task.id, version=task.state_version)))
    pairs += [
        ("state_version", task.state_version),
        ("attempts", f"{task.attempts_used}/{task.max_attempts}"),
        ("priority", task.priority),
        ("safety", task.safety),
        ("cancel_requested", task.cancel_requested),
        ("retry_of", task.retry_of),
        ("created_at", task.created_at),
        ("available_at", task.available_at),
        ("finished_at", task.finished_at),
        ("params", task.params),
        ("result", task.result),
        ("error", task.error),
    ]
    if wide:
        pairs += [("deadline_at", task.deadline_at), ("concurrency_key", task.concurrency_key)]
    print_fields(pairs)
    if isinstance(task, TaskDetail):
        print_section("attempts", task.attempts, ATTEMPT_COLUMNS)
        print_section("events", task.events, EVENT_COLUMNS)


def event_line(event: TaskEvent) -> str:
    """One state change, as `orbit task watch` prints it."""
    arrow = f"{event.from_state} -> {event.to_state}" if event.from_state else event.to_state
    actor = f" (by {event.actor})" if event.actor else ""
    return f"{cell(event.at)}  {arrow}  {event.reason}{actor}"
