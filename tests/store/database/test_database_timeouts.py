"""Every database read and write is bounded (``create_store_engine(io_timeout=…)``, with both
MySQL drivers): a connection left half-open — a failover, a proxy that stopped forwarding — is
given up after the timeout and the transaction runs again on a new connection (nothing was
committed: a lost connection before COMMIT), instead of waiting for as long as the kernel keeps
the socket. Transactions that do not use the stuck connection are not held up by it at all.
Invariant 1 holds throughout: an accepted submission is there, exactly once, by its key."""

from __future__ import annotations

import functools
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from half_open_proxy import HalfOpenProxy
from sqlalchemy.engine import make_url

from orbit_store.db import create_store_engine, run_transaction
from orbit_store.pulse import service
from orbit_store.pulse.submit.accept import SubmitRequest
from orbit_store.schema import tasks

pytestmark = pytest.mark.mariadb_only

TIMEOUT = 2
#: How long a test waits for what must finish within a few timeouts (a loaded machine is slow;
#: without the timeout it would never finish).
PATIENCE = 90


@pytest.fixture
def proxy(mariadb_url: str) -> Iterator[HalfOpenProxy]:
    proxy = HalfOpenProxy(make_url(mariadb_url).port or 3306)
    yield proxy
    proxy.close()


@pytest.fixture(params=["pymysql", "mysqldb"])
def proxied_engine(
    request: pytest.FixtureRequest, mariadb_url: str, proxy: HalfOpenProxy
) -> Iterator[sa.Engine]:
    """The session's database through the proxy, with each driver and a short timeout."""
    url = make_url(mariadb_url).set(
        drivername=f"mysql+{request.param}", host="127.0.0.1", port=proxy.port
    )
    engine = create_store_engine(url.render_as_string(hide_password=False), io_timeout=TIMEOUT)
    yield engine
    engine.dispose()


def _in_thread(work: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(work())
        except Exception as exc:  # the test looks at what came out
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def _submit(engine: sa.Engine, namespace: str, key: str) -> str:
    request = SubmitRequest(
        namespace=namespace, queue="default", handler="test.noop", idempotency_key=key
    )
    return service.submit(engine, request).task_id


def _keys_stored(engine: sa.Engine, namespace: str) -> int:
    with engine.connect() as conn:
        count = conn.execute(sa.select(sa.func.count()).where(tasks.c.namespace == namespace))
        return int(count.scalar_one())


def test_a_half_open_connection_is_given_up_and_the_transaction_runs_on_a_new_one_inv1(
    proxied_engine: sa.Engine, proxy: HalfOpenProxy, mariadb_engine: sa.Engine
) -> None:
    namespace = f"ns-{uuid.uuid4().hex[:10]}"
    _submit(proxied_engine, namespace, "warm")  # a pooled connection through the proxy
    assert proxy.freeze() >= 1
    thread, out = _in_thread(functools.partial(_submit, proxied_engine, namespace, "after"))
    thread.join(PATIENCE)
    assert not thread.is_alive(), "the transaction waited on the half-open connection"
    assert isinstance(out[0], str), out
    assert _keys_stored(mariadb_engine, namespace) == 2, "each submission once"


def test_a_stuck_connection_does_not_hold_up_transactions_on_other_connections(
    proxied_engine: sa.Engine, proxy: HalfOpenProxy
) -> None:
    """One thread's transaction is on the frozen connection; others, started after, get
    connections of their own and finish whatever the stuck one does."""
    run_transaction(proxied_engine, lambda conn: conn.exec_driver_sql("SELECT 1").scalar())
    held = proxied_engine.connect()  # checked out before the freeze: it will be stuck
    proxy.freeze()
    stuck, stuck_out = _in_thread(lambda: held.exec_driver_sql("SELECT 1").scalar())
    others = [
        _in_thread(
            lambda: run_transaction(
                proxied_engine, lambda c: c.exec_driver_sql("SELECT 2").scalar()
            )
        )
        for _ in range(4)
    ]
    for thread, _ in others:
        thread.join(PATIENCE)
    assert [out for _, out in others] == [[2]] * 4
    stuck.join(PATIENCE)
    assert not stuck.is_alive(), "the stuck read was given up"
    assert isinstance(stuck_out[0], sa.exc.OperationalError), stuck_out
    held.invalidate()
    held.close()


def test_without_a_timeout_the_engine_still_opens(mariadb_url: str) -> None:
    """``io_timeout=None`` (migrations, whose DDL may run for long): no bound, still works."""
    engine = create_store_engine(mariadb_url, io_timeout=None)
    try:
        assert run_transaction(engine, lambda c: c.exec_driver_sql("SELECT 3").scalar()) == 3
    finally:
        engine.dispose()
