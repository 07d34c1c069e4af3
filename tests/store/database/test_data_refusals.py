"""What the database cannot store is the request's fault, never an outage: MariaDB refuses a
non-JSON number or JSON nested 32 deep in a JSON column (4025), text too long for its column
(1406) and a number out of its column's range (1264). ``run_transaction`` raises
:class:`DataRefused` (an ``InvalidRequest``: answered 422, never 503 "database unavailable"),
with either MySQL driver. A group of submissions, a submission batch and a completion batch
answer such an item on its own and commit its neighbours (invariants 1 and 6 per submission,
4 per completion)."""

from __future__ import annotations

import functools
import math
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from orbit_store.db import create_store_engine, run_transaction
from orbit_store.errors import DataRefused, InvalidRequest
from orbit_store.pulse import batches, service
from orbit_store.pulse.model import Outcome, TaskState
from orbit_store.pulse.submit.accept import SubmitRequest
from orbit_store.pulse.submit_group import submit_group
from orbit_store.schema import tasks

from ..drivers.pulse_driver import PulseDriver

pytestmark = pytest.mark.mariadb_only


def nested(depth: int) -> Any:
    """An object ``depth`` containers deep: ``{"a": {"a": … 1}}``."""
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.fixture(params=["pymysql", "mysqldb"])
def driver_engine(request: pytest.FixtureRequest, mariadb_url: str) -> Iterator[sa.Engine]:
    """The session's database through each MySQL driver Orbit supports."""
    url = make_url(mariadb_url).set(drivername=f"mysql+{request.param}")
    engine = create_store_engine(url.render_as_string(hide_password=False))
    yield engine
    engine.dispose()


@pytest.fixture
def pulse(driver_engine: sa.Engine) -> PulseDriver:
    return PulseDriver(driver_engine)


def _request(pulse: PulseDriver, params: Any, key: str | None = None) -> SubmitRequest:
    return SubmitRequest(
        namespace=pulse.namespace,
        queue="default",
        handler="test.noop",
        params=params,
        idempotency_key=key or uuid.uuid4().hex,
    )


def _task_count(pulse: PulseDriver) -> int:
    with pulse.engine.connect() as conn:
        query = sa.select(sa.func.count()).where(tasks.c.namespace == pulse.namespace)
        return int(conn.execute(query).scalar_one())


@pytest.mark.parametrize(
    "params",
    [{"x": math.nan}, {"x": math.inf}, {"x": -math.inf}, nested(32)],
    ids=["NaN", "Infinity", "-Infinity", "32-deep"],
)
def test_params_the_database_cannot_store_are_a_data_refusal_not_an_outage(
    pulse: PulseDriver, params: Any
) -> None:
    with pytest.raises(DataRefused) as refused:
        service.submit(pulse.engine, _request(pulse, params))
    assert isinstance(refused.value, InvalidRequest), "answered as a bad request (422)"
    assert "refused" in str(refused.value)
    assert _task_count(pulse) == 0, "nothing written"


def test_params_31_deep_are_stored(pulse: PulseDriver) -> None:
    service.submit(pulse.engine, _request(pulse, nested(31)))
    assert _task_count(pulse) == 1


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO refusals (s) VALUES ('longer than three')",
        "INSERT INTO refusals (n) VALUES (1e30)",
    ],
    ids=["too-long-1406", "out-of-range-1264"],
)
def test_too_long_text_and_out_of_range_numbers_are_data_refusals(
    driver_engine: sa.Engine, statement: str
) -> None:
    def work(conn: sa.Connection) -> None:
        conn.exec_driver_sql("CREATE TEMPORARY TABLE IF NOT EXISTS refusals (s VARCHAR(3), n INT)")
        conn.exec_driver_sql(statement)

    with pytest.raises(DataRefused):
        run_transaction(driver_engine, work)


