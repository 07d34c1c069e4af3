"""Client behaviour that needs no server: request bodies, idempotency keys across retries,
configuration from the environment, and what never leaks (the token)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import uuid
from typing import Any

import httpx
import pytest

from orbit_sdk import AsyncClient, Client, RetryPolicy, TimeoutExpired, errors
from orbit_sdk._wire.calls import get_task, submission_body, submission_options
from orbit_sdk.client import _timeout_error

from .conftest import Faults, problem, task_body

FAST = RetryPolicy(initial_backoff=0.001, max_backoff=0.002)


def client(faults: Faults, **kwargs: Any) -> Client:
    return Client("http://orbit.test", transport=httpx.MockTransport(faults), **kwargs)


def created(request: httpx.Request) -> httpx.Response:
    return httpx.Response(201, json=task_body())


def ok_task(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json=task_body())


def test_submit_generates_one_key_and_reuses_it_on_every_retry() -> None:
    faults = Faults(
        [problem(503, "unavailable"), httpx.ReadTimeout("lost answer"), httpx.Response(504)],
        success=created,
    )
    with client(faults, token="t", retry=FAST) as c:
        task = c.submit("shop", handler="shop.echo", params={"x": 1})
    assert task.state == "WAITING"
    keys = {body["idempotency_key"] for body in faults.bodies}
    assert len(faults.requests) == 4 and len(keys) == 1
    assert uuid.UUID(keys.pop()).version == 4
    assert len({r.content for r in faults.requests}) == 1  # byte-identical resends


def test_each_submit_call_gets_its_own_generated_key() -> None:
    faults = Faults([], success=created)
    with client(faults) as c:
        c.submit("shop", handler="shop.echo")
        c.submit("shop", handler="shop.echo")
    assert faults.bodies[0]["idempotency_key"] != faults.bodies[1]["idempotency_key"]


def test_submit_keeps_the_callers_key_and_reports_replays() -> None:
    faults = Faults([], success=lambda r: httpx.Response(200, json=task_body(replayed=True)))
    with client(faults) as c:
        task = c.submit("shop", handler="shop.echo", idempotency_key="order-42")
    assert faults.bodies[0]["idempotency_key"] == "order-42"
    assert task.replayed


def test_idempotency_conflict_is_not_retried() -> None:
    faults = Faults([problem(409, "idempotency-conflict")], success=created)
    with client(faults, retry=FAST) as c, pytest.raises(errors.IdempotencyConflict):
        c.submit("shop", handler="shop.echo", idempotency_key="k")
    assert len(faults.requests) == 1


def test_submission_body_maps_options_onto_the_wire_contract() -> None:
    deadline = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    body = submission_body(
        handler="shop.echo",
        queue="emails",
        idempotency_key="k",
        delay=dt.timedelta(minutes=2),
        deadline_at=deadline,
        priority=-5,
        concurrency_key="customer-7",
        concurrency_limit=1,
        max_attempts=5,
        backoff_multiplier=3,
        safety="unsafe",
    )
    assert body == {
        "queue": "emails",
        "handler": "shop.echo",
        "params": {},
        "idempotency_key": "k",
        "delay_seconds": 120.0,
        "deadline_at": "2030-01-01T00:00:00+00:00",
        "priority": -5,
        "concurrency_key": "customer-7",
        "concurrency_limit": 1,
        "safety": "unsafe",
        "retry": {"max_attempts": 5, "backoff_multiplier": 3},
    }
    minimal = submission_body(handler="h", idempotency_key="k")
    assert set(minimal) == {"queue", "handler", "params", "idempotency_key"}  # no nulls sent


@pytest.mark.parametrize(
    "options",
    [
        {"handler": "h", "idempotency_key": "k"},
        {
            "handler": "shop.echo",
            "queue": "emails",
            "params": {"order": 42},
            "idempotency_key": "k",
            "delay": 90,
            "deadline_at": dt.datetime(2030, 1, 1, 12, 30, tzinfo=dt.UTC),
            "priority": -5,
            "concurrency_key": "customer-7",
            "concurrency_limit": 1,
            "max_attempts": 5,
            "backoff_initial_seconds": 0.5,
            "backoff_max_seconds": 60,
            "backoff_multiplier": 3,
            "safety": "unsafe",
        },
        {
            "handler": "h",
            "idempotency_key": "k",
            "available_at": dt.datetime(2030, 1, 1, tzinfo=dt.UTC),
        },
    ],
)
def test_a_stored_body_builds_the_very_same_request_again(options: Any) -> None:
    """What the outbox relies on to resend a stored submission under its key."""
    body = json.loads(json.dumps(submission_body(**options)))  # as stored: JSON
    assert submission_body(**submission_options(body)) == body


def test_submission_body_refuses_ambiguous_times() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        submission_body(handler="h", available_at=dt.datetime(2030, 1, 1))
    with pytest.raises(ValueError, match="not both"):
        submission_body(handler="h", delay=5, available_at=dt.datetime.now(dt.UTC))


def test_a_misspelt_or_missing_submission_keyword_is_refused_before_sending() -> None:
    """The keywords are one TypedDict (``SubmitOptions``): a type checker catches a misspelling,
    and at run time it still fails as a plain signature would, with nothing sent."""
    faults = Faults([], success=ok_task)
    with client(faults) as c:
        with pytest.raises(TypeError, match="handlr"):
            c.submit("shop", handlr="shop.echo")  # type: ignore[call-arg]
        with pytest.raises(TypeError, match="handler"):
            c.submit("shop", queue="q")  # type: ignore[call-arg]
    assert faults.requests == []


def test_ids_cannot_add_path_levels() -> None:
    assert get_task("shop", "../admin").path == "/v1/namespaces/shop/tasks/..%2Fadmin"


def test_server_and_token_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORBIT_SERVER", "http://orbit.test/")
    monkeypatch.setenv("ORBIT_TOKEN", "s3cret-token")
    faults = Faults([], success=ok_task)
    with Client(transport=httpx.MockTransport(faults)) as c:
        c.get("shop", "t1")
        assert c.server == "http://orbit.test"
        assert "s3cret" not in repr(c)
    assert faults.requests[0].headers["authorization"] == "Bearer s3cret-token"
    assert faults.requests[0].headers["user-agent"].startswith("orbit-sdk-python/")


def test_retry_logs_never_contain_the_token(caplog: pytest.LogCaptureFixture) -> None:
    faults = Faults([problem(503, "unavailable")], success=ok_task)
    caplog.set_level(logging.DEBUG, logger="orbit_sdk")
    with client(faults, token="s3cret-token", retry=FAST) as c:
        c.get("shop", "t1")
    assert caplog.records, "the retry should be logged"
    assert all("s3cret" not in r.getMessage() for r in caplog.records)


def test_list_sends_only_the_filters_given() -> None:
    page = {"items": [task_body()], "next_page_token": None}
    faults = Faults([], success=lambda r: httpx.Response(200, json=page))
    with client(faults) as c:
        assert [t.id for t in c.iter_tasks("shop", state="WAITING")] == [task_body()["id"]]
    assert dict(faults.requests[0].url.params) == {"state": "WAITING", "page_size": "50"}


def test_the_timeout_error_is_a_client_side_timeout_error_naming_the_task() -> None:
    err = _timeout_error("t1", 5, None)
    assert isinstance(err, TimeoutExpired) and isinstance(err, TimeoutError)
    assert isinstance(err, errors.OrbitError) and err.client_side
    assert err.type == "https://orbit.dev/problems/timeout"
    assert "t1" in str(err)


def test_async_submit_reuses_its_key_across_retries() -> None:
    faults = Faults([httpx.ConnectError("refused"), problem(503, "unavailable")], success=created)

    async def go() -> None:
        mock = httpx.MockTransport(faults)
        async with AsyncClient("http://orbit.test", transport=mock, retry=FAST) as c:
            task = await c.submit("shop", handler="shop.echo", params=[1, 2])
            assert task.handler == "shop.echo"

    asyncio.run(go())
    assert len(faults.requests) == 3
    assert len({json.loads(r.content)["idempotency_key"] for r in faults.requests}) == 1


def test_an_empty_idempotency_key_is_refused_not_replaced() -> None:
    for empty in ("", "  "):
        with pytest.raises(ValueError, match="must not be empty"):
            submission_body(handler="h", idempotency_key=empty)


def test_a_validation_error_names_every_field_and_its_constraint() -> None:
    errs = [
        {"loc": ["body", "priority"], "msg": "Input should be less than or equal to 1000"},
        {"loc": ["body", "retry", "max_attempts"], "msg": "Input should be greater than 0"},
        {"loc": ["query", "page_size"], "msg": "Input should be less than or equal to 500"},
    ]
    faults = Faults([problem(422, "validation", "the request is invalid", errors=errs)])
    with client(faults) as c, pytest.raises(errors.ValidationFailed) as failed:
        c.submit("shop", handler="h")
    text = str(failed.value)
    assert "priority: Input should be less than or equal to 1000" in text
    assert "retry.max_attempts: Input should be greater than 0" in text
    assert failed.value.fields[2] == ("page_size", "Input should be less than or equal to 500")


def test_a_413_is_payload_too_large_naming_the_field() -> None:
    faults = Faults([problem(413, "payload-too-large", "params too big", field="params")])
    with client(faults) as c, pytest.raises(errors.PayloadTooLarge) as refused:
        c.submit("shop", handler="h")
    assert errors.field_errors(refused.value.problem) == [("params", "params too big")]


def test_whoami_reads_the_tokens_namespace() -> None:
    answer = {"namespace": "dev", "name": "t", "roles": ["admin"]}
    faults = Faults([], success=lambda request: httpx.Response(200, json=answer))
    with client(faults) as c:
        assert c.whoami().namespace == "dev"
    assert faults.requests[0].url.path == "/v1/whoami"
