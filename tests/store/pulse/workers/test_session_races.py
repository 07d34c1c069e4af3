"""Ending a worker session against work already in flight.

Each test pauses one transaction of this process just before its write (an event hook on its
own engine) while another process runs the competing transaction, then lets it go. Before the
fix the competitor committed in between and the paused write then undid it (a start or a
renewal extended a lease the revoke had just cut; a registration created a live session for a
pod that was just deleted). Now the first holds a shared lock the second needs, so the second
applies after it.
"""

from __future__ import annotations

import functools
import multiprocessing
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from orbit_store.db import create_store_engine, run_transaction
from orbit_store.errors import Conflict
from orbit_store.pulse import service
from orbit_store.pulse.leases.heartbeat import renew_leases
from orbit_store.pulse.leases.start import start_attempt
from orbit_store.pulse.model import RenewRequest
from orbit_store.pulse.workers.pods import PodInfo, forget_pod, register_pod
from orbit_store.pulse.workers.sessions import register_session, revoke_session
from orbit_store.schema import task_attempts, worker_pods, worker_sessions

from ...drivers.pulse_driver import PulseDriver

pytestmark = pytest.mark.mariadb_only
SPAWN = multiprocessing.get_context("spawn")


def _url(engine: sa.Engine) -> str:
    return engine.url.render_as_string(hide_password=False)


def _rival(url: str, started: Any, work: Callable[[sa.Connection], object]) -> None:
    """Run ``work`` on one pooled connection, first telling the test which connection it is."""
    engine = create_store_engine(url, pool_size=1, max_overflow=0)
    started.put(
        run_transaction(engine, lambda c: c.exec_driver_sql("SELECT CONNECTION_ID()").scalar())
    )
    run_transaction(engine, work)
    engine.dispose()


def _revoke(url: str, started: Any, namespace: str, session_id: str) -> None:
    _rival(
        url,
        started,
        functools.partial(
            revoke_session, namespace=namespace, session_id=session_id, reason="pod deleted"
        ),
    )


def _forget(url: str, started: Any, uid: str) -> None:
    _rival(url, started, lambda c: forget_pod(c, uid, "pod deleted"))


