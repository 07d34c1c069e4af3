"""What one instance of a set pass writes, held back so the set writes every instance's rows
together (``set_writes``): step and activation moves, new activations and the signal waits and
sleeps they open, the instance row, its history events, the step tasks to submit and the waits a
timer set fires.

While an instance is decided in a set its context reads through :class:`ReadOnlyConnection`:
reads go to the database, and any write the set path does not hold back (a cancel, a consumed
signal, a poll round, a continuation) raises :class:`NeedsSinglePath` instead — nothing of the
instance has been written, so the set drops what it held for it and the instance is advanced
alone, in its own transaction, as before. :func:`set_writes.decide_held` and ``release`` are the one
way a caller holds an instance's writes back and hands its connection back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from orbit_store.pulse.submit.accept import SubmitRequest


class NeedsSinglePath(Exception):
    """The instance's move needs a statement the set path does not hold back."""


@dataclass
class Update:
    """A guarded row update: the state the row was read in under lock, the values it gets."""

    expected: str
    values: dict[str, Any]


@dataclass(frozen=True)
class Submission:
    """A step task to submit with the set: ``placeholder`` stands for its id until then."""

    placeholder: str
    request: SubmitRequest
    queue: str
    handler: str


@dataclass
class InstanceWrites:
    """One instance's held-back writes (merged: a row moved twice is updated once)."""

    #: The instance row as read under lock: its update is guarded by both.
    state_version: int
    event_seq: int
    #: Its PENDING signals under lock (finishing with any takes the single path).
    pending_signals: int = 0
    steps: dict[str, Update] = field(default_factory=dict)
    activation_rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    activations: dict[str, Update] = field(default_factory=dict)
    #: New waits (signal waits and sleeps opened in this set), inserted as they end up.
    wait_rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    waits: dict[str, Update] = field(default_factory=dict)
    instance: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    submissions: list[Submission] = field(default_factory=list)

    def move_step(self, step_id: str, expected: str, values: dict[str, Any]) -> None:
        _merge(self.steps, step_id, expected, values)

    def move_activation(self, activation_id: str, expected: str, values: dict[str, Any]) -> None:
        inserted = self.activation_rows.get(activation_id)
        if inserted is not None:  # opened in this set: it is inserted as it ends up
            inserted.update(values)
        else:
            _merge(self.activations, activation_id, expected, values)

    def move_wait(self, wait_id: str, expected: str, values: dict[str, Any]) -> None:
        inserted = self.wait_rows.get(wait_id)
        if inserted is not None:  # opened in this set: it is inserted as it ends up
            inserted.update(values)
        else:
            _merge(self.waits, wait_id, expected, values)


def _merge(updates: dict[str, Update], key: str, expected: str, values: dict[str, Any]) -> None:
    held = updates.get(key)
    if held is None:
        updates[key] = Update(expected, dict(values))
    else:  # guarded by the state first read; ends with the last values
        held.values.update(values)


class ReadOnlyConnection:
    """A connection for deciding an instance in a set: SELECTs run, writes raise
    :class:`NeedsSinglePath` (see the module docstring)."""

    def __init__(self, conn: sa.Connection) -> None:
        self._conn = conn

    def execute(self, statement: Any, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(statement, sa.Select):
            raise NeedsSinglePath(f"{type(statement).__name__} is not held back by the set path")
        return self._conn.execute(statement, *args, **kwargs)

    def begin_nested(self) -> Any:
        raise NeedsSinglePath("a savepoint is not held back by the set path")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)
