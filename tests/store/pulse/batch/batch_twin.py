"""Two namespaces driven through one seeded scenario: one starts and completes its batches
through the set path, its twin item by item (``set_based=False``, the reference). Every
random choice is drawn once and applied to both, so their answers and rows must match once ids
and times are left out (``snapshot``)."""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from orbit_store.fencing import reopen_dispatch
from orbit_store.pulse import batches
from orbit_store.pulse.batch import items as batch_items
from orbit_store.pulse.limits.queues import put_queue
from orbit_store.pulse.model import (
    CompletionResult,
    LeaseGrant,
    Outcome,
    QueuePolicy,
    RetryPolicy,
    Safety,
    StartResult,
)
from orbit_store.recovery.restore_fence import restore_fence
from orbit_store.schema import (
    concurrency_keys,
    concurrency_permits,
    event_deliveries,
    quotas,
    result_events,
    subscriptions,
    task_attempts,
    task_events,
    tasks,
)

from ...drivers.delivery_driver import DeliveryDriver
from ...drivers.pulse_driver import PulseDriver

QUEUES = ("default", "slow")
#: "default" retries at once (READY again, deterministic); "slow" after 5 to 10 minutes
#: (SCHEDULED; the scenario never gets there).
RETRIES = {"default": RetryPolicy(3, 0, 0, 2.0), "slow": RetryPolicy(3, 600_000, 600_000, 2.0)}
OUTCOMES = [
    (Outcome.SUCCEEDED, False, 45),
    (Outcome.FAILED, False, 12),
    (Outcome.FAILED, True, 20),
    (Outcome.UNKNOWN, False, 5),
    (Outcome.RELEASED, False, 8),
    (Outcome.CANCELLED, False, 5),
]
NOT_FOUND_ID = "00000000-0000-7000-8000-000000000000"


@dataclass
class Side:
    pulse: PulseDriver
    set_based: bool
    gates: list[str] = field(default_factory=list)
    task_ids: list[str] = field(default_factory=list)
    #: the latest grant of each logical task (by index), and every grant ever made
    grants: dict[int, LeaseGrant] = field(default_factory=dict)
    history: dict[tuple[int, int], LeaseGrant] = field(default_factory=dict)
    second_session: str = ""

    def index(self, task_id: str) -> int:
        return self.task_ids.index(task_id)


