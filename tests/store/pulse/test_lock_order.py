"""One lock order, kept by every transaction (orbit_store/pulse/__init__.py).

Several processes run, at once and for a while, everything that takes locks in more than one
place: multi-queue claims (half of them leases with start, and hand-backs of never-delivered
grants) under namespace and queue quotas, completions that retry or release (and so hand permits
to blocked tasks), batched starts and completions through the set path (overlapping: two
processes send the same attempts at once), worker cycles that report and claim in one
transaction (worker protocol 4), manual retries, submissions with concurrency keys and
gates, quota changes (including declaring a quota, which adopts its scope), gate flips, cancels,
the reaper and the promoter. If any two transactions took their locks in opposite orders they
would deadlock; ``run_transaction`` counts every retry by reason, and the count must be zero.
"""

from __future__ import annotations

import functools
import json
import multiprocessing
import random
import tempfile
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.db import TRANSACTION_RETRIES, create_store_engine, run_transaction
from orbit_store.errors import Conflict, InvalidRequest, QuotaExceeded
from orbit_store.pulse import batches, cycle, service
from orbit_store.pulse.claim.claim import claim_tasks
from orbit_store.pulse.leases.complete import complete_attempt
from orbit_store.pulse.leases.start import start_attempt
from orbit_store.pulse.leases.unreceived import hand_back_unreceived
from orbit_store.pulse.limits.gates import create_gate, set_gate
from orbit_store.pulse.limits.queues import put_queue
from orbit_store.pulse.limits.quota_declarations import QuotaSpec, delete_quota, put_quota
from orbit_store.pulse.manual.cancel import cancel_task
from orbit_store.pulse.manual.review import retry_task
from orbit_store.pulse.model import Outcome, QueuePolicy, RetryPolicy
from orbit_store.pulse.submit.accept import SubmitRequest
from orbit_store.pulse.workers.sessions import register_session, revoke_session
from orbit_store.recovery.verify import verify
from orbit_store.schema import task_attempts, tasks

pytestmark = [pytest.mark.slow, pytest.mark.mariadb_only]

DURATION = 20.0
#: Grants the run must reach (all processes together) before it ends: on a slow or loaded
#: machine the processes go on past DURATION, up to MAX_DURATION, instead of the test failing
#: for want of speed.
MIN_GRANTS = 101
MAX_DURATION = 4 * DURATION
QUEUES = ("qa", "qb", "qc")
EXPECTED = (Conflict, QuotaExceeded, InvalidRequest)  # refusals are answers, not failures


def tx(engine: sa.Engine, stats: Counter[str], work: Callable[..., Any], own: bool = False) -> Any:
    """One transaction (``own``: ``work`` runs its own, as ``batches.run_batch`` does); a typed
    refusal is counted and answered with None."""
    try:
        return work() if own else run_transaction(engine, work)
    except EXPECTED as exc:
        stats[f"refused_{type(exc).__name__}"] += 1
        return None


def _registration(ns: str, prefix: str) -> Callable[[sa.Connection], Any]:
    """A worker session on every queue, named ``prefix-…`` (called again after a revoke)."""
    return functools.partial(
        register_session,
        namespace=ns,
        worker_name=f"{prefix}-{uuid.uuid4().hex[:6]}",
        queues=list(QUEUES),
        ttl_seconds=600,
    )


def _claimer(engine: sa.Engine, ns: str, rng: random.Random, stats: Counter[str]) -> None:
    """Claims from every queue; runs, fails (retries), releases or abandons what it gets, and
    now and then has its session revoked (as when its pod is deleted) and registers again."""
    register = _registration(ns, "w")
    session = run_transaction(engine, register)
    while True:
        if rng.random() < 0.03:
            tx(
                engine,
                stats,
                functools.partial(
                    revoke_session, namespace=ns, session_id=session.id, reason="pod deleted"
                ),
            )
            session = run_transaction(engine, register)
            stats["revoked"] += 1
        grants = run_transaction(
            engine,
            functools.partial(
                claim_tasks,
                namespace=ns,
                queues_=None,
                limit=rng.randint(1, 10),
                worker_session_id=session.id,
                start_handlers=("h",) if rng.random() < 0.5 else (),  # lease with start
            ),
        )
        stats["granted"] += len(grants)
        for grant in grants:
            ident = {"namespace": ns, "attempt_id": grant.attempt_id, "token": grant.token}
            roll = rng.random()
            if roll < 0.02 or not stats["abandoned"]:  # at least one: the reaper must lapse it
                stats["abandoned"] += 1
                continue  # its lease lapses: the reaper decides
            if roll < 0.05 and grant.started:  # as if never delivered: the lease route's rule
                tx(engine, stats, functools.partial(hand_back_unreceived, **ident))
                continue
            if roll < 0.05:
                outcome, extra = Outcome.RELEASED, {}
            else:
                started = tx(engine, stats, functools.partial(start_attempt, **ident))
                if started is None or not started.started:
                    continue
                outcome, extra = (
                    (Outcome.SUCCEEDED, {})
                    if roll < 0.6
                    else (Outcome.FAILED, {"retryable": roll < 0.85})
                )
            tx(
                engine,
                stats,
                functools.partial(complete_attempt, outcome=outcome, **ident, **extra),
            )
        yield