@contextmanager
def paused_before(engine: sa.Engine, fragment: str) -> Iterator[threading.Event]:
    """Hold this engine's first statement containing ``fragment`` until the yielded event is
    set; yields once that statement has been reached."""
    reached, release = threading.Event(), threading.Event()

    def hook(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if fragment in statement and not reached.is_set():
            reached.set()
            release.wait(30)

    event.listen(engine, "before_cursor_execute", hook)
    try:
        yield release
    finally:
        release.set()
        event.remove(engine, "before_cursor_execute", hook)
    assert reached.is_set(), f"no statement containing {fragment!r} ran"


def race(
    engine: sa.Engine, fragment: str, paused: Callable[[], object], rival: Any, *args: Any
) -> object:
    """Run ``paused`` here until it reaches ``fragment``; meanwhile run ``rival`` in another
    process until it has committed or waits for a lock; then let ``paused`` finish, and the
    rival after it."""
    result: list[object] = []
    with SPAWN.Manager() as manager, paused_before(engine, fragment) as release:
        worker = threading.Thread(target=lambda: result.append(paused()))
        worker.start()
        started = manager.Queue()
        other = SPAWN.Process(target=rival, args=(_url(engine), started, *args))
        other.start()
        _until_done_or_waiting(engine, other, started.get(timeout=60))
        release.set()
        worker.join(30)
        other.join(30)
        assert other.exitcode == 0
    return result[0]


def _until_done_or_waiting(engine: sa.Engine, process: Any, connection_id: int) -> None:
    deadline = time.monotonic() + 30
    while process.is_alive() and time.monotonic() < deadline:
        with engine.connect() as conn:
            if _waits_for_a_lock(conn, connection_id):
                return
        time.sleep(0.02)
    assert time.monotonic() < deadline, "the rival neither finished nor waited for a lock"


def _waits_for_a_lock(conn: sa.Connection, connection_id: int) -> bool:
    """Whether the connection's transaction waits for a row lock: ``INNODB_TRX`` says so, or —
    where that view leaves a waiting transaction out, as MariaDB 10.11 did for the rival's
    when the test ran on mysqlclient under load — the InnoDB monitor's list of transactions."""
    state = conn.execute(
        sa.text(
            "SELECT trx_state FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = :i"
        ),
        {"i": connection_id},
    ).scalar()
    if state == "LOCK WAIT":
        return True
    status = conn.exec_driver_sql("SHOW ENGINE INNODB STATUS").one()[2]
    return any(
        "LOCK WAIT" in block and f"thread id {connection_id}," in block
        for block in status.split("---TRANSACTION")
    )


def _attempt(engine: sa.Engine, attempt_id: str) -> Any:
    with engine.connect() as conn:
        return conn.execute(sa.select(task_attempts).where(task_attempts.c.id == attempt_id)).one()


def _session(engine: sa.Engine, session_id: str) -> Any:
    with engine.connect() as conn:
        return conn.execute(
            sa.select(worker_sessions).where(worker_sessions.c.id == session_id)
        ).one()


@pytest.fixture
def own_engine(engine: sa.Engine) -> Iterator[sa.Engine]:
    fresh = create_store_engine(_url(engine))
    yield fresh
    fresh.dispose()


def test_revoking_a_session_stops_a_start_in_flight(
    pulse: PulseDriver, own_engine: sa.Engine
) -> None:
    """Defect 6: a start that read the time before a revoke committed must not extend the lease
    the revoke cut: either it is refused, or it runs first and the revoke cuts it after."""
    session = pulse.session()
    pulse.submit()
    grant = pulse.claim_one(session_id=session.id)
    start = functools.partial(
        run_transaction,
        own_engine,
        functools.partial(
            start_attempt, namespace=pulse.namespace, attempt_id=grant.attempt_id, token=grant.token
        ),
    )
    race(
        own_engine,
        "UPDATE task_attempts",
        start,
        _revoke,
        pulse.namespace,
        session.id,
    )
    attempt, ended = _attempt(own_engine, grant.attempt_id), _session(own_engine, session.id)
    assert ended.state == "REVOKED"
    assert attempt.lease_expires_at <= ended.ended_at, "the started lease outlived the revoke"


def test_revoking_a_session_stops_a_renewal_in_flight(
    pulse: PulseDriver, own_engine: sa.Engine
) -> None:
    session = pulse.session()
    pulse.submit()
    grant = pulse.claim_one(session_id=session.id)
    assert pulse.start(grant).started
    renew = functools.partial(
        run_transaction,
        own_engine,
        functools.partial(
            renew_leases,
            namespace=pulse.namespace,
            items=[RenewRequest(grant.attempt_id, grant.token)],
        ),
    )
    race(
        own_engine,
        "UPDATE task_attempts",
        renew,
        _revoke,
        pulse.namespace,
        session.id,
    )
    attempt, ended = _attempt(own_engine, grant.attempt_id), _session(own_engine, session.id)
    assert attempt.lease_expires_at <= ended.ended_at, "the renewal outlived the revoke"


def test_a_registration_racing_its_pods_deletion_ends_revoked(
    pulse: PulseDriver, own_engine: sa.Engine
) -> None:
    """Defect 8: a session registered while its pod is deleted is refused or revoked, never
    left live for a pod that is gone."""
    pod = PodInfo(f"uid-{pulse.namespace}", pulse.namespace, "w-1", "pool", None, "Running")
    pulse.tx(lambda c: register_pod(c, pod))
    register = functools.partial(
        run_transaction,
        own_engine,
        functools.partial(
            register_session,
            namespace=pulse.namespace,
            worker_name="w-1",
            queues=["default"],
            pod_uid=pod.uid,
            require_registered_pod=True,
        ),
    )
    race(own_engine, "INSERT INTO worker_sessions", register, _forget, pod.uid)
    with own_engine.connect() as conn:
        live = conn.execute(
            sa.select(sa.func.count())
            .select_from(worker_sessions)
            .join(worker_pods, worker_pods.c.uid == worker_sessions.c.pod_uid)
            .where(
                worker_sessions.c.pod_uid == pod.uid,
                worker_sessions.c.state.in_(["ACTIVE", "DRAINING"]),
                worker_pods.c.deleted_at.is_not(None),
            )
        ).scalar_one()
    assert live == 0


NAMES = 10


def _register(url: str, namespace: str, barrier: Any) -> list[str]:
    engine = create_store_engine(url)
    run_transaction(engine, lambda c: c.exec_driver_sql("SELECT 1"))  # connected before the race
    ids = []
    try:
        for n in range(NAMES):
            barrier.wait(60)
            work = functools.partial(
                register_session, namespace=namespace, worker_name=f"w{n}", queues=["q"]
            )
            try:
                ids.append(service.register(engine, work).id)
            except Conflict:
                # Bounded retries (service.REGISTER_ATTEMPTS) against five rivals that each win
                # a round: a racer may be told the name is being registered by several
                # processes at once. That answer is the product's; the invariant is below.
                continue
        return ids
    finally:
        engine.dispose()


def test_two_live_sessions_never_share_a_worker_name(pulse: PulseDriver) -> None:
    """Defect 8: six processes register the same worker names at once; one session per name
    stays live (the newest), the others are closed (or their racer was refused: ``Conflict``)."""
    with SPAWN.Manager() as manager:
        barrier = manager.Barrier(6)
        with SPAWN.Pool(6) as pool:
            pool.starmap(_register, [(_url(pulse.engine), pulse.namespace, barrier)] * 6)
    with pulse.engine.connect() as conn:
        live = conn.execute(
            sa.select(worker_sessions.c.worker_name, sa.func.count())
            .where(
                worker_sessions.c.namespace == pulse.namespace,
                worker_sessions.c.state.in_(["ACTIVE", "DRAINING"]),
            )
            .group_by(worker_sessions.c.worker_name)
        ).all()
    assert sorted(live) == [(f"w{n}", 1) for n in range(NAMES)]
