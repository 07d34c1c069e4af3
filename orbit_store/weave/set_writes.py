"""Writing a set of instances' held-back moves (``buffered``) in a constant number of statements,
whatever the set's size (seed §5 "内部事件消费", invariants 6 and 9):

1. the step tasks of every instance through the set-based submission (``submit_tasks``: one
   multi-row INSERT per table per chunk; idempotency keys from the activations as on the single
   path, invariant 6) — an item Pulse refuses (a quota, a queue) raises :class:`SetRefused`
   naming its instance, and the caller decides the set again without it;
2. one multi-row INSERT each of the new activations (with their tasks' ids), of the signal
   waits and sleeps they open, and of the events;
3. one UPDATE each for the steps, the activations, the waits (a timer fires once) and the
   instances: every row's new values by ``CASE id``, guarded by the (id, state) — for an
   instance (id, state_version, event_seq) — it was read in under the instance lock, with the
   affected-row count checked;
4. one UPDATE marking the set's inbox rows consumed, each with what it did.

:func:`decide_held` holds an instance's writes back while the caller decides it, and
:func:`release` hands it its connection back once the set is written.

The step change and the task that serves the next step still commit together (invariant 9).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import sqlalchemy as sa

from orbit_store.pulse.model import WaitPath
from orbit_store.pulse.submit.bulk import SUB_BATCH, submit_tasks
from orbit_store.schema import (
    workflow_activations,
    workflow_events,
    workflow_inbox,
    workflow_instances,
    workflow_steps,
    workflow_waits,
)

from .buffered import InstanceWrites, NeedsSinglePath, ReadOnlyConnection
from .context import InstanceContext, LostRace
from .model import AdvanceReport

log = logging.getLogger(__name__)


#: Instances per set transaction at most.
SET_SIZE = 100


@dataclass
class SetOutcome:
    """What a set pass did: a report per instance it advanced; the instances left to the
    single path."""

    reports: list[AdvanceReport] = field(default_factory=list)
    alone: list[str] = field(default_factory=list)
    #: Inbox rows the set consumed.
    consumed: int = 0


class SetRefused(Exception):
    """Pulse refused some of the set's step tasks: nothing of the set may commit; the set is
    decided again without these instances, which are advanced alone."""

    def __init__(self, instance_ids: set[str]) -> None:
        super().__init__(f"step tasks refused for {len(instance_ids)} instance(s)")
        self.instance_ids = instance_ids


def decide_held(
    ctx: InstanceContext,
    conn: sa.Connection,
    decide: Callable[[InstanceContext], None],
    *,
    pending_signals: int = 0,
    falls_back: tuple[type[BaseException], ...] = (NeedsSinglePath,),
) -> bool:
    """Run ``decide(ctx)`` with the instance's writes held back and its reads through
    :class:`ReadOnlyConnection` over ``conn``; True when it was held (write it, then
    :func:`release`). When it raises one of ``falls_back`` its held writes are dropped, ``ctx``
    gets ``conn`` back and False says it goes the single path; anything else propagates."""
    inst = ctx.instance
    ctx.writes = InstanceWrites(inst.state_version, inst.event_seq, pending_signals)
    ctx.conn = cast(sa.Connection, ReadOnlyConnection(conn))
    try:
        decide(ctx)
    except falls_back as exc:
        level = logging.DEBUG if isinstance(exc, NeedsSinglePath) else logging.INFO
        log.log(level, "workflow %s taken alone: %s: %s", inst.id, type(exc).__name__, exc)
        release([ctx], conn)
        return False
    return True


def release(contexts: Iterable[InstanceContext], conn: sa.Connection) -> None:
    """The held writes of ``contexts`` are written: each context works on ``conn`` again."""
    for ctx in contexts:
        ctx.conn, ctx.writes = conn, None


def write_set(
    conn: sa.Connection,
    namespace: str,
    contexts: Sequence[InstanceContext],
    consumed: dict[str, str],
) -> None:
    """Write what ``contexts`` held back, and mark the inbox rows ``consumed`` (id → outcome)."""
    held = [(ctx, ctx.writes) for ctx in contexts if ctx.writes is not None]
    _submit(conn, namespace, held)
    activations = [row for _, w in held for row in w.activation_rows.values()]
    if activations:
        conn.execute(workflow_activations.insert(), _same_keys(activations))
    new_waits = [row for _, w in held for row in w.wait_rows.values()]
    if new_waits:
        conn.execute(workflow_waits.insert(), _same_keys(new_waits))
    events = [row for _, w in held for row in w.events]
    if events:
        conn.execute(workflow_events.insert(), _same_keys(events))
    _update_each(
        conn,
        workflow_steps,
        {(key, u.expected): u.values for _, w in held for key, u in w.steps.items()},
    )
    _update_each(
        conn,
        workflow_activations,
        {(key, u.expected): u.values for _, w in held for key, u in w.activations.items()},
    )
    _update_each(
        conn,
        workflow_waits,
        {(key, u.expected): u.values for _, w in held for key, u in w.waits.items()},
    )
    _update_instances(conn, [(ctx.instance.id, w) for ctx, w in held if w.instance])
    _mark_consumed(conn, contexts[0].now if contexts else None, consumed)


def _submit(
    conn: sa.Connection, namespace: str, held: list[tuple[InstanceContext, InstanceWrites]]
) -> None:
    """Every held step task, in chunks of one set-based submission; each placeholder id
    replaced by the task's in the rows that name it."""
    items = [(ctx, sub) for ctx, w in held for sub in w.submissions]
    task_ids: dict[str, str] = {}
    refused: set[str] = set()
    for first in range(0, len(items), SUB_BATCH):
        chunk = items[first : first + SUB_BATCH]
        results = submit_tasks(
            conn, namespace=namespace, requests=[s.request for _, s in chunk], look_up_keys=False
        )
        for (ctx, sub), item in zip(chunk, results, strict=True):
            if item.result is None or item.result.replayed:
                refused.add(ctx.instance.id)
                continue
            task_ids[sub.placeholder] = item.result.task_id
            if item.result.wait_path is WaitPath.READY:
                ctx.report.ready_tasks.append((sub.queue, sub.handler))
    if refused:
        raise SetRefused(refused)
    for _, w in held:
        for row in w.activation_rows.values():
            if row.get("task_id") in task_ids:
                row["task_id"] = task_ids[row["task_id"]]
        for event in w.events:
            details = event.get("details")
            if isinstance(details, dict) and details.get("task_id") in task_ids:
                event["details"] = {**details, "task_id": task_ids[details["task_id"]]}