def _batcher(engine: sa.Engine, ns: str, rng: random.Random, stats: Counter[str]) -> None:
    """Worker protocol 2: claims, then starts and completes whole batches (the set path). Each
    batch also carries attempts the other batcher holds (so two processes start and complete
    the same attempts at once) and older ones (stale, superseded, already finished)."""
    shared = Path(tempfile.gettempdir()) / f"orbit-{ns}-grants.jsonl"
    register = _registration(ns, "b")
    session = run_transaction(engine, register)
    while True:
        grants = run_transaction(
            engine,
            functools.partial(
                claim_tasks,
                namespace=ns,
                queues_=None,
                limit=rng.randint(1, 10),
                worker_session_id=session.id,
            ),
        )
        stats["granted"] += len(grants)
        mine = [[g.attempt_id, g.token] for g in grants]
        with shared.open("a") as out:  # one short append: atomic between processes
            out.write("".join(json.dumps(m) + "\n" for m in mine))
        seen = [json.loads(line) for line in shared.read_text().splitlines()[-40:] if line]
        items = dict(mine + rng.sample(seen, min(len(seen), 6)))
        starts = [batches.StartItem(a, t) for a, t in items.items()]
        tx(
            engine,
            stats,
            functools.partial(
                batches.run_batch, engine, batches.start_attempts, namespace=ns, items=starts
            ),
            own=True,
        )
        reports = []
        for attempt_id, token in items.items():
            roll = rng.random()
            if roll < 0.05:
                continue  # abandoned: its lease lapses
            outcome = Outcome.SUCCEEDED if roll < 0.6 else Outcome.FAILED
            reports.append(
                batches.CompletionItem(attempt_id, token, outcome, {"r": 1}, None, roll < 0.85)
            )
        done = tx(
            engine,
            stats,
            functools.partial(
                batches.run_batch, engine, batches.complete_attempts, namespace=ns, items=reports
            ),
            own=True,
        )
        stats["batch_applied"] += sum(
            1 for r in (done or {}).values() if getattr(r, "status", None) == "applied"
        )
        yield


def _cycler(engine: sa.Engine, ns: str, rng: random.Random, stats: Counter[str]) -> None:
    """Worker protocol 4: each cycle reports the last cycle's grants (leased with start) and
    claims in one transaction (``cycle.report_then_claim``); now and then its session is
    revoked between cycles, so the cycle's claim is refused and it runs as two transactions."""
    register = _registration(ns, "c")
    session = run_transaction(engine, register)
    reports: list[batches.CompletionItem] = []
    while True:
        if rng.random() < 0.03:
            revoke = functools.partial(
                revoke_session, namespace=ns, session_id=session.id, reason="pod deleted"
            )
            tx(engine, stats, revoke)
            stats["revoked"] += 1
        work = functools.partial(
            cycle.report_then_claim,
            engine,
            namespace=ns,
            session_id=session.id,
            items=reports,
            limit=rng.randint(1, 10),
            start_handlers=("h",),
        )
        answered = tx(engine, stats, work, own=True)
        if answered is None:  # refused: the session ended; its reports were applied apart
            session = run_transaction(engine, register)
            reports = []
            continue
        answers, grants = answered
        stats["cycle_applied"] += sum(
            1 for r in answers.values() if getattr(r, "status", None) == "applied"
        )
        stats["granted"] += len(grants)
        reports = []
        for grant in grants:
            roll = rng.random()
            if roll < 0.6 and grant.started:
                outcome = Outcome.SUCCEEDED if roll < 0.4 else Outcome.FAILED
                reports.append(
                    batches.CompletionItem(grant.attempt_id, grant.token, outcome, {"r": 1})
                )
        yield


