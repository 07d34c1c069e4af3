"""What Orbit can store as JSON (``orbit_sdk.json_values``), checked before anything is sent: a
value the server would refuse raises the typed ``ValidationFailed`` naming the field — never a
bare ``ValueError`` from deep inside the HTTP client — and a handler's result the database
cannot store is reported as a failure saying why (invariant 4: the outcome lands, the task does
not hang on a report the server cannot take)."""

from __future__ import annotations

import math
from typing import Any

import httpx
import pytest

from orbit_sdk import Client, ValidationFailed
from orbit_sdk._worker.outcome import error_body, report_for_result
from orbit_sdk.json_values import MAX_JSON_DEPTH, Unstorable, check_storable, storable_problem

from .conftest import Faults, task_body


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    ("value", "where", "says"),
    [
        ({"x": math.nan}, "params.x", "NaN"),
        ({"x": [1, math.inf]}, "params.x[1]", "Infinity"),
        ({"x": -math.inf}, "params.x", "-Infinity"),
        (nested(MAX_JSON_DEPTH + 1), "params" + ".a" * MAX_JSON_DEPTH, "nested more than"),
        ({"k": "\ud800"}, "params.k", "surrogate"),
        ({"\udc00": 1}, "params", "surrogate"),
        ({"when": {1, 2}}, "params.when", "set"),
    ],
    ids=["NaN", "Infinity", "-Infinity", "too-deep", "surrogate", "surrogate-key", "set"],
)
def test_what_cannot_be_stored_is_named_with_where_it_is(value: Any, where: str, says: str) -> None:
    with pytest.raises(Unstorable) as refused:
        check_storable(value, "params")
    assert refused.value.path == where and says in refused.value.reason


def test_plain_json_to_the_documented_depth_can_be_stored() -> None:
    for value in (nested(MAX_JSON_DEPTH), {"é": ["ü", 1.5, None, True, 10**30]}, [], "", 0):
        assert storable_problem(value) is None


def test_a_cycle_or_a_very_deep_value_is_refused_without_recursing_to_the_end() -> None:
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    assert storable_problem(deep) is not None


@pytest.mark.parametrize(
    "params", [{"x": math.nan}, {"x": math.inf}, nested(32)], ids=["NaN", "Infinity", "32-deep"]
)
def test_submit_raises_its_typed_validation_error_naming_params_before_sending(
    params: Any,
) -> None:
    faults = Faults([], success=lambda r: httpx.Response(201, json=task_body()))
    with (
        Client("http://orbit.test", transport=httpx.MockTransport(faults)) as client,
        pytest.raises(ValidationFailed) as refused,
    ):
        client.submit("shop", handler="shop.echo", params=params)
    assert faults.requests == [], "nothing sent"
    ((field, message),) = refused.value.fields
    assert field.startswith("params") and message
    assert refused.value.client_side


def test_workflow_input_and_signal_payloads_are_checked_before_sending_too() -> None:
    faults = Faults([], success=lambda r: httpx.Response(201, json={}))
    with Client("http://orbit.test", transport=httpx.MockTransport(faults)) as client:
        with pytest.raises(ValidationFailed, match=r"input\.x"):
            client.start_workflow("shop", "order", input={"x": math.nan})
        with pytest.raises(ValidationFailed, match="payload"):
            client.signal_workflow("shop", "w-1", "approved", payload=nested(40), signal_id="s")
    assert faults.requests == []


@pytest.mark.parametrize(
    "result", [math.nan, {"x": -math.inf}, nested(40), {"k": "\ud800"}], ids=str
)
def test_a_result_that_cannot_be_stored_is_reported_as_a_failure_saying_why(result: Any) -> None:
    report = report_for_result(result)
    assert (report.outcome, report.retryable) == ("failed", False)
    assert report.error["type"] == "ResultNotStorable"
    assert report.error["message"].startswith("the handler's result cannot be stored: result")
    assert storable_problem(report.error) is None


def test_an_exception_whose_message_is_not_unicode_still_makes_a_storable_report() -> None:
    body = error_body(OSError("cannot open b'\\xff': /data/\udcff.csv"))
    assert storable_problem(body) is None and "\\udcff" in body["message"]


def test_the_outbox_refuses_params_orbit_cannot_store_before_writing_them() -> None:
    """A pending submission that could never be delivered is refused in the caller's own
    transaction, not parked later by the relay."""
    import sqlalchemy as sa

    from orbit_sdk.outbox import OutboxSubmission, enqueue, outbox_table

    table = outbox_table(sa.MetaData())
    engine = sa.create_engine("sqlite://")
    table.metadata.create_all(engine)
    with engine.begin() as conn, pytest.raises(ValidationFailed, match=r"params\.x"):
        enqueue(conn, table, OutboxSubmission("shop", "shop.echo", params={"x": math.nan}))
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one() == 0
