"""The transport: problem+json → typed errors, and which failures are retried, how often, how."""

from __future__ import annotations

import asyncio
import random

import httpx
import pytest

import orbit_sdk
from orbit_sdk import errors
from orbit_sdk._wire.transport import AsyncTransport, Call, RetryPolicy, SyncTransport

from .conftest import Faults, MakeTransport, problem

GET = Call("GET", "/v1/namespaces/shop/tasks/t1")
SUBMIT = Call("POST", "/v1/namespaces/shop/tasks", json={"handler": "h", "idempotency_key": "k"})
LEASE = Call("POST", "/v1/worker-sessions/s1/lease", json={"max_tasks": 1}, idempotent=False)


@pytest.mark.parametrize(
    ("status", "slug", "cls"),
    [
        (401, "unauthorized", errors.Unauthorized),
        (403, "forbidden", errors.Forbidden),
        (404, "not-found", errors.NotFound),
        (422, "validation", errors.ValidationFailed),
        (409, "idempotency-conflict", errors.IdempotencyConflict),
        (409, "conflict", errors.Conflict),
        (429, "quota-exceeded", errors.QuotaExceeded),
        (409, "lease-lost", errors.LeaseLost),
        (409, "stale-attempt", errors.StaleAttempt),
        (403, "invalid-attempt-token", errors.InvalidAttemptToken),
        (409, "cancel-requested", errors.CancelRequested),
        (409, "gate-closed", errors.GateClosed),
        (409, "restore-fenced", errors.FencedByRestore),
        (503, "unavailable", errors.Unavailable),
        (503, "dispatch-closed", errors.DispatchClosed),
    ],
)
def test_problem_json_maps_to_its_typed_error(
    make_transport: MakeTransport, status: int, slug: str, cls: type[errors.OrbitError]
) -> None:
    faults = Faults([problem(status, slug, "details here", quota="tasks")])
    with pytest.raises(cls) as caught:
        make_transport(faults, RetryPolicy(max_attempts=1)).send(SUBMIT)
    err = caught.value
    assert type(err) is cls and isinstance(err, orbit_sdk.OrbitError)
    assert err.status == status
    assert err.type == f"https://orbit.dev/problems/{slug}"
    assert err.problem.detail == "details here"
    assert err.problem.model_extra == {"quota": "tasks"}  # RFC 9457 extension members survive
    assert not err.client_side


def test_conflict_family_can_be_caught_as_conflict(make_transport: MakeTransport) -> None:
    faults = Faults([problem(409, "stale-attempt")])
    with pytest.raises(errors.Conflict):
        make_transport(faults).send(SUBMIT)


def test_unknown_problem_type_falls_back_to_the_class_for_its_status(
    make_transport: MakeTransport,
) -> None:
    faults = Faults([problem(409, "brand-new-kind-of-conflict")])
    with pytest.raises(errors.Conflict) as caught:
        make_transport(faults).send(SUBMIT)
    assert type(caught.value) is errors.Conflict
    assert caught.value.type.endswith("brand-new-kind-of-conflict")


def test_a_non_problem_error_body_becomes_a_synthetic_problem(
    make_transport: MakeTransport,
) -> None:
    html = httpx.Response(500, text="<html>Internal Server Error</html>")
    with pytest.raises(errors.OrbitError) as caught:
        make_transport(Faults([html])).send(GET)
    assert caught.value.status == 500
    assert caught.value.type == "about:blank"
    assert "Internal Server Error" in (caught.value.problem.detail or "")


def test_503_is_retried_with_growing_jittered_backoff(
    make_transport: MakeTransport, sleeps: list[float]
) -> None:
    faults = Faults([problem(503, "unavailable")] * 3)
    policy = RetryPolicy(max_attempts=5, initial_backoff=0.1, multiplier=2, max_backoff=10)
    response = make_transport(faults, policy).send(GET)
    assert response.status_code == 200
    assert len(faults.requests) == 4
    assert len(sleeps) == 3
    for n, delay in enumerate(sleeps, start=1):
        assert 0 <= delay <= 0.1 * 2 ** (n - 1)


@pytest.mark.parametrize("status", [502, 503, 504])
def test_gateway_errors_are_retried_for_idempotent_calls(
    make_transport: MakeTransport, status: int
) -> None:
    faults = Faults([httpx.Response(status, text="bad gateway")])
    assert make_transport(faults).send(SUBMIT).status_code == 200
    assert len(faults.requests) == 2


def test_gateway_errors_are_not_retried_for_a_lease(make_transport: MakeTransport) -> None:
    faults = Faults([httpx.Response(502, text="bad gateway")])
    with pytest.raises(errors.Unavailable):
        make_transport(faults).send(LEASE)
    assert len(faults.requests) == 1


def test_connect_errors_are_retried_even_for_non_idempotent_calls(
    make_transport: MakeTransport,
) -> None:
    faults = Faults([httpx.ConnectError("refused"), httpx.ConnectTimeout("slow")])
    assert make_transport(faults).send(LEASE).status_code == 200
    assert len(faults.requests) == 3


def test_read_timeout_is_retried_only_when_resending_is_safe(make_transport: MakeTransport) -> None:
    faults = Faults([httpx.ReadTimeout("no answer")])
    assert make_transport(faults).send(SUBMIT).status_code == 200
    faults = Faults([httpx.ReadTimeout("no answer")])
    with pytest.raises(errors.ServerUnreachable) as caught:
        make_transport(faults).send(LEASE)
    assert len(faults.requests) == 1
    assert caught.value.client_side
    assert isinstance(caught.value.__cause__, httpx.ReadTimeout)


