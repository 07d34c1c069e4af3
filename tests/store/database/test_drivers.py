"""Which MySQL driver a database URL gets (docs/operations/database.md#connection), and the C
driver (mysqlclient) keeping the store's contract on a real MariaDB: it is what a ``mysql://``
URL gets wherever it is installed — in the container image and in this suite's environment."""

from __future__ import annotations

import functools
import importlib.util
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from orbit_store.db import create_store_engine, run_transaction, with_driver
from orbit_store.pulse import batches, service
from orbit_store.pulse.claim.claim import claim_tasks
from orbit_store.pulse.model import Outcome, TaskState
from orbit_store.pulse.submit.accept import SubmitRequest
from orbit_store.pulse.workers.sessions import register_session


def test_a_url_that_names_no_driver_gets_the_c_driver_when_it_is_installed() -> None:
    assert with_driver("mysql://orbit:pw@db:3306/orbit") == "mysql+mysqldb://orbit:pw@db:3306/orbit"


def test_a_mariadb_url_that_names_no_driver_gets_one_too() -> None:
    assert make_url(with_driver("mariadb://orbit@db/orbit")).drivername == "mariadb+mysqldb"


def test_without_the_c_driver_a_url_that_names_none_gets_pymysql(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec

    def without_mysqldb(name: str, *args: Any) -> Any:
        return None if name == "MySQLdb" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", without_mysqldb)
    assert make_url(with_driver("mysql://orbit@db/orbit")).drivername == "mysql+pymysql"


@pytest.mark.parametrize("url", ["mysql+pymysql://orbit@db/orbit", "mysql+mysqldb://orbit@db/x"])
def test_a_url_that_names_a_driver_keeps_it(url: str) -> None:
    assert with_driver(url) == url


def test_the_password_and_the_options_survive_naming_the_driver() -> None:
    url = make_url(with_driver("mysql://orbit:p%40ss%2Fw@db:3306/orbit?ssl_ca=/etc/ca.pem"))
    assert (url.username, url.password, url.host, url.port) == ("orbit", "p@ss/w", "db", 3306)
    assert (url.database, dict(url.query)) == ("orbit", {"ssl_ca": "/etc/ca.pem"})


@pytest.fixture
def c_driver_engine(mariadb_url: str) -> Iterator[sa.Engine]:
    """The session's migrated database, opened through a URL that names no driver."""
    url = make_url(mariadb_url).set(drivername="mysql").render_as_string(hide_password=False)
    engine = create_store_engine(url)
    yield engine
    engine.dispose()


def test_a_url_naming_no_driver_opens_the_c_driver(c_driver_engine: sa.Engine) -> None:
    assert c_driver_engine.dialect.driver == "mysqldb"
    with c_driver_engine.connect() as conn:
        isolation = conn.get_isolation_level()
        zone = conn.exec_driver_sql("SELECT @@session.time_zone").scalar_one()
    assert (isolation, zone) == ("READ COMMITTED", "+00:00")  # the session settings hold


def test_a_task_lives_its_whole_life_through_the_c_driver_inv4_inv6(
    c_driver_engine: sa.Engine,
) -> None:
    """Submit (and replay, invariant 6), a lease with start and a batched report (invariant 4:
    the outcome commits with its events), all through mysqlclient."""
    ns = f"drv-{uuid.uuid4().hex[:8]}"
    request = SubmitRequest(
        namespace=ns, queue="default", handler="shop.echo", params={"n": 1}, idempotency_key="k1"
    )
    first = service.submit(c_driver_engine, request)
    again = service.submit(c_driver_engine, request)
    assert (again.task_id, again.replayed, first.replayed) == (first.task_id, True, False)
    session = run_transaction(
        c_driver_engine,
        functools.partial(register_session, namespace=ns, worker_name="w", queues=["default"]),
    ).id
    claim = functools.partial(
        claim_tasks,
        namespace=ns,
        queues_=None,
        limit=5,
        worker_session_id=session,
        start_handlers=frozenset({"shop.echo"}),
    )
    (grant,) = run_transaction(c_driver_engine, claim)
    assert grant.started and grant.params == {"n": 1}
    report = batches.CompletionItem(grant.attempt_id, grant.token, Outcome.SUCCEEDED, {"ok": 1})
    answers = batches.run_batch(
        c_driver_engine, batches.complete_attempts, namespace=ns, items=[report]
    )
    assert answers[grant.attempt_id].task_state is TaskState.SUCCEEDED
    with c_driver_engine.connect() as conn:
        result = conn.exec_driver_sql(
            "SELECT state, result FROM tasks WHERE id = %s", (first.task_id,)
        ).one()
        history = conn.exec_driver_sql(
            "SELECT to_state FROM task_events WHERE task_id = %s ORDER BY state_version",
            (first.task_id,),
        ).scalars()
        assert tuple(result) == ("SUCCEEDED", '{"ok": 1}')
        assert list(history)[-3:] == ["LEASED", "RUNNING", "SUCCEEDED"]