def test_text_that_is_not_unicode_is_a_data_refusal(pulse: PulseDriver) -> None:
    """A lone surrogate (``"\\ud800"`` in JSON) cannot be encoded for the database at all."""
    request = SubmitRequest(namespace=pulse.namespace, queue="default", handler="h\ud800")
    with pytest.raises(DataRefused):
        service.submit(pulse.engine, request)


def test_a_group_answers_an_unstorable_submission_alone_and_commits_its_neighbours_inv1_inv6(
    pulse: PulseDriver,
) -> None:
    requests = [_request(pulse, {"n": 1}), _request(pulse, {"x": math.nan}), _request(pulse, {})]
    answers = submit_group(pulse.engine, pulse.namespace, requests)
    assert isinstance(answers[1], DataRefused)
    accepted = [a for a in answers if not isinstance(a, Exception)]
    assert [a.state for a in accepted] == [TaskState.WAITING, TaskState.WAITING]
    assert _task_count(pulse) == 2


def test_a_submission_batch_answers_an_unstorable_item_alone_and_commits_the_rest_inv1_inv6(
    pulse: PulseDriver,
) -> None:
    requests = [_request(pulse, {"n": n}) for n in range(5)]
    requests[2] = _request(pulse, nested(40))
    requests[4] = _request(pulse, {"n": 0}, key=requests[0].idempotency_key)  # a replay of item 0
    results = service.submit_many(pulse.engine, pulse.namespace, requests)
    assert isinstance(results[2].error, DataRefused)
    assert [r.result is not None for r in results] == [True, True, False, True, True]
    assert results[4].result is not None and results[4].result.replayed, "batch rules kept"
    assert results[4].result.task_id == results[0].result.task_id  # type: ignore[union-attr]
    assert _task_count(pulse) == 3


def test_a_completion_batch_answers_an_unstorable_result_alone_and_applies_the_rest_inv4(
    pulse: PulseDriver,
) -> None:
    for _ in range(3):
        pulse.submit()
    grants = pulse.claim(limit=3)
    for grant in grants:
        pulse.start(grant)
    results = [{"ok": 1}, {"x": math.nan}, {"ok": 3}]
    items = [
        batches.CompletionItem(g.attempt_id, g.token, Outcome.SUCCEEDED, result=r)
        for g, r in zip(grants, results, strict=True)
    ]
    answers = batches.run_batch(
        pulse.engine, batches.complete_attempts, namespace=pulse.namespace, items=items
    )
    refused = answers[grants[1].attempt_id]
    assert isinstance(refused, batches.ItemRefused) and "refused" in refused.detail
    states = {g.attempt_id: pulse.task(g.task_id).state for g in grants}
    assert states == {
        grants[0].attempt_id: TaskState.SUCCEEDED.value,
        grants[1].attempt_id: TaskState.RUNNING.value,
        grants[2].attempt_id: TaskState.SUCCEEDED.value,
    }


def test_a_lone_completion_with_an_unstorable_result_is_refused_not_unavailable(
    pulse: PulseDriver,
) -> None:
    pulse.submit()
    grant = pulse.claim_one()
    pulse.start(grant)
    item = batches.CompletionItem(grant.attempt_id, grant.token, Outcome.SUCCEEDED, nested(33))
    answers = batches.run_batch(
        pulse.engine, batches.complete_attempts, namespace=pulse.namespace, items=[item]
    )
    assert isinstance(answers[grant.attempt_id], batches.ItemRefused)
    assert pulse.task(grant.task_id).state == TaskState.RUNNING.value


def test_the_refusal_names_what_the_database_said(driver_engine: sa.Engine) -> None:
    work = functools.partial(_insert_nan)
    with pytest.raises(DataRefused, match="CONSTRAINT"):
        run_transaction(driver_engine, work)


def _insert_nan(conn: sa.Connection) -> None:
    conn.exec_driver_sql("CREATE TEMPORARY TABLE IF NOT EXISTS refusals_json (j JSON)")
    conn.exec_driver_sql("INSERT INTO refusals_json (j) VALUES ('NaN')")