def test_retries_are_bounded_by_attempts(
    make_transport: MakeTransport, sleeps: list[float]
) -> None:
    faults = Faults([httpx.ConnectError("refused")] * 10)
    with pytest.raises(errors.ServerUnreachable):
        make_transport(faults, RetryPolicy(max_attempts=3)).send(GET)
    assert len(faults.requests) == 3
    assert len(sleeps) == 2


def test_retries_are_bounded_by_elapsed_time() -> None:
    faults = Faults([httpx.ConnectError("refused")] * 50)
    now = [0.0]

    def sleep(delay: float) -> None:
        now[0] += delay

    policy = RetryPolicy(max_attempts=50, initial_backoff=1, max_backoff=1, max_elapsed=10)
    client = httpx.Client(base_url="http://orbit.test", transport=httpx.MockTransport(faults))
    transport = SyncTransport(client, policy, sleep=sleep, clock=lambda: now[0])
    with pytest.raises(errors.ServerUnreachable):
        transport.send(GET)
    transport.close()
    assert now[0] <= 10
    assert 2 <= len(faults.requests) < 50


def test_retry_after_is_honoured(make_transport: MakeTransport, sleeps: list[float]) -> None:
    busy = problem(503, "unavailable")
    busy.headers["retry-after"] = "2"
    faults = Faults([busy])
    make_transport(faults, RetryPolicy(initial_backoff=0.01)).send(GET)
    assert sleeps == [2.0]


def test_429_is_retried_for_reads(make_transport: MakeTransport) -> None:
    faults = Faults([httpx.Response(429, text="slow down")])
    assert make_transport(faults).send(GET).status_code == 200
    assert len(faults.requests) == 2


def test_429_on_a_submission_is_the_quota_answer_not_retried(make_transport: MakeTransport) -> None:
    faults = Faults([problem(429, "quota-exceeded", "namespace shop: 1000 waiting tasks")])
    with pytest.raises(errors.QuotaExceeded):
        make_transport(faults).send(SUBMIT)
    assert len(faults.requests) == 1


@pytest.mark.parametrize(("status", "slug"), [(400, "validation"), (409, "conflict")])
def test_client_errors_are_never_retried(
    make_transport: MakeTransport, status: int, slug: str
) -> None:
    faults = Faults([problem(status, slug)])
    with pytest.raises(errors.OrbitError):
        make_transport(faults).send(GET)
    assert len(faults.requests) == 1


def test_full_jitter_stays_within_the_capped_exponential() -> None:
    policy = RetryPolicy(initial_backoff=0.5, multiplier=3, max_backoff=4)
    rng = random.Random(7)
    for n in range(1, 8):
        ceiling = min(4, 0.5 * 3 ** (n - 1))
        samples = [policy.backoff(n, rng) for _ in range(200)]
        assert all(0 <= s <= ceiling for s in samples)
        assert max(samples) > ceiling / 2  # it is not stuck at the low end


def test_async_transport_makes_the_same_decisions() -> None:
    faults = Faults([httpx.ConnectError("refused"), problem(503, "unavailable")])
    sleeps: list[float] = []

    async def fake_sleep(delay: float) -> None:
        sleeps.append(delay)

    async def go() -> None:
        mock = httpx.MockTransport(faults)
        client = httpx.AsyncClient(base_url="http://orbit.test", transport=mock)
        transport = AsyncTransport(client, sleep=fake_sleep)
        try:
            assert (await transport.send(SUBMIT)).status_code == 200
            faults.script[:] = [problem(409, "stale-attempt")]
            with pytest.raises(errors.StaleAttempt):
                await transport.send(SUBMIT)
        finally:
            await transport.aclose()

    asyncio.run(go())
    assert len(faults.requests) == 4
    assert len(sleeps) == 2


def test_a_budget_cuts_each_try_s_timeout_and_the_retries_together() -> None:
    faults = Faults([problem(503, "unavailable")] * 50)
    now = [0.0]

    def sleep(delay: float) -> None:
        now[0] += delay

    policy = RetryPolicy(max_attempts=50, initial_backoff=0.5, max_backoff=0.5, max_elapsed=30)
    client = httpx.Client(
        base_url="http://orbit.test", transport=httpx.MockTransport(faults), timeout=10
    )
    transport = SyncTransport(client, policy, sleep=sleep, clock=lambda: now[0])
    with pytest.raises(errors.Unavailable):
        transport.send(Call("POST", "/v1/attempts:complete", json={"items": []}, budget=2.0))
    transport.close()
    assert now[0] <= 2.0, "the retries fit in the budget, not in the client's 30 s"
    assert {r.extensions["timeout"]["read"] for r in faults.requests} == {2.0}


def test_a_budget_never_lengthens_a_shorter_client_timeout() -> None:
    faults = Faults([])
    client = httpx.Client(
        base_url="http://orbit.test", transport=httpx.MockTransport(faults), timeout=0.5
    )
    SyncTransport(client).send(Call("POST", "/v1/attempts:complete", json={}, budget=5.0))
    assert faults.requests[0].extensions["timeout"]["read"] == 0.5