def _same_keys(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One multi-row INSERT needs the same columns in every row (a column some rows leave out
    is NULL in them, as it would be inserted alone)."""
    keys = {key for row in rows for key in row}
    return [{key: row.get(key) for key in keys} for row in rows]


def _update_each(
    conn: sa.Connection, table: sa.Table, updates: dict[tuple[str, str], dict[str, Any]]
) -> None:
    """Each row (id, state read under lock) → its values, in one guarded UPDATE."""
    _guarded_update(conn, table, ("id", "state"), updates)


def _update_instances(conn: sa.Connection, held: list[tuple[str, InstanceWrites]]) -> None:
    updates = {(instance_id, w.state_version, w.event_seq): w.instance for instance_id, w in held}
    _guarded_update(conn, workflow_instances, ("id", "state_version", "event_seq"), updates)


def _guarded_update(
    conn: sa.Connection,
    table: sa.Table,
    guard: tuple[str, ...],
    updates: dict[tuple[Any, ...], dict[str, Any]],
) -> None:
    """``UPDATE t SET c = CASE id WHEN … THEN … ELSE c END, … WHERE (guard) IN ((…), …)``,
    the affected rows checked. Written as the driver's SQL, each value through its column's
    bind processor: SQLAlchemy would compile this statement anew for every set (its shape
    changes with the rows), which costs more than all the set's other statements."""
    if not updates:
        return
    dialect = conn.dialect
    quote = dialect.identifier_preparer.quote
    mark = "?" if dialect.paramstyle in ("qmark", "numeric") else "%s"
    params: list[Any] = []
    assignments = []
    for column in sorted({column for values in updates.values() for column in values}):
        process = table.c[column].type.bind_processor(dialect)
        whens = []
        for key, values in updates.items():
            if column in values:
                value = values[column]
                whens.append(f"WHEN {mark} THEN {mark}")
                params += [key[0], process(value) if process and value is not None else value]
        assignments.append(
            f"{quote(column)} = CASE {quote('id')} {' '.join(whens)} ELSE {quote(column)} END"
        )
    row = f"({', '.join([mark] * len(guard))})"
    for key in updates:
        params += key
    sql = (
        f"UPDATE {quote(table.name)} SET {', '.join(assignments)} "
        f"WHERE ({', '.join(quote(c) for c in guard)}) IN ({', '.join([row] * len(updates))})"
    )
    updated = conn.exec_driver_sql(sql, tuple(params))
    if updated.rowcount != len(updates):
        raise LostRace(f"{table.name}: {updated.rowcount} of {len(updates)} rows moved")


def _mark_consumed(conn: sa.Connection, now: Any, consumed: dict[str, str]) -> None:
    moves = {
        (inbox_id, "PENDING"): {
            "state": "CONSUMED",
            "consumed_at": now,
            "outcome": outcome[:255],
            "last_error": None,
        }
        for inbox_id, outcome in sorted(consumed.items())
    }
    _guarded_update(conn, workflow_inbox, ("id", "state"), moves)
