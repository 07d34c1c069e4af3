"""Invariant 6 across processes: consumers pulling one subscription at once never receive the
same event in one round (FOR UPDATE SKIP LOCKED + the guarded move), and together they receive
every event exactly once when each acks before its deadline."""

from __future__ import annotations

import functools
import json
import multiprocessing
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from orbit_store.db import create_store_engine, run_transaction
from orbit_store.delivery.pull import ack_events, pull_events

from ..drivers.delivery_driver import DeliveryDriver
from ..drivers.pulse_driver import PulseDriver

pytestmark = [pytest.mark.slow, pytest.mark.mariadb_only]

EVENTS = 300
CONSUMERS = 3


def _consume(url: str, namespace: str, out: str) -> None:
    engine = create_store_engine(url)
    received: list[str] = []
    empty_rounds = 0
    while empty_rounds < 3:
        batch = run_transaction(
            engine,
            functools.partial(
                pull_events,
                namespace=namespace,
                name="results",
                limit=20,
                ack_deadline_seconds=600,
            ),
        )
        ids = [event.id for event in batch.events]
        empty_rounds = 0 if ids else empty_rounds + 1
        received += ids
        if ids:
            run_transaction(engine, lambda c, ids=ids: ack_events(c, namespace, "results", ids))
    Path(out).write_text(json.dumps(received))
    engine.dispose()


def test_concurrent_pullers_share_the_events_without_duplicates(
    mariadb_url: str, mariadb_engine: sa.Engine, tmp_path: Path
) -> None:
    pulse = PulseDriver(mariadb_engine, f"race-{uuid.uuid4().hex[:8]}")
    delivery = DeliveryDriver(pulse)
    delivery.subscribe()
    for n in range(EVENTS):
        pulse.cancel(pulse.submit(params={"n": n}).task_id)

    ctx = multiprocessing.get_context("spawn")
    outs = [tmp_path / f"consumer-{i}.json" for i in range(CONSUMERS)]
    processes = [
        ctx.Process(target=_consume, args=(mariadb_url, pulse.namespace, str(out))) for out in outs
    ]
    for p in processes:
        p.start()
    for p in processes:
        p.join(120)
        assert p.exitcode == 0

    received = Counter(i for out in outs for i in json.loads(out.read_text()))
    assert len(received) == EVENTS
    assert max(received.values()) == 1, "an event was handed out twice within its deadline"
    assert {r.state for r in delivery.deliveries()} == {"DELIVERED"}


def _hold_a_lease(url: str, namespace: str, holding: Any, release: Any) -> None:
    """Lease ``namespace``'s subscription in a transaction that stays open until ``release``."""
    engine = create_store_engine(url, pool_size=1, max_overflow=0)
    with engine.connect() as conn, conn.begin():
        pull_events(conn, namespace, "results", limit=20, ack_deadline_seconds=600)
        holding.set()
        release.wait(60)
    engine.dispose()


def test_a_neighbouring_subscription_s_open_lease_hides_no_due_event_inv6(
    mariadb_url: str, mariadb_engine: sa.Engine
) -> None:
    """A lease scans its subscription's range of the due index; InnoDB also locks the first
    entry past that range — the next subscription's. That entry is not the neighbour's to
    skip: a pull must hand out every due event of its own subscription (invariant 6) while
    another subscription's lease transaction is open in another process."""
    pair = [DeliveryDriver(PulseDriver(mariadb_engine, f"n-{uuid.uuid4().hex[:8]}")) for _ in "ab"]
    ids = {driver.subscribe().id: driver for driver in pair}
    neighbour, ours = (ids[i] for i in sorted(ids))  # its index range comes just before ours
    ours.pulse.cancel(ours.pulse.submit().task_id)

    ctx = multiprocessing.get_context("spawn")
    holding, release = ctx.Event(), ctx.Event()
    rival = ctx.Process(
        target=_hold_a_lease, args=(mariadb_url, neighbour.namespace, holding, release)
    )
    rival.start()
    try:
        assert holding.wait(60), "the neighbour's lease did not start"
        pulled = ours.pull(deadline=600)
    finally:
        release.set()
        rival.join(60)
    assert rival.exitcode == 0
    assert len(pulled.events) == 1, "a due event was skipped for a lock on someone else's scan"
