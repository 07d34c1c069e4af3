"""Group commit of workflow starts: concurrent ``POST …/workflows`` of one namespace started in
one transaction (seed §5 "流程启动 / 推进"; invariants 6, 9, 10), each answered as
:func:`service.start` would answer it alone.

In a constant number of statements, whatever the group's size: one read of the start keys
already used (a replay or an ``IdempotencyConflict``, as alone), one of the definitions and one
of their versions (an unknown or withdrawn definition, a missing version or an input its
inputSchema refuses is that request's answer alone: nothing of it is written), then one
multi-row INSERT each of the gates, the instances and their steps, the new instances locked in
id order, and their first moves held back and written as one set (``set_writes``: every first
task through one set-based submission). The lock order is a lone start's: gate and instance
rows, then the step tasks' quota rows.

An instance whose first moves the set does not hold back (a wait, sleep or poll step) is
advanced alone after the set, in the same transaction, as ``advance_held`` does. Two requests
of one group under one start key are answered as two concurrent starts: the first is grouped,
the other starts alone after the group (a replay of it, or a conflict).

When Pulse refuses a first task (a quota, a queue: ``SetRefused`` from the set, or a quota
for an instance advanced alone), nothing of the group is written; the group is decided again
without the refused requests, which then start alone so each gets its own answer (the
refusal, as a lone start raises it). When the group's transaction cannot tell each request's
fate otherwise — another transaction took one of its start keys meanwhile, the database
refused a value, or the commit's outcome is unknown — every request starts again alone. A
start key is never started twice (a lone start looks its key up first).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import Any, cast

import sqlalchemy as sa

from orbit_store.clock import db_now, utc_now
from orbit_store.db import run_transaction
from orbit_store.errors import QuotaExceeded
from orbit_store.ids import new_id
from orbit_store.schema import (
    execution_gates,
    workflow_definition_versions,
    workflow_definitions,
    workflow_instances,
    workflow_steps,
)

from .advance import advance
from .context import InstanceContext, context_of, lock_instance, steps_of
from .definitions import load_version
from .model import AdvanceReport, StartResult
from .service import start
from .set_writes import SetRefused, decide_held, release, write_set
from .start import (
    GATE_OWNER,
    StartRequest,
    bound_version,
    check_input,
    chosen_version,
    instance_row,
    replay_of,
    step_rows,
)

log = logging.getLogger(__name__)

#: Starts per group at most (the first tasks of a group go through one set-based submission).
GROUP_SIZE = 100
#: Times a group is decided again without its refused starts before all go alone (a quota that
#: fills meanwhile can refuse another start on the next try).
REFUSED_TRIES = 3

Started = tuple[StartResult, AdvanceReport]
#: Each request's answer: what it started (or replayed), or the error it would have raised alone.
Answer = Started | Exception


def start_group(
    engine: sa.Engine, namespace: str, requests: Sequence[StartRequest]
) -> list[Answer]:
    """Start ``requests`` (one namespace, at most ``GROUP_SIZE``) in one transaction; one
    answer per request, in order. A group of one is a plain ``start``."""
    if len(requests) == 1:
        return [_alone(engine, requests[0])]
    if len(requests) > GROUP_SIZE or any(r.namespace != namespace for r in requests):
        raise ValueError(f"a group holds at most {GROUP_SIZE} starts of one namespace")
    keys: set[str] = set()
    grouped: list[int] = []
    for position, request in enumerate(requests):
        if request.start_key not in keys:
            keys.add(request.start_key)
            grouped.append(position)
    by_position = _start_grouped(engine, namespace, {p: requests[p] for p in grouped})
    return [
        by_position[p] if p in by_position else _alone(engine, requests[p])
        for p in range(len(requests))
    ]


class _StartsRefused(Exception):
    """Pulse refused the first tasks of these start keys: the group's transaction rolls back."""

    def __init__(self, start_keys: set[str]) -> None:
        super().__init__(f"first tasks refused for {len(start_keys)} start(s)")
        self.start_keys = start_keys


def _start_grouped(
    engine: sa.Engine, namespace: str, grouped: dict[int, StartRequest]
) -> dict[int, Answer]:
    """Each position's answer: the group in one transaction, decided again without the starts
    Pulse refused (answered alone after it); alone, all, when the group fails otherwise."""
    refused: set[str] = set()
    for _ in range(REFUSED_TRIES):
        kept = {p: r for p, r in grouped.items() if r.start_key not in refused}
        work = functools.partial(_start_all, namespace=namespace, requests=list(kept.values()))
        try:
            answers = run_transaction(engine, work) if kept else []
        except _StartsRefused as exc:
            refused |= exc.start_keys
            continue
        except Exception as exc:  # see the module docstring: each request's fate, alone
            log.info("start group of %d taken alone: %s: %s", len(kept), type(exc).__name__, exc)
            break
        by_position = dict(zip(kept, answers, strict=True))
        left_out = (p for p in grouped if p not in by_position)
        return by_position | {p: _alone(engine, grouped[p]) for p in left_out}
    return {p: _alone(engine, request) for p, request in grouped.items()}


def _alone(engine: sa.Engine, request: StartRequest) -> Answer:
    try:
        return start(engine, request)
    except Exception as exc:  # answered to its own request, as the route would have raised it
        return exc


