"""A test driver for Pulse: one namespace, one engine, short names for each store transaction.

Tests read like the spec: ``grant = pulse.claim_one(); pulse.start(grant); pulse.succeed(grant)``.
Time moves with :meth:`PulseDriver.advance` — the database's own clock plus a skew every
transaction of this driver sees (``orbit_clock_skew_seconds``), never the app's clock.
"""

from __future__ import annotations

import datetime as dt
import functools
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import sqlalchemy as sa

from orbit_store.clock import CLOCK_SKEW_OPTION, db_now
from orbit_store.db import run_transaction
from orbit_store.pulse import service
from orbit_store.pulse.claim.claim import claim_tasks
from orbit_store.pulse.leases.complete import complete_attempt
from orbit_store.pulse.leases.heartbeat import renew_leases
from orbit_store.pulse.leases.start import start_attempt
from orbit_store.pulse.limits.gates import GateState, create_gate, set_gate
from orbit_store.pulse.limits.queues import put_queue
from orbit_store.pulse.limits.quota_declarations import QuotaSpec, put_quota
from orbit_store.pulse.manual.cancel import cancel_task
from orbit_store.pulse.manual.review import ReviewDecision, retry_task, review_task
from orbit_store.pulse.model import (
    CancelResult,
    CompletionResult,
    LeaseGrant,
    Outcome,
    QueuePolicy,
    RenewRequest,
    RenewResult,
    StartResult,
    SubmitResult,
    TaskState,
)
from orbit_store.pulse.submit.accept import SubmitRequest
from orbit_store.pulse.workers.sessions import (
    WorkerSession,
    drain_session,
    register_session,
    revoke_session,
)
from orbit_store.schema import audit_log, result_events, task_attempts, task_events, tasks

T = TypeVar("T")


