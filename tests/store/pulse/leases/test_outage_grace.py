"""Leases and an outage of every server replica (seed invariants 3 and 7).

A lease that ran out while no replica served is given ``lease_seconds`` from the moment service
resumed; one that ran out while a replica served lapses as before (its worker had the chance,
so a dead worker is never kept alive by the rule)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator

import pytest
import sqlalchemy as sa

from orbit.engines.reaper import reaper_pass
from orbit.metrics.server import Metrics
from orbit_store import replicas
from orbit_store.clock import db_now
from orbit_store.db import create_store_engine, run_transaction
from orbit_store.pulse.model import Safety
from orbit_store.pulse.state.outages import grace_expiry
from orbit_store.replicas import ServingWindow
from orbit_store.schema import server_replicas, task_attempts

from ...drivers.pulse_driver import PulseDriver

T0 = dt.datetime(2026, 12, 1, 3, 0, 0)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


# Served until T0+10, nothing served until T0+30, serving since.
OUTAGE = ServingWindow(resumed_at=at(30), gap_began_at=at(10))


def test_a_lease_that_ran_out_during_the_outage_gets_lease_seconds_from_resumption() -> None:
    assert grace_expiry(OUTAGE, at(15), renew_seconds=5) == at(35)


def test_a_lease_running_out_just_after_resumption_gets_the_same_grace() -> None:
    assert grace_expiry(OUTAGE, at(32), renew_seconds=5) == at(35)


def test_a_lease_that_ran_out_while_a_replica_served_lapses() -> None:
    """The worker died (or stalled) while it could have renewed: no grace."""
    assert grace_expiry(OUTAGE, at(9), renew_seconds=5) is None


def test_a_lease_granted_after_resumption_is_not_touched() -> None:
    assert grace_expiry(OUTAGE, at(36), renew_seconds=5) is None


def test_without_a_serving_replica_nothing_is_an_outage() -> None:
    assert grace_expiry(None, at(15), renew_seconds=5) is None


@pytest.fixture
def replica_engine(migrated_database: Callable[[], str]) -> Iterator[sa.Engine]:
    """A database of its own: replica rows are global and would excuse other tests' leases."""
    engine = create_store_engine(migrated_database())
    yield engine
    engine.dispose()


def add_replica(engine: sa.Engine, rid: str, started: float, seen: float, now: dt.datetime) -> None:
    run_transaction(
        engine,
        lambda conn: conn.execute(
            server_replicas.insert().values(
                id=rid,
                host="h",
                pid=1,
                started_at=now + dt.timedelta(seconds=started),
                last_seen_at=now + dt.timedelta(seconds=seen),
            )
        ),
    )


def kept_beating(pulse: PulseDriver, rid: str) -> None:
    """The replica beat meanwhile (every half second): on a loaded machine a test's steps can
    take longer than the silence that would end its stretch, and then no outage is excused."""
    pulse.tx(
        lambda c: c.execute(
            server_replicas.update()
            .where(server_replicas.c.id == rid)
            .values(last_seen_at=db_now(c))
        )
    )


def test_the_serving_window_spans_overlapping_replicas_and_ends_at_a_silence(
    replica_engine: sa.Engine,
) -> None:
    now = dt.datetime(2026, 12, 1, 4, 0, 0)
    add_replica(replica_engine, "a", -100, -60, now)  # served, then died
    add_replica(replica_engine, "b", -62, -40, now)  # overlapped a; the stretch ends at -40
    add_replica(replica_engine, "c", -20, 0, now)  # after 20 s of silence: service resumed
    add_replica(replica_engine, "d", -10, -1, now)  # overlaps c: same stretch
    window = run_transaction(replica_engine, lambda conn: replicas.serving_window(conn, now))
    assert window == ServingWindow(
        resumed_at=now - dt.timedelta(seconds=20), gap_began_at=now - dt.timedelta(seconds=40)
    )