def _submitter(engine: sa.Engine, ns: str, rng: random.Random, stats: Counter[str]) -> None:
    gates = [
        run_transaction(
            engine,
            lambda c, n=n: create_gate(
                c, namespace=ns, owner_kind="test", owner_id=f"g{n}", now=db_now(c)
            ),
        )
        for n in range(2)
    ]
    while True:
        key = rng.choice([None, "k0", "k1", "k2"])
        request = SubmitRequest(
            namespace=ns,
            queue=rng.choice(QUEUES),
            handler="h",
            priority=rng.randint(0, 3),
            concurrency_key=key,
            concurrency_limit=rng.choice([None, 1, 2]) if key else None,
            gate_id=rng.choice([None, None, *gates]),
            delay_seconds=rng.choice([0, 0, 0, 0.2]),
            backoff_initial_ms=50,
        )
        try:
            service.submit(engine, request)
            stats["submitted"] += 1
        except EXPECTED as exc:
            stats[f"refused_{type(exc).__name__}"] += 1
        yield


def _manual_retrier(engine: sa.Engine, ns: str, rng: random.Random, stats: Counter[str]) -> None:
    while True:
        with engine.connect() as conn:
            done = conn.execute(
                sa.select(tasks.c.id, tasks.c.state_version)
                .where(tasks.c.namespace == ns, tasks.c.state.in_(["FAILED", "CANCELLED"]))
                .order_by(sa.func.rand())
                .limit(3)
            ).all()
        for task_id, version in done:
            tx(
                engine,
                stats,
                functools.partial(
                    retry_task,
                    namespace=ns,
                    task_id=task_id,
                    actor="tester",
                    reason="lock order test",
                    expected_state_version=version,
                    safe_to_retry=True,
                ),
            )
            stats["retried"] += 1
        yield


def _controller(engine: sa.Engine, ns: str, rng: random.Random, stats: Counter[str]) -> None:
    """Quota changes and re-declarations, gate flips, cancels."""
    while True:
        choice = rng.random()
        if choice < 0.3:
            spec = QuotaSpec("all", max_running=rng.randint(3, 12), max_waiting=10_000)
            tx(engine, stats, functools.partial(put_quota, namespace=ns, spec=spec))
        elif choice < 0.45:
            tx(engine, stats, lambda c: delete_quota(c, ns, "qb-only"))
            spec = QuotaSpec("qb-only", queue="qb", max_running=rng.randint(1, 4))
            tx(engine, stats, functools.partial(put_quota, namespace=ns, spec=spec))
            stats["quota_declared"] += 1
        elif choice < 0.75:
            gate = run_transaction(
                engine,
                lambda c: create_gate(
                    c,
                    namespace=ns,
                    owner_kind="test",
                    owner_id=f"g{rng.randint(0, 1)}",
                    now=db_now(c),
                ),
            )
            tx(
                engine,
                stats,
                functools.partial(set_gate, namespace=ns, gate_id=gate, allowed=rng.random() < 0.6),
            )
            stats["gate_flips"] += 1
        else:
            with engine.connect() as conn:
                waiting = (
                    conn.execute(
                        sa.select(tasks.c.id)
                        .where(tasks.c.namespace == ns, tasks.c.state.in_(["WAITING", "LEASED"]))
                        .order_by(sa.func.rand())
                        .limit(2)
                    )
                    .scalars()
                    .all()
                )
            for task_id in waiting:
                tx(
                    engine,
                    stats,
                    functools.partial(cancel_task, namespace=ns, task_id=task_id, actor="tester"),
                )
                stats["cancelled"] += 1
        time.sleep(0.02)
        yield


def _engines(engine: sa.Engine, ns: str, rng: random.Random, stats: Counter[str]) -> None:
    while True:
        reaped = service.reap(engine, namespace=ns)
        promoted = service.promote(engine, namespace=ns)
        stats["lapsed"] += reaped.leases_lapsed
        stats["promoted"] += promoted.promoted
        stats["item_errors"] += reaped.errors + promoted.errors
        time.sleep(0.05)
        yield


