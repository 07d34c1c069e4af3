"""One Weave transaction's view of an instance: the locked instance row, its steps, the bound
definition, the clock, and the history events it appends — written back by :meth:`flush`.

Every Weave transaction starts with :func:`lock_instance` (the first lock, see the package
docstring) and ends with :meth:`InstanceContext.flush`.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from orbit_store.clock import as_db_time, utc_now
from orbit_store.errors import NotFound
from orbit_store.ids import new_id
from orbit_store.payload import DEFAULT_MAX_PAYLOAD_BYTES
from orbit_store.schema import (
    workflow_activations,
    workflow_events,
    workflow_instances,
    workflow_signals,
    workflow_steps,
    workflow_waits,
)

from .buffered import InstanceWrites
from .definitions import load_version
from .dsl.spec import Definition
from .model import AdvanceReport, InstanceState, SignalState, StepState, WaitState


class LostRace(Exception):
    """A conditional update matched no row although the instance lock was held: a bug."""


@dataclass
class Instance:
    """The instance row as read under lock; updated in place as the transaction changes it."""

    id: str
    namespace: str
    definition_version_id: str
    definition_name: str
    version: int
    state: InstanceState
    state_version: int
    paused: bool
    control_version: int
    gate_id: str
    input: Any
    output: Any
    error: Any
    event_seq: int
    wake_at: dt.datetime | None
    created_at: dt.datetime
    finished_at: dt.datetime | None
    #: Failed firings of the timers in a row (None while firing works).
    timer_failures: int | None = None


@dataclass
class Step:
    id: str
    name: str
    kind: str
    state: StepState
    activation_count: int
    current_activation_id: str | None
    result: Any
    error: Any


@dataclass(frozen=True)
class Timers:
    """An instance's timers as a set pass read them under its lock: its WAITING waits with a
    deadline (``id``, ``kind``, ``step_name``, ``deadline_at``) and its ACTIVE activations with
    a poll due (``id``, ``step_name``, ``next_poll_at``). With them a held decision fires its
    due timers and finds its next wake-up without a read of its own."""

    waits: list[Any]
    polls: list[Any]


@dataclass
class InstanceContext:
    conn: sa.Connection
    instance: Instance
    now: dt.datetime
    definition: Definition
    steps: dict[str, Step]
    report: AdvanceReport
    actor: str | None = None
    #: The server's limit for what a step's task may carry (orbit_store/payload.py).
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    timers_changed: bool = False
    #: The due timers fired in this transaction (a recorded timer failure is over).
    timers_fired: bool = False
    #: Set while the instance is decided in a set: its writes are held here (``buffered``).
    writes: InstanceWrites | None = None
    #: Its timers as a set pass read them (None: read them when they are needed).
    timers: Timers | None = None
    _events: list[dict[str, Any]] = field(default_factory=list)
    _signals: dict[str, Any] | None = None

    @property
    def namespace(self) -> str:
        return self.instance.namespace

    def event(
        self,
        kind: str,
        step: str | None = None,
        activation_seq: int | None = None,
        details: Any = None,
        actor: str | None = None,
    ) -> None:
        """Append a history event (written by :meth:`flush`, numbered in order)."""
        self._events.append(
            {
                "kind": kind,
                "step_name": step,
                "activation_seq": activation_seq,
                "details": details,
                "actor": actor or self.actor,
            }
        )

    def variables(self) -> dict[str, Any]:
        """What CEL expressions see: input, steps.<name>.{state,result}, signals.<name>."""
        if self._signals is None and not self.definition.signal_names:
            self._signals = {}
        if self._signals is None:
            rows = self.conn.execute(
                sa.select(workflow_signals.c.name, workflow_signals.c.payload)
                .where(
                    workflow_signals.c.instance_id == self.instance.id,
                    workflow_signals.c.state == SignalState.CONSUMED.value,
                )
                .order_by(workflow_signals.c.consumed_at)
            )
            self._signals = {name: payload for name, payload in rows}
        steps = {s.name: {"state": s.state.value, "result": s.result} for s in self.steps.values()}
        return {"input": self.instance.input, "steps": steps, "signals": dict(self._signals)}

    def signal_consumed(self, name: str, payload: Any) -> None:
        if self._signals is not None:
            self._signals[name] = payload

    def flush(self) -> None:
        """Write the events, the timer key and the event counter back to the instance row."""
        inst = self.instance
        values: dict[str, Any] = {}
        rows: list[dict[str, Any]] = []
        if self._events:
            for offset, event in enumerate(self._events, start=1):
                rows.append(
                    {
                        "id": new_id(),
                        "instance_id": inst.id,
                        "namespace": inst.namespace,
                        "seq": inst.event_seq + offset,
                        "at": self.now,
                        **event,
                    }
                )
            if self.writes is None:
                self.conn.execute(workflow_events.insert(), rows)
            values["event_seq"] = inst.event_seq + len(rows)
            values["updated_at"] = self.now
        if self.timers_changed or (inst.state.is_terminal and inst.wake_at is not None):
            values["wake_at"] = self._next_wake()
            self.report.timer_sooner |= _sooner(values["wake_at"], inst.wake_at)
        if self.timers_fired and inst.timer_failures is not None:
            values.update(timer_failures=None, timer_retry_at=None, timer_error=None)
        if not values:
            return
        if self.writes is not None:
            self.writes.events.extend(rows)
            self.writes.instance.update(values)
        else:
            self._write_instance(values)
        inst.event_seq = values.get("event_seq", inst.event_seq)
        inst.wake_at = values.get("wake_at", inst.wake_at)
        inst.timer_failures = values.get("timer_failures", inst.timer_failures)
        self._events.clear()
        self.timers_changed = False

    def _write_instance(self, values: dict[str, Any]) -> None:
        inst = self.instance
        updated = self.conn.execute(
            workflow_instances.update()
            .where(
                workflow_instances.c.id == inst.id,
                workflow_instances.c.event_seq == inst.event_seq,
            )
            .values(**values)
        )
        if updated.rowcount != 1:
            raise LostRace(f"workflow instance {inst.id} changed under its lock")

    def _next_wake(self) -> dt.datetime | None:
        if self.instance.state.is_terminal:
            return None
        if self.timers is not None and self.writes is not None:
            return _earliest(
                _held_next_wake(self.timers, self.writes), opened_deadline(self.writes)
            )
        wait_due = self.conn.execute(
            sa.select(sa.func.min(workflow_waits.c.deadline_at)).where(
                workflow_waits.c.instance_id == self.instance.id,
                workflow_waits.c.state == WaitState.WAITING.value,
            )
        ).scalar_one()
        poll_due = self.conn.execute(
            sa.select(sa.func.min(workflow_activations.c.next_poll_at)).where(
                workflow_activations.c.instance_id == self.instance.id,
                workflow_activations.c.state == "ACTIVE",
            )
        ).scalar_one()
        opened = opened_deadline(self.writes) if self.writes is not None else None
        return _earliest(wait_due, poll_due, opened)


def opened_deadline(writes: InstanceWrites) -> dt.datetime | None:
    """The earliest deadline of the waits and sleeps opened in this set that still wait: held
    back, they are not in the database yet, yet they count in the next wake-up."""
    due = [
        row["deadline_at"]
        for row in writes.wait_rows.values()
        if row["state"] == WaitState.WAITING.value
    ]
    return _earliest(*due)


def _earliest(*due: dt.datetime | str | None) -> dt.datetime | None:
    found = [_as_datetime(v) for v in due if v is not None]
    return min(found) if found else None


def _held_next_wake(timers: Timers, writes: InstanceWrites) -> dt.datetime | None:
    """The earliest timer left once the held moves are written: a wait moved is over; a
    poll activation moved keeps its next poll only while it stays ACTIVE."""
    due = [w.deadline_at for w in timers.waits if w.id not in writes.waits]
    for poll in timers.polls:
        moved = writes.activations.get(poll.id)
        values = moved.values if moved is not None else {}
        if values.get("state", StepState.ACTIVE.value) == StepState.ACTIVE.value:
            due.append(values.get("next_poll_at", poll.next_poll_at))
    return _earliest(*due)


def _as_datetime(value: dt.datetime | str) -> dt.datetime:
    return dt.datetime.fromisoformat(value) if isinstance(value, str) else value


def lock_instance(
    conn: sa.Connection,
    namespace: str,
    instance_id: str,
    *,
    actor: str | None = None,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> InstanceContext:
    """SELECT … FOR UPDATE the instance (with the database time), then load its steps and its
    bound definition. Raises NotFound."""
    row = conn.execute(
        sa.select(workflow_instances, utc_now().label("db_now"))
        .where(
            workflow_instances.c.id == instance_id,
            workflow_instances.c.namespace == namespace,
        )
        .with_for_update()
    ).one_or_none()
    if row is None:
        raise NotFound(f"workflow {instance_id} not found in namespace {namespace!r}")
    steps = conn.execute(
        sa.select(workflow_steps).where(workflow_steps.c.instance_id == instance_id)
    )
    return context_of(conn, row, list(steps), actor=actor, max_payload_bytes=max_payload_bytes)


def lock_set(conn: sa.Connection, namespace: str, instance_ids: Sequence[str]) -> list[Any]:
    """SELECT … FOR UPDATE SKIP LOCKED the instances of a set (with the database time), in id
    order: the first lock of a set transaction; an instance another transaction holds, or one
    not found, is not returned."""
    return list(
        conn.execute(
            sa.select(workflow_instances, utc_now().label("db_now"))
            .where(
                workflow_instances.c.namespace == namespace,
                workflow_instances.c.id.in_(sorted(instance_ids)),
            )
            .order_by(workflow_instances.c.id)
            .with_for_update(skip_locked=True)
        )
    )


def steps_of(conn: sa.Connection, instance_ids: Sequence[str]) -> dict[str, list[Any]]:
    """The step rows of several instances, read at once: instance id → its steps."""
    steps: dict[str, list[Any]] = defaultdict(list)
    query = sa.select(workflow_steps).where(workflow_steps.c.instance_id.in_(instance_ids))
    for row in conn.execute(query):
        steps[row.instance_id].append(row)
    return steps


def context_of(
    conn: sa.Connection,
    row: Any,
    step_rows: list[Any],
    *,
    actor: str | None = None,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> InstanceContext:
    """The context of an instance row read under lock (with ``db_now``) and its step rows."""
    instance = Instance(
        id=row.id,
        namespace=row.namespace,
        definition_version_id=row.definition_version_id,
        definition_name=row.definition_name,
        version=row.version,
        state=InstanceState(row.state),
        state_version=row.state_version,
        paused=bool(row.paused),
        control_version=row.control_version,
        gate_id=row.gate_id,
        input=row.input,
        output=row.output,
        error=row.error,
        event_seq=row.event_seq,
        wake_at=row.wake_at,
        created_at=row.created_at,
        finished_at=row.finished_at,
        timer_failures=row.timer_failures,
    )
    steps = {
        s.name: Step(
            id=s.id,
            name=s.name,
            kind=s.kind,
            state=StepState(s.state),
            activation_count=s.activation_count,
            current_activation_id=s.current_activation_id,
            result=s.result,
            error=s.error,
        )
        for s in step_rows
    }
    return InstanceContext(
        conn=conn,
        instance=instance,
        now=as_db_time(conn, row.db_now),
        definition=load_version(conn, row.definition_version_id),
        steps=steps,
        report=AdvanceReport(namespace=row.namespace),
        actor=actor,
        max_payload_bytes=max_payload_bytes,
    )


def _sooner(wake_at: dt.datetime | None, before: dt.datetime | None) -> bool:
    """Whether the new earliest timer falls due before the one the row held."""
    return wake_at is not None and (before is None or wake_at < before)