def test_no_window_when_every_replica_has_been_silent(replica_engine: sa.Engine) -> None:
    now = dt.datetime(2026, 12, 1, 4, 0, 0)
    add_replica(replica_engine, "a", -100, -replicas.SILENCE_SECONDS - 1, now)
    assert run_transaction(replica_engine, lambda conn: replicas.serving_window(conn, now)) is None


def test_a_replica_silent_past_the_limit_starts_a_new_stretch(replica_engine: sa.Engine) -> None:
    """A beat after a stall (or a database outage) does not bridge the gap."""
    run_transaction(
        replica_engine,
        lambda conn: replicas.record_start(conn, replica_id="r", host="h", pid=1),
    )
    assert run_transaction(replica_engine, lambda conn: replicas.beat(conn, replica_id="r"))
    run_transaction(
        replica_engine,
        lambda conn: conn.execute(
            server_replicas.update().values(
                last_seen_at=sa.func.utc_timestamp(6) - sa.text("INTERVAL 10 SECOND")
            )
        ),
    )
    assert not run_transaction(replica_engine, lambda conn: replicas.beat(conn, replica_id="r"))


def test_a_lease_whose_session_was_ended_lapses_even_just_after_service_resumed_inv7(
    isolated_pulse: PulseDriver,
) -> None:
    """The grace is for leases nobody could renew during an outage, not for those an ended
    session gave up on purpose (pod deleted, name re-registered): a replica that has just
    started must still lapse them at once, as `DELETE /v1/worker-sessions/{id}` promises."""
    now = isolated_pulse.now()
    add_replica(isolated_pulse.engine, "just-started", 0, 0, now)
    session = isolated_pulse.session()
    task = isolated_pulse.submit(safety=Safety.UNSAFE)
    grant = isolated_pulse.claim_one()
    assert isolated_pulse.start(grant).started

    isolated_pulse.revoke(session.id)
    kept_beating(isolated_pulse, "just-started")
    isolated_pulse.reap()

    assert isolated_pulse.state(task.task_id) == "NEEDS_REVIEW"


def test_the_reaper_counts_the_leases_it_graced_instead_of_lapsing(
    isolated_pulse: PulseDriver,
) -> None:
    """Operators see graces in Prometheus (``orbit_lease_outage_graces_total``), not only in
    logs: a spike after a restart says leases were kept alive for their workers to come back."""
    now = isolated_pulse.now()
    add_replica(isolated_pulse.engine, "just-started", 0, 0, now)
    isolated_pulse.session()
    task = isolated_pulse.submit(safety=Safety.UNSAFE)
    grant = isolated_pulse.claim_one()
    assert isolated_pulse.start(grant).started
    isolated_pulse.tx(  # ran out a moment ago, before anyone could renew after the resumption
        lambda c: c.execute(
            task_attempts.update()
            .where(task_attempts.c.id == grant.attempt_id)
            .values(lease_expires_at=now - dt.timedelta(seconds=1))
        )
    )
    metrics = Metrics(isolated_pulse.engine)
    kept_beating(isolated_pulse, "just-started")

    report = reaper_pass(isolated_pulse.engine, metrics, namespace=isolated_pulse.namespace)

    assert (report.leases_graced, report.leases_lapsed) == (1, 0)
    assert isolated_pulse.state(task.task_id) == "RUNNING"
    assert metrics.registry.get_sample_value("orbit_lease_outage_graces_total") == 1


def test_a_replica_start_forgets_replicas_gone_longer_than_the_keep_days(
    replica_engine: sa.Engine,
) -> None:
    now = run_transaction(replica_engine, db_now)
    day = 24 * 3600
    add_replica(replica_engine, "long-gone", -30 * day, -(replicas.KEEP_DAYS + 1) * day, now)
    add_replica(replica_engine, "recent", -2 * day, -(replicas.KEEP_DAYS - 1) * day, now)
    run_transaction(
        replica_engine, lambda c: replicas.record_start(c, replica_id="new", host="h", pid=2)
    )
    with replica_engine.connect() as conn:
        ids = set(conn.execute(sa.select(server_replicas.c.id)).scalars())
    assert ids == {"recent", "new"}