class Twin:
    """The scenario's steps, each applied to both sides."""

    def __init__(self, engine: sa.Engine, seed: int) -> None:
        self.engine = engine
        self.rng = random.Random(seed)
        self.sides = [Side(PulseDriver(engine), True), Side(PulseDriver(engine), False)]
        self.answers: list[tuple[str, list[Any], list[Any]]] = []
        for side in self.sides:
            for queue in QUEUES:
                policy = QueuePolicy(name=queue, lease_seconds=30, retry=RETRIES[queue])
                side.pulse.tx(lambda c, p=policy, s=side: put_queue(c, s.pulse.namespace, p))
            side.pulse.quota("running", queue="slow", max_running=4)
            side.pulse.quota("everything", max_running=40)  # the namespace-wide scope too
            delivery = DeliveryDriver(side.pulse)
            delivery.subscribe("results")
            delivery.subscribe("failures", outcomes=("FAILED", "NEEDS_REVIEW"))
            side.gates = [side.pulse.gate(f"g{n}") for n in range(2)]
            side.pulse.session("worker-1")
            side.second_session = side.pulse.session("worker-2").id
            side.pulse.session("worker-1")

    # --- steps ------------------------------------------------------------------------------
    def submit(self, count: int) -> None:
        for _ in range(count):
            queue = self.rng.choice(QUEUES)
            key = self.rng.choice([None, None, "k1", "k2"])
            gate = self.rng.choice([None, None, 0, 1])
            safety = self.rng.choice([Safety.SAFE, Safety.UNSAFE])
            for side in self.sides:
                result = side.pulse.submit(
                    queue=queue,
                    concurrency_key=key,
                    gate_id=None if gate is None else side.gates[gate],
                    safety=safety,
                    handler=f"shop.{queue}",
                )
                side.task_ids.append(result.task_id)

    def claim(self) -> None:
        """Claim everything claimable: a few tasks for the second session, the rest for the
        first."""
        few = self.rng.randint(0, 3)
        for side in self.sides:
            grants = []
            if few:
                grants += side.pulse.claim(
                    limit=few, queues=list(QUEUES), session_id=side.second_session
                )
            grants += side.pulse.claim(limit=100, queues=list(QUEUES))
            for grant in grants:
                side.grants[side.index(grant.task_id)] = grant
                side.history[(side.index(grant.task_id), grant.generation)] = grant

    def disturb(self) -> None:
        """Cancel requests, a gate closing, the second session revoked, time moving."""
        live = sorted(self.sides[0].grants)
        for index in live:
            state = self.sides[0].pulse.state(self.sides[0].task_ids[index])
            if state in ("LEASED", "RUNNING") and self.rng.random() < 0.08:
                for side in self.sides:
                    side.pulse.cancel(side.task_ids[index])
        if self.rng.random() < 0.3:
            gate = self.rng.randint(0, 1)
            for side in self.sides:
                side.pulse.set_gate(side.gates[gate], allowed=False)
        if self.rng.random() < 0.15:
            for side in self.sides:
                side.pulse.revoke(side.second_session)
                side.second_session = side.pulse.session("worker-2").id
                side.pulse.session("worker-1")

    def fence(self) -> None:
        """A restore fence (database-wide: both sides at once; it ends every session and cuts
        every lease), dispatch reopened, and the workers registered again."""
        restore_fence(self.engine, reason="restored", actor="ops")
        self.sides[0].pulse.tx(lambda c: reopen_dispatch(c, reason="reconciled", actor="ops"))
        for side in self.sides:
            side.second_session = side.pulse.session("worker-2").id
            side.pulse.session("worker-1")

    def start_batch(self) -> None:
        picks = self._picks(0.85)
        self._batch("start", picks, self._start_items)

    def complete_batch(self) -> None:
        picks = self._picks(0.8)
        outcomes = {
            label: self.rng.choices(OUTCOMES, weights=[w for *_, w in OUTCOMES])[0]
            for label in picks
        }
        self._batch("complete", picks, functools.partial(self._complete_items, outcomes))

    def settle(self, seconds: float) -> None:
        """Time moves; the reaper and the promoter run; closed gates open again."""
        for side in self.sides:
            side.pulse.advance(seconds)
            side.pulse.reap()
            side.pulse.promote()
            for gate in side.gates:
                side.pulse.set_gate(gate, allowed=True)

    # --- batches ----------------------------------------------------------------------------
    def _picks(self, share: float) -> list[tuple[str, Any, int]]:
        """Items as (kind, history position or task index, token variant): current grants,
        stale ones, a wrong token, one unknown attempt."""
        picks = [
            ("current", i, 0) for i in sorted(self.sides[0].grants) if self.rng.random() < share
        ]
        history = sorted(self.sides[0].history)
        for key in self.rng.sample(history, min(len(history), 3)):
            picks.append(("history", key, 0))
        if picks and self.rng.random() < 0.4:
            kind, ref, _ = picks.pop(self.rng.randrange(len(picks)))
            picks.append((kind, ref, 1))  # a wrong token
        picks.append(("unknown", 0, 0))
        unique: dict[str, tuple[str, Any, int]] = {}
        for pick in picks:
            unique.setdefault(self._label(self.sides[0], pick), pick)
        return list(unique.values())

    def _label(self, side: Side, pick: tuple[str, Any, int]) -> str:
        grant = self._grant(side, pick)
        if grant is None:
            return "unknown"
        return f"task{side.index(grant.task_id)}-gen{grant.generation}-epoch{grant.epoch > 0}"

    def _grant(self, side: Side, pick: tuple[str, Any, int]) -> LeaseGrant | None:
        kind, ref, _ = pick
        if kind == "current":
            return side.grants[ref]
        if kind == "history":
            return side.history[ref]
        return None

    def _ident(self, side: Side, pick: tuple[str, Any, int]) -> tuple[str, str]:
        grant = self._grant(side, pick)
        if grant is None:
            return NOT_FOUND_ID, "no-token"
        return grant.attempt_id, grant.token + ("-wrong" if pick[2] else "")

    def _start_items(
        self, side: Side, picks: list[tuple[str, Any, int]]
    ) -> list[batch_items.StartItem]:
        return [
            batch_items.StartItem(*self._ident(side, pick), handler_safety=Safety.SAFE)
            for pick in picks
        ]

    def _complete_items(
        self,
        outcomes: dict[tuple[str, Any, int], tuple[Outcome, bool, int]],
        side: Side,
        picks: list[tuple[str, Any, int]],
    ) -> list[batch_items.CompletionItem]:
        items = []
        for n, pick in enumerate(picks):
            outcome, retryable, _ = outcomes[pick]
            result = {"n": n} if outcome is Outcome.SUCCEEDED else None
            error = {"e": n} if outcome is Outcome.FAILED and n % 2 else None
            attempt_id, token = self._ident(side, pick)
            items.append(
                batch_items.CompletionItem(attempt_id, token, outcome, result, error, retryable)
            )
        return items

    def _batch(self, kind: str, picks: list[tuple[str, Any, int]], build: Any) -> None:
        apply = batches.start_attempts if kind == "start" else batches.complete_attempts
        answers = []
        for side in self.sides:
            labels = {self._ident(side, p)[0]: self._label(side, p) for p in picks}
            work = functools.partial(
                apply,
                namespace=side.pulse.namespace,
                items=build(side, picks),
                set_based=side.set_based,
            )
            results = side.pulse.tx(work)
            answers.append(sorted((labels[a], _answer(r)) for a, r in results.items()))
        self.answers.append((kind, answers[0], answers[1]))

    # --- comparing --------------------------------------------------------------------------
    def snapshot(self, side: Side) -> dict[str, Any]:
        """Every row that matters, with ids replaced by task index and attempt generation and
        times left out (only whether they are set)."""
        ns = side.pulse.namespace
        with self.engine.connect() as conn:
            task_rows = conn.execute(sa.select(tasks).where(tasks.c.namespace == ns)).all()
            attempts = conn.execute(
                sa.select(task_attempts).where(task_attempts.c.namespace == ns)
            ).all()
            events = conn.execute(sa.select(task_events).where(task_events.c.namespace == ns))
            results = conn.execute(sa.select(result_events).where(result_events.c.namespace == ns))
            deliveries = conn.execute(
                sa.select(event_deliveries.c.event_id, subscriptions.c.name)
                .join(subscriptions, subscriptions.c.id == event_deliveries.c.subscription_id)
                .where(event_deliveries.c.namespace == ns)
            ).all()
            quota_rows = conn.execute(sa.select(quotas).where(quotas.c.namespace == ns)).all()
            keys = conn.execute(
                sa.select(concurrency_keys).where(concurrency_keys.c.namespace == ns)
            ).all()
            permits = conn.execute(
                sa.select(concurrency_permits).where(concurrency_permits.c.namespace == ns)
            ).all()
            event_rows, result_rows = list(events), list(results)
        generation = {a.id: a.generation for a in attempts}
        task_index = side.index
        delivered: dict[str, list[str]] = {}
        for row in deliveries:
            delivered.setdefault(row.event_id, []).append(row.name)
        return {
            "tasks": sorted(
                (
                    task_index(t.id),
                    t.state,
                    t.state_version,
                    t.wait_path,
                    t.result,
                    t.error,
                    t.safety,
                    t.attempts_used,
                    bool(t.cancel_requested),
                    generation.get(t.current_attempt_id),
                    t.finished_at is None,
                    t.quota_counted,
                )
                for t in task_rows
            ),
            "attempts": sorted(
                (
                    task_index(a.task_id),
                    a.generation,
                    a.state,
                    a.outcome,
                    a.outcome_reason,
                    a.result,
                    a.error,
                    a.late_outcome,
                    a.late_result,
                    a.late_error,
                    a.started_at is None,
                    a.finished_at is None,
                    a.lease_expires_at is None,
                )
                for a in attempts
            ),
            "events": sorted(
                (
                    task_index(e.task_id),
                    e.state_version,
                    e.from_state or "",
                    e.to_state,
                    e.reason,
                    generation.get(e.attempt_id, 0),
                    e.actor is None,  # a claim names its session
                )
                for e in event_rows
            ),
            "result_events": sorted(
                (
                    task_index(r.task_id),
                    r.state_version,
                    r.kind,
                    r.task_state,
                    r.queue,
                    r.handler,
                    repr(_payload(r.payload, generation)),
                    repr(sorted(delivered.get(r.id, []))),
                )
                for r in result_rows
            ),
            "quotas": sorted((q.name, q.waiting, q.running) for q in quota_rows),
            "keys": sorted((k.concurrency_key, k.held, k.permit_limit) for k in keys),
            "permits": sorted((task_index(p.task_id), p.concurrency_key) for p in permits),
        }


def _payload(payload: dict[str, Any], generation: dict[str, int]) -> dict[str, Any]:
    return {
        **payload,
        "task_id": None,
        "attempt_id": generation.get(payload.get("attempt_id") or ""),
    }


def _answer(result: Any) -> Any:
    """An answer without what differs between twins by nature (the lease's end in time; the
    lost race's task id)."""
    if isinstance(result, StartResult):
        remaining = result.lease_remaining_seconds
        if result.already_started:  # measured from each side's own now
            remaining = None if remaining is None else remaining > 0
        return ("start", result.started, result.refusal, result.already_started, remaining)
    if isinstance(result, CompletionResult):
        return ("complete", result.status, result.task_state, result.reason, result.queue)
    assert isinstance(result, batches.ItemRefused)
    return ("refused", result.kind, result.detail if result.kind == "invalid" else "")