ROLES: dict[str, Callable[..., Any]] = {
    "claimer": _claimer,
    "batcher": _batcher,
    "cycler": _cycler,
    "submitter": _submitter,
    "retrier": _manual_retrier,
    "controller": _controller,
    "engines": _engines,
}


def _until_enough(engine: sa.Engine, ns: str, stop_at: float) -> Iterator[None]:
    """Yields while the run goes on: until ``stop_at`` has passed, the processes together
    granted MIN_GRANTS and the reaper lapsed a lease (counted once a second; abandoned grants
    are few, and a lease lapses only ``lease_seconds`` after its grant), or until MAX_DURATION
    has passed."""
    hard_stop, counted_at = stop_at - DURATION + MAX_DURATION, 0.0
    while (now := time.monotonic()) < hard_stop:
        if now >= stop_at and now - counted_at >= 1.0:
            counted_at = now
            with engine.connect() as conn:
                granted, lapsed = conn.execute(
                    sa.select(
                        sa.func.count(),
                        sa.func.sum(sa.case((task_attempts.c.outcome == "LAPSED", 1), else_=0)),
                    ).where(task_attempts.c.namespace == ns)
                ).one()
            if granted >= MIN_GRANTS and lapsed:
                return
        yield


def _run(url: str, ns: str, role: str, index: int, out: str, stop_at: float) -> None:
    engine = create_store_engine(url)
    stats: Counter[str] = Counter()
    rng = random.Random(index)
    try:
        steps = ROLES[role](engine, ns, rng, stats)
        for _ in _until_enough(engine, ns, stop_at):
            next(steps)
        Path(out).write_text(
            json.dumps({"retries": TRANSACTION_RETRIES.snapshot(), "stats": stats})
        )
    except BaseException:
        Path(out).write_text(json.dumps({"error": traceback.format_exc()}))
        raise
    finally:
        engine.dispose()


def test_concurrent_claims_retries_and_quota_changes_never_deadlock(
    mariadb_url: str, tmp_path: Path
) -> None:
    ns = f"locks-{uuid.uuid4().hex[:8]}"
    engine = create_store_engine(mariadb_url)
    policy = QueuePolicy(name="", lease_seconds=2, retry=RetryPolicy(5, 50, 200, 2.0))
    for name in QUEUES:
        run_transaction(
            engine,
            lambda c, n=name: put_queue(c, ns, QueuePolicy(**{**policy.__dict__, "name": n})),
        )
    run_transaction(engine, lambda c: put_quota(c, ns, QuotaSpec("all", max_running=8)))
    roles = ["claimer", "claimer", "batcher", "batcher", "cycler", "submitter", "retrier"]
    roles.append("controller")
    roles.append("engines")
    ctx = multiprocessing.get_context("spawn")
    stop_at = time.monotonic() + DURATION
    outs = [tmp_path / f"{n}-{role}.json" for n, role in enumerate(roles)]
    procs = [
        ctx.Process(target=_run, args=(mariadb_url, ns, role, n, str(out), stop_at))
        for n, (role, out) in enumerate(zip(roles, outs, strict=True))
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(MAX_DURATION + 120)
    (Path(tempfile.gettempdir()) / f"orbit-{ns}-grants.jsonl").unlink(missing_ok=True)
    results = [json.loads(out.read_text()) for out in outs]
    errors = [r["error"] for r in results if "error" in r]
    assert not errors, errors[0]
    retries: Counter[str] = Counter()
    stats: Counter[str] = Counter()
    for result in results:
        retries.update(result["retries"])
        stats.update(result["stats"])
    print(f"retries {dict(retries)}; stats {dict(stats)}")
    assert stats["granted"] >= MIN_GRANTS and stats["retried"] and stats["quota_declared"], stats
    assert stats["gate_flips"] and stats["cancelled"] and stats["revoked"], stats
    assert stats["lapsed"] and not stats["item_errors"], stats
    assert stats["batch_applied"] > 5 and stats["cycle_applied"] > 5, stats
    assert retries["deadlock"] == 0 and retries["lock_wait_timeout"] == 0, retries
    with engine.connect() as conn:
        report = verify(conn, ns)
    assert report.clean, report.as_dict()
    engine.dispose()