def _start_all(
    conn: sa.Connection, namespace: str, requests: Sequence[StartRequest]
) -> list[Answer]:
    answers: list[Answer | None] = [None] * len(requests)
    used = {
        row.start_key: row
        for row in conn.execute(
            sa.select(
                workflow_instances.c.id,
                workflow_instances.c.state,
                workflow_instances.c.start_digest,
                workflow_instances.c.start_key,
            ).where(
                workflow_instances.c.namespace == namespace,
                workflow_instances.c.start_key.in_([r.start_key for r in requests]),
            )
        )
    }
    for position, request in enumerate(requests):
        row = used.get(request.start_key)
        if row is not None:
            answers[position] = _replay(row, request)
    new = [p for p in range(len(requests)) if answers[p] is None]
    bound = _bind(conn, namespace, [requests[p] for p in new])
    starting: list[tuple[int, tuple[str, str, int]]] = []
    for position, binding in zip(new, bound, strict=True):
        if isinstance(binding, Exception):
            answers[position] = binding
        else:
            starting.append((position, binding))
    if starting:
        for position, started in _insert_and_advance(conn, namespace, requests, starting):
            answers[position] = started
    return [cast(Answer, answer) for answer in answers]


def _replay(row: Any, request: StartRequest) -> Answer:
    try:
        return replay_of(row, request), AdvanceReport(namespace=request.namespace)
    except Exception as exc:
        return exc


def _bind(
    conn: sa.Connection, namespace: str, requests: Sequence[StartRequest]
) -> list[tuple[str, str, int] | Exception]:
    """Per request: (definition id, version id, version) with its input checked, or the error a
    lone start raises for it."""
    if not requests:
        return []
    definitions = {
        row.name: row
        for row in conn.execute(
            sa.select(workflow_definitions).where(
                workflow_definitions.c.namespace == namespace,
                workflow_definitions.c.name.in_(sorted({r.definition for r in requests})),
            )
        )
    }
    version_ids: dict[tuple[str, int], str] = {}
    if definitions:
        for row in conn.execute(
            sa.select(
                workflow_definition_versions.c.id,
                workflow_definition_versions.c.definition_id,
                workflow_definition_versions.c.version,
            ).where(
                workflow_definition_versions.c.definition_id.in_(
                    [d.id for d in definitions.values()]
                )
            )
        ):
            version_ids[(row.definition_id, row.version)] = row.id
    bound: list[tuple[str, str, int] | Exception] = []
    for request in requests:
        try:
            definition: Any = definitions.get(request.definition)
            version = chosen_version(request, definition)
            binding = bound_version(
                request, definition, version, version_ids.get((definition.id, version))
            )
            check_input(load_version(conn, binding[1]).spec.input_schema, request.input)
        except Exception as exc:
            bound.append(exc)
        else:
            bound.append(binding)
    return bound


def _insert_and_advance(
    conn: sa.Connection,
    namespace: str,
    requests: Sequence[StartRequest],
    starting: list[tuple[int, tuple[str, str, int]]],
) -> list[tuple[int, Started]]:
    """Insert the new instances (gates, rows, steps) and advance them: held back and written as
    one set, or alone when the set path does not hold their moves."""
    now = db_now(conn)
    instances: dict[str, tuple[int, tuple[str, str, int]]] = {}
    gates, rows, steps = [], [], []
    for position, binding in starting:
        request, instance_id, gate_id = requests[position], new_id(), new_id()
        instances[instance_id] = (position, binding)
        gates.append(
            {
                "id": gate_id,
                "namespace": namespace,
                "owner_kind": GATE_OWNER,
                "owner_id": instance_id,
                "allowed": True,
                "control_version": 1,
                "created_at": now,
                "updated_at": now,
            }
        )
        rows.append(instance_row(request, instance_id, gate_id, binding, now))
        steps += step_rows(request, instance_id, load_version(conn, binding[1]), now)
    conn.execute(execution_gates.insert(), gates)
    conn.execute(workflow_instances.insert(), rows)
    conn.execute(workflow_steps.insert(), steps)

    locked = conn.execute(
        sa.select(workflow_instances, utc_now().label("db_now"))
        .where(workflow_instances.c.id.in_(sorted(instances)))
        .order_by(workflow_instances.c.id)
        .with_for_update()
    ).all()
    their_steps = steps_of(conn, sorted(instances))
    held: list[InstanceContext] = []
    alone: list[str] = []
    for row in locked:
        request = requests[instances[row.id][0]]
        ctx = context_of(
            conn,
            row,
            their_steps[row.id],
            actor=request.started_by,
            max_payload_bytes=request.max_payload_bytes,
        )
        version = instances[row.id][1][2]
        if decide_held(ctx, conn, functools.partial(_start_and_advance, request, version)):
            held.append(ctx)
        else:
            alone.append(row.id)
    try:
        write_set(conn, namespace, held, {})
    except SetRefused as exc:
        raise _StartsRefused(
            {requests[instances[i][0]].start_key for i in exc.instance_ids}
        ) from exc
    release(held, conn)
    for instance_id in alone:
        request = requests[instances[instance_id][0]]
        ctx = lock_instance(
            conn,
            namespace,
            instance_id,
            actor=request.started_by,
            max_payload_bytes=request.max_payload_bytes,
        )
        _started_event(ctx, request, instances[instance_id][1][2])
        try:
            advance(ctx)
        except QuotaExceeded as exc:  # Pulse refused its first task here, not in the set
            raise _StartsRefused({request.start_key}) from exc
        ctx.flush()
        held.append(ctx)
    return [
        (
            instances[ctx.instance.id][0],
            (StartResult(ctx.instance.id, ctx.instance.state, replayed=False), ctx.report),
        )
        for ctx in held
    ]


def _start_and_advance(request: StartRequest, version: int, ctx: InstanceContext) -> None:
    _started_event(ctx, request, version)
    advance(ctx)
    ctx.flush()


def _started_event(ctx: InstanceContext, request: StartRequest, version: int) -> None:
    ctx.event("instance.started", details={"definition": request.definition, "version": version})
