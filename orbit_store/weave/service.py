"""Engine-level entry points: each runs Weave transactions through ``run_transaction`` (deadlock
retries) and resolves what a transaction cannot — a concurrent duplicate or a commit whose
outcome is unknown is looked up by its stable identity (start key, signal id), never retried
under a new one; an engine pass isolates each item in its own transaction, so one bad row is
counted and retried later, never stopping the pass.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import sqlalchemy as sa

from orbit_store.db import is_sqlite, run_transaction
from orbit_store.errors import CommitOutcomeUnknown
from orbit_store.passes import ItemPass
from orbit_store.payload import DEFAULT_MAX_PAYLOAD_BYTES

from . import inbox, timers
from .definitions import publish_audited
from .dsl.spec import parse
from .model import AdvanceReport, PublishResult, SignalResult, StartResult
from .sets import inbox_set, set_pass, timer_set
from .signals import accept_signal
from .start import StartRequest, find_started, start_workflow

log = logging.getLogger(__name__)

#: The engine loops these passes run in (``orbit_engine_item_errors_total{loop}``).
INBOX_LOOP, TIMERS_LOOP = "weave-inbox", "weave-timers"


def publish(
    engine: sa.Engine,
    *,
    namespace: str,
    name: str,
    document: Any,
    actor: str,
    reason: str = "",
    source: str = "api",
) -> PublishResult:
    """Validate (InvalidDefinition names every bad field) and publish, audited."""
    spec = parse(document)
    return run_transaction(
        engine,
        functools.partial(
            publish_audited,
            namespace=namespace,
            name=name,
            spec=spec,
            actor=actor,
            reason=reason,
            source=source,
        ),
    )


def start(engine: sa.Engine, request: StartRequest) -> tuple[StartResult, AdvanceReport]:
    try:
        return run_transaction(engine, functools.partial(start_workflow, request=request))
    except (sa.exc.IntegrityError, CommitOutcomeUnknown):
        found = run_transaction(engine, lambda conn: find_started(conn, request))
        if found is None:
            raise
        return found, AdvanceReport(namespace=request.namespace)


def signal(
    engine: sa.Engine,
    *,
    namespace: str,
    instance_id: str,
    signal_id: str,
    name: str,
    payload: Any = None,
    sent_by: str | None = None,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> tuple[SignalResult, AdvanceReport]:
    work = functools.partial(
        accept_signal,
        namespace=namespace,
        instance_id=instance_id,
        signal_id=signal_id,
        name=name,
        payload=payload,
        sent_by=sent_by,
        max_payload_bytes=max_payload_bytes,
    )
    try:
        result, ctx = run_transaction(engine, work)
    except CommitOutcomeUnknown:
        result, ctx = run_transaction(engine, work)  # same signal id: a replay if it committed
    return result, ctx.report


@dataclass
class PassReport:
    """What one engine pass did: a report per item that moved, and items that failed (each
    logged by :class:`orbit_store.passes.ItemPass`)."""

    reports: list[AdvanceReport] = field(default_factory=list)
    errors: int = 0
    #: Items the pass found due (a full pass means more may be waiting).
    due: int = 0
    #: A timer pass: seconds from its end to the next timer, if its caller read them.
    next_due_in: float | None = None


Item = TypeVar("Item")


def _run_groups(
    groups: list[list[Item]],
    work: Callable[[ItemPass, Item], AdvanceReport | None],
    items: ItemPass,
    workers: int,
) -> PassReport:
    """Run ``work`` on every item: the items of one group in order, groups side by side on up
    to ``workers`` threads (each item its own transaction; a failure is counted, not raised)."""
    report, lock = PassReport(), threading.Lock()

    def run(group: list[Item]) -> None:
        for item in group:
            done = work(items, item)
            if done is not None:
                with lock:
                    report.reports.append(done)

    if workers <= 1 or len(groups) <= 1:  # SQLite callers pass 1: it has one writer anyway
        for group in groups:
            run(group)
    else:
        with ThreadPoolExecutor(min(workers, len(groups)), "orbit-weave") as pool:
            list(pool.map(run, groups))
    report.errors = items.errors
    return report


def consume_pass(
    engine: sa.Engine,
    *,
    limit: int = 100,
    namespace: str | None = None,
    workers: int = 1,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> PassReport:
    """Consume due inbox rows: the instances they belong to in sets (``inbox_set``: one
    transaction per set, sets side by side on ``workers`` threads), an instance the set path
    leaves alone row by row in its own transactions (each instance's rows in order). A failing
    row backs off and stays."""
    due_rows = run_transaction(
        engine, functools.partial(inbox.due_messages, limit=limit, namespace=namespace)
    )
    by_instance: dict[str, list[inbox.Due]] = {}
    for due in due_rows:
        by_instance.setdefault(due.instance_id, []).append(due)
    by_namespace: dict[str, list[str]] = {}
    for instance_id, rows in by_instance.items():
        by_namespace.setdefault(rows[0].namespace, []).append(instance_id)
    threads = 1 if is_sqlite(engine) else workers
    sets = set_pass.run_sets(
        engine,
        functools.partial(inbox_set.consume_set, max_payload_bytes=max_payload_bytes),
        by_namespace,
        threads=threads,
        what="inbox",
    )
    report = PassReport(reports=sets.reports, due=len(due_rows))

    def work(items: ItemPass, due: inbox.Due) -> AdvanceReport | None:
        return items.run(
            functools.partial(
                inbox.consume,
                namespace=due.namespace,
                instance_id=due.instance_id,
                inbox_id=due.id,
                max_payload_bytes=max_payload_bytes,
            ),
            namespace=due.namespace,
            item=f"inbox row {due.id} of workflow {due.instance_id}",
            on_error=functools.partial(_record_failure, engine, due),
        )

    items = ItemPass(engine, INBOX_LOOP)
    single = _run_groups([by_instance[i] for i in sets.alone], work, items, threads)
    report.reports += single.reports
    report.errors = single.errors
    return report


def _record_failure(engine: sa.Engine, due: inbox.Due, exc: Exception) -> None:
    """Back the row off, with the error, so the next passes do not hammer it."""
    run_transaction(
        engine,
        functools.partial(
            inbox.record_failure,
            namespace=due.namespace,
            inbox_id=due.id,
            error=f"{type(exc).__name__}: {exc}",
        ),
    )


def _record_timer_failure(
    engine: sa.Engine, namespace: str, instance_id: str, exc: Exception
) -> None:
    """Back the instance's timers off, with the error, so it never takes the next pass."""
    run_transaction(
        engine,
        functools.partial(
            timers.record_failure,
            namespace=namespace,
            instance_id=instance_id,
            error=f"{type(exc).__name__}: {exc}",
        ),
    )


def timer_pass(
    engine: sa.Engine,
    *,
    limit: int = 100,
    namespace: str | None = None,
    workers: int = 1,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> PassReport:
    """Fire the due timers of running, unpaused instances: in sets (``timer_set``: one
    transaction per set of one namespace, sets side by side on ``workers`` threads), an
    instance the set path leaves alone in its own transaction; one that fails there backs off
    alone (``timers.record_failure``)."""
    due = run_transaction(
        engine, functools.partial(timers.due_instances, limit=limit, namespace=namespace)
    )
    by_namespace: dict[str, list[str]] = {}
    for ns, instance_id in due:
        by_namespace.setdefault(ns, []).append(instance_id)
    threads = 1 if is_sqlite(engine) else workers
    sets = set_pass.run_sets(
        engine,
        functools.partial(timer_set.fire_set, max_payload_bytes=max_payload_bytes),
        by_namespace,
        threads=threads,
        what="timer",
    )
    namespace_of = {instance_id: ns for ns, instance_id in due}

    def work(items: ItemPass, instance_id: str) -> AdvanceReport | None:
        ns = namespace_of[instance_id]
        return items.run(
            functools.partial(
                timers.wake_instance,
                namespace=ns,
                instance_id=instance_id,
                max_payload_bytes=max_payload_bytes,
            ),
            namespace=ns,
            item=f"timers of workflow {instance_id}",
            on_error=functools.partial(_record_timer_failure, engine, ns, instance_id),
        )

    items = ItemPass(engine, TIMERS_LOOP)
    single = _run_groups([[i] for i in sets.alone], work, items, threads)
    single.reports = sets.reports + single.reports
    single.due = len(due)
    return single
