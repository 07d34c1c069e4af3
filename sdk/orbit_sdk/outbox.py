"""A transactional outbox for Orbit submissions, in your application's own database (seed §6.1).

Your business change and "submit this task" must not part ways: write the pending submission in
the same transaction as the business rows, and let a relay send it afterwards with the stable
idempotency key stored beside it. A rollback leaves nothing to send; a relay that dies after
sending but before marking sends again later under the same key, and Orbit answers with the
original task (a replay), so there is still exactly one task.

    from orbit_sdk.outbox import OutboxSubmission, enqueue, outbox_table, Relay

    outbox = outbox_table(Base.metadata)          # add it to your schema (Alembic sees it)
    with Session(engine) as session, session.begin():
        session.add(order)
        enqueue(session, outbox, OutboxSubmission("shop", "shop.send_receipt",
                                                  params={"order": order.id},
                                                  idempotency_key=f"receipt-{order.id}"))
    Relay(engine, outbox, Client()).run_once()    # or: orbit outbox relay --database-url …

This module needs SQLAlchemy (``pip install 'orbit-platform-sdk[outbox]'``); the rest of
``orbit_sdk`` does not, and never imports it. Leases and backoff use the relay's own clock: two
relays whose clocks disagree can at worst both send one row, and the idempotency key turns the
second into a replay.
"""

from __future__ import annotations

import datetime as dt
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from ._wire.calls import submission_body, submission_options
from ._wire.transport import check_body
from .client import Client
from .errors import IdempotencyConflict, OrbitError, ValidationFailed

PENDING, DELIVERED, PARKED = "PENDING", "DELIVERED", "PARKED"
#: Refusals no retry can fix: the row is PARKED at once for a person to look at.
PERMANENT_ERRORS: tuple[type[OrbitError], ...] = (IdempotencyConflict, ValidationFailed)