class PulseDriver:
    def __init__(self, engine: sa.Engine, namespace: str | None = None) -> None:
        self.base_engine = engine
        self.skew = 0.0
        self.engine = engine
        self.namespace = namespace or f"ns-{uuid.uuid4().hex[:10]}"
        self._session: WorkerSession | None = None

    # --- time -------------------------------------------------------------------------------
    def advance(self, seconds: float) -> None:
        """Move this driver's database clock forward."""
        self.skew += seconds
        self.engine = self.base_engine.execution_options(**{CLOCK_SKEW_OPTION: self.skew})

    def now(self, seconds: float = 0) -> dt.datetime:
        """The database time this driver sees, plus ``seconds``."""
        return self.tx(db_now) + dt.timedelta(seconds=seconds)

    def tx(self, work: Callable[[sa.Connection], T]) -> T:
        return run_transaction(self.engine, work)

    # --- setup ------------------------------------------------------------------------------
    def queue(self, name: str = "default", **policy: Any) -> None:
        self.tx(lambda c: put_queue(c, self.namespace, QueuePolicy(name=name, **policy)))

    def quota(self, name: str = "q", **limits: Any) -> None:
        self.tx(lambda c: put_quota(c, self.namespace, QuotaSpec(name=name, **limits)))

    def gate(self, owner_id: str | None = None) -> str:
        """A new open execution gate."""
        return self.tx(
            lambda c: create_gate(
                c,
                namespace=self.namespace,
                owner_kind="test",
                owner_id=owner_id or uuid.uuid4().hex,
                now=db_now(c),
            )
        )

    def set_gate(self, gate_id: str, *, allowed: bool, **kw: Any) -> GateState:
        return self.tx(
            lambda c: set_gate(c, namespace=self.namespace, gate_id=gate_id, allowed=allowed, **kw)
        )

    def session(
        self,
        worker_name: str = "worker-1",
        ttl_seconds: int = 600,
        handlers: list[str] | None = None,
        queues: list[str] | None = None,
        registration_key: str | None = None,
    ) -> WorkerSession:
        self._session = self.tx(
            lambda c: register_session(
                c,
                namespace=self.namespace,
                worker_name=worker_name,
                queues=queues or ["default"],
                ttl_seconds=ttl_seconds,
                handlers=handlers,
                registration_key=registration_key,
            )
        )
        return self._session

    # --- transactions -----------------------------------------------------------------------
    def submit(self, handler: str = "test.noop", queue: str = "default", **kw: Any) -> SubmitResult:
        kw.setdefault("params", {})
        request = SubmitRequest(namespace=self.namespace, queue=queue, handler=handler, **kw)
        return service.submit(self.engine, request)

    def submit_many(
        self, count: int, handler: str = "test.noop", queue: str = "default", **kw: Any
    ) -> list[str]:
        """``count`` identical submissions through bulk submission (backlogs for tests): an
        item without a quota or concurrency key is written with its sub-batch's multi-row
        inserts, so a backlog of hundreds costs a few statements, not hundreds."""
        kw.setdefault("params", {})
        request = SubmitRequest(namespace=self.namespace, queue=queue, handler=handler, **kw)
        ids: list[str] = []
        for item in service.submit_many(self.engine, self.namespace, [request] * count):
            if item.error is not None:
                raise item.error
            assert item.result is not None
            ids.append(item.result.task_id)
        return ids

    def claim(
        self,
        limit: int = 10,
        queues: list[str] | None = None,
        session_id: str | None = None,
        start_handlers: tuple[str, ...] = (),
    ) -> list[LeaseGrant]:
        """Lease (``start_handlers``: a lease with start for those handlers' tasks)."""
        if session_id is None:
            session_id = (self._session or self.session()).id
        return self.tx(
            functools.partial(
                claim_tasks,
                namespace=self.namespace,
                queues_=queues or ["default"],
                limit=limit,
                worker_session_id=session_id,
                start_handlers=start_handlers,
            )
        )

    def claim_one(self, **kw: Any) -> LeaseGrant:
        grants = self.claim(limit=1, **kw)
        assert len(grants) == 1, f"expected one grant, got {grants}"
        return grants[0]

    def start(self, grant: LeaseGrant, token: str | None = None) -> StartResult:
        return self.tx(
            functools.partial(
                start_attempt,
                namespace=self.namespace,
                attempt_id=grant.attempt_id,
                token=token or grant.token,
            )
        )

    def heartbeat(self, *grants: LeaseGrant, token: str | None = None) -> list[RenewResult]:
        items = [RenewRequest(g.attempt_id, token or g.token) for g in grants]
        return self.tx(functools.partial(renew_leases, namespace=self.namespace, items=items))

    def complete(
        self, grant: LeaseGrant, outcome: Outcome, token: str | None = None, **kw: Any
    ) -> CompletionResult:
        return self.tx(
            functools.partial(
                complete_attempt,
                namespace=self.namespace,
                attempt_id=grant.attempt_id,
                token=token or grant.token,
                outcome=outcome,
                **kw,
            )
        )

    def succeed(self, grant: LeaseGrant, result: Any = None) -> CompletionResult:
        return self.complete(grant, Outcome.SUCCEEDED, result=result)

    def fail(self, grant: LeaseGrant, retryable: bool = False, **kw: Any) -> CompletionResult:
        return self.complete(grant, Outcome.FAILED, retryable=retryable, **kw)

    def cancel(self, task_id: str, actor: str = "tester", reason: str = "") -> CancelResult:
        return self.tx(
            functools.partial(
                cancel_task, namespace=self.namespace, task_id=task_id, actor=actor, reason=reason
            )
        )

    def review(self, task_id: str, decision: str = "succeeded", **kw: Any) -> TaskState:
        kw.setdefault("actor", "alice@example.com")
        kw.setdefault("reason", "checked the payment provider")
        kw.setdefault("evidence_ref", "ticket-42")
        kw.setdefault("execution_ended", True)
        kw.setdefault("expected_state_version", self.task(task_id).state_version)
        return self.tx(
            functools.partial(
                review_task,
                namespace=self.namespace,
                task_id=task_id,
                decision=ReviewDecision(decision),
                **kw,
            )
        )

    def retry(self, task_id: str, **kw: Any) -> SubmitResult:
        kw.setdefault("actor", "alice@example.com")
        kw.setdefault("reason", "provider outage is over")
        kw.setdefault("safe_to_retry", True)
        kw.setdefault("expected_state_version", self.task(task_id).state_version)
        return self.tx(
            functools.partial(retry_task, namespace=self.namespace, task_id=task_id, **kw)
        )

    def revoke(self, session_id: str, reason: str = "pod deleted") -> None:
        self.tx(
            functools.partial(
                revoke_session, namespace=self.namespace, session_id=session_id, reason=reason
            )
        )

    def drain(self, session_id: str) -> None:
        self.tx(functools.partial(drain_session, namespace=self.namespace, session_id=session_id))

    def reap(self) -> service.ReapReport:
        return service.reap(self.engine, namespace=self.namespace)

    def promote(self) -> service.PromoteReport:
        return service.promote(self.engine, namespace=self.namespace)

    # --- reading ----------------------------------------------------------------------------
    def task(self, task_id: str) -> sa.Row[Any]:
        with self.engine.connect() as conn:
            return conn.execute(sa.select(tasks).where(tasks.c.id == task_id)).one()

    def state(self, task_id: str) -> str:
        return str(self.task(task_id).state)

    def attempts(self, task_id: str) -> list[sa.Row[Any]]:
        with self.engine.connect() as conn:
            query = (
                sa.select(task_attempts)
                .where(task_attempts.c.task_id == task_id)
                .order_by(task_attempts.c.generation)
            )
            return list(conn.execute(query))

    def audit(self, resource_id: str) -> list[sa.Row[Any]]:
        with self.engine.connect() as conn:
            query = (
                sa.select(audit_log)
                .where(audit_log.c.resource_id == resource_id)
                .order_by(audit_log.c.id)
            )
            return list(conn.execute(query))

    def result_events(self, task_id: str) -> list[sa.Row[Any]]:
        with self.engine.connect() as conn:
            query = (
                sa.select(result_events)
                .where(result_events.c.task_id == task_id)
                .order_by(result_events.c.state_version)
            )
            return list(conn.execute(query))

    def events(self, task_id: str) -> list[sa.Row[Any]]:
        with self.engine.connect() as conn:
            query = (
                sa.select(task_events)
                .where(task_events.c.task_id == task_id)
                .order_by(task_events.c.state_version)
            )
            return list(conn.execute(query))