def outbox_table(metadata: sa.MetaData, name: str = "orbit_outbox") -> sa.Table:
    """The outbox table, registered on your ``metadata``. ``attempts`` doubles as the lease
    version: every lease bumps it, and a relay marks a row only at the value its lease set."""
    return sa.Table(
        name,
        metadata,
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("namespace", sa.String(63), nullable=False),
        sa.Column("idempotency_key", sa.String(255), nullable=False, unique=True),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(12), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        # PENDING: due at this instant (first try, next retry, or the end of a relay's lease).
        sa.Column("next_attempt_at", sa.DateTime(), nullable=False),
        sa.Column("task_id", sa.String(36), nullable=True),
        sa.Column("replayed", sa.Boolean(), nullable=True),
        sa.Column("last_error", sa.String(1024), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("delivered_at", sa.DateTime(), nullable=True),
        sa.Index(f"ix_{name}_due", "state", "next_attempt_at"),
    )


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


@dataclass(frozen=True)
class OutboxSubmission:
    """A task to submit once the surrounding transaction commits; same fields as
    ``Client.submit``. Without an ``idempotency_key`` one is made now and stored."""

    namespace: str
    handler: str
    params: Any = None
    queue: str = "default"
    idempotency_key: str | None = None
    options: dict[str, Any] = field(default_factory=dict)  # priority, safety, delay, …


def enqueue(session: Session | sa.Connection, table: sa.Table, submission: OutboxSubmission) -> str:
    """Write the pending submission inside the caller's transaction (never commits); returns
    its idempotency key. Params Orbit could never store raise ``ValidationFailed`` here, before
    they reach the outbox table."""
    body = submission_body(
        handler=submission.handler,
        queue=submission.queue,
        params=submission.params,
        idempotency_key=submission.idempotency_key,
        **submission.options,
    )
    check_body(body)
    now = _now()
    session.execute(
        table.insert().values(
            id=str(uuid.uuid4()),
            namespace=submission.namespace,
            idempotency_key=body["idempotency_key"],
            request=body,
            state=PENDING,
            attempts=0,
            next_attempt_at=now,
            created_at=now,
        )
    )
    return str(body["idempotency_key"])


@dataclass(frozen=True)
class RelayPolicy:
    batch: int = 50
    lease_seconds: float = 60.0  # a row a relay leased is left alone this long
    max_attempts: int = 20  # then PARKED with the last error
    backoff_initial_seconds: float = 1.0
    backoff_max_seconds: float = 300.0

    def backoff(self, attempts: int, rng: random.Random) -> dt.timedelta:
        exponent = min(max(attempts - 1, 0), 30)
        ceiling = min(self.backoff_max_seconds, self.backoff_initial_seconds * 2**exponent)
        return dt.timedelta(seconds=ceiling / 2 + rng.uniform(0, ceiling / 2))


@dataclass(frozen=True)
class Leased:
    id: str
    namespace: str
    request: dict[str, Any]
    attempts: int  # the lease version: mark only at this value


@dataclass
class RelayReport:
    leased: int = 0
    delivered: int = 0
    replayed: int = 0  # delivered rows whose submission Orbit had already accepted
    retried: int = 0
    parked: int = 0
    lost: int = 0  # another relay took the row over meanwhile: nothing marked

    def add(self, other: RelayReport) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class Relay:
    """Leases due rows (``FOR UPDATE SKIP LOCKED`` where the database has it, and a guarded
    UPDATE everywhere), submits them outside any transaction, and marks each in its own
    transaction with the task id Orbit returned."""

    def __init__(
        self,
        engine: sa.Engine,
        table: sa.Table,
        client: Client,
        policy: RelayPolicy | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.engine, self.table, self.client = engine, table, client
        self.policy = policy or RelayPolicy()
        self.rng = rng or random.Random()

    def lease(self) -> list[Leased]:
        t, now = self.table, _now()
        with self.engine.begin() as conn:
            rows = conn.execute(
                sa.select(t.c.id, t.c.namespace, t.c.request, t.c.attempts)
                .where(t.c.state == PENDING, t.c.next_attempt_at <= now)
                .order_by(t.c.next_attempt_at, t.c.id)
                .limit(self.policy.batch)
                .with_for_update(skip_locked=True)
            ).all()
            leased = []
            for row in rows:
                updated = conn.execute(
                    t.update()
                    .where(t.c.id == row.id, t.c.state == PENDING, t.c.attempts == row.attempts)
                    .values(
                        attempts=row.attempts + 1,
                        next_attempt_at=now + dt.timedelta(seconds=self.policy.lease_seconds),
                    )
                )
                if updated.rowcount == 1:
                    leased.append(Leased(row.id, row.namespace, row.request, row.attempts + 1))
        return leased

    def submit(self, row: Leased) -> tuple[str, bool] | OrbitError:
        """Send one row under its stored key: (task id, replayed), or the error."""
        try:
            task = self.client.submit(row.namespace, **submission_options(row.request))
        except OrbitError as exc:
            return exc
        return task.id, task.replayed

    def mark(self, row: Leased, outcome: tuple[str, bool] | OrbitError) -> str:
        """Record the outcome at the row's lease version; returns what happened."""
        t, now = self.table, _now()
        if isinstance(outcome, tuple):
            values: dict[str, Any] = {
                "state": DELIVERED,
                "task_id": outcome[0],
                "replayed": outcome[1],
                "delivered_at": now,
                "last_error": None,
            }
            result = "replayed" if outcome[1] else "delivered"
        elif isinstance(outcome, PERMANENT_ERRORS) or row.attempts >= self.policy.max_attempts:
            values, result = {"state": PARKED, "last_error": _describe(outcome)}, "parked"
        else:
            delay = self.policy.backoff(row.attempts, self.rng)
            values = {"next_attempt_at": now + delay, "last_error": _describe(outcome)}
            result = "retried"
        with self.engine.begin() as conn:
            updated = conn.execute(
                t.update()
                .where(t.c.id == row.id, t.c.state == PENDING, t.c.attempts == row.attempts)
                .values(**values)
            )
        return result if updated.rowcount == 1 else "lost"

    def run_once(self) -> RelayReport:
        """One batch: lease, submit, mark."""
        report = RelayReport()
        rows = self.lease()
        report.leased = len(rows)
        for row in rows:
            result = self.mark(row, self.submit(row))
            if result == "replayed":
                report.delivered += 1
                report.replayed += 1
            else:
                setattr(report, result, getattr(report, result) + 1)
        return report

    def run(
        self, *, until_idle: bool = False, max_seconds: float | None = None, idle_sleep: float = 1
    ) -> RelayReport:
        """Relay batches until stopped by the budget (``max_seconds``) or, with
        ``until_idle``, until nothing is due."""
        total, started = RelayReport(), time.monotonic()
        while max_seconds is None or time.monotonic() - started < max_seconds:
            report = self.run_once()
            total.add(report)
            if report.leased == 0:
                if until_idle:
                    break
                time.sleep(idle_sleep)
        return total


def _describe(error: OrbitError) -> str:
    """The error with the fields a validation problem names, for the row's last_error."""
    text = str(error)
    for item in error.problem.errors or []:
        where = ".".join(str(part) for part in item.get("loc", []))
        text += f"; {where}: {item.get('msg')}"
    return text[:1024]
