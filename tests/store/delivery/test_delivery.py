"""Seed §6.2 and invariant 6: every outcome reaches each matching subscription through one
durable delivery row; pull leases with an ack deadline and redelivers what was not acked; push
retries with a bounded, jittered backoff and parks — never drops — what keeps failing."""

from __future__ import annotations

import datetime as dt
import random

import pytest

from orbit_store.delivery.model import (
    AckStatus,
    DeliveryPolicy,
    Mode,
    PushResult,
    SubscriptionSpec,
)
from orbit_store.delivery.subscriptions import put_subscription
from orbit_store.errors import Conflict, InvalidRequest
from orbit_store.pulse.model import Outcome, Safety

from ..drivers.delivery_driver import DeliveryDriver
from ..drivers.pulse_driver import PulseDriver


def test_an_outcome_writes_one_delivery_per_matching_subscription_inv4_inv6(
    pulse: PulseDriver, delivery: DeliveryDriver
) -> None:
    pulse.queue("billing")
    delivery.subscribe("everything")
    delivery.subscribe("billing-only", queues=("billing",))
    delivery.subscribe("failures", outcomes=("FAILED",))
    delivery.subscribe("shop", handlers=("shop.*",))
    task_id = delivery.succeeded_task(handler="shop.receipt")

    (event,) = pulse.result_events(task_id)
    for name, expected in (("everything", 1), ("billing-only", 0), ("failures", 0), ("shop", 1)):
        rows = delivery.deliveries(name)
        assert len(rows) == expected, name
        assert all(r.event_id == event.id and r.state == "PENDING" for r in rows)


def test_pull_hands_an_event_out_once_until_its_ack_deadline_then_again(
    pulse: PulseDriver, delivery: DeliveryDriver
) -> None:
    delivery.subscribe()
    task_id = delivery.succeeded_task()

    first = delivery.pull(deadline=30)
    assert [e.task_id for e in first.events] == [task_id]
    assert first.events[0].task_state == "SUCCEEDED" and first.events[0].attempt == 1
    assert delivery.pull().events == [], "leased: nobody else gets it before the deadline"

    pulse.advance(31)
    again = delivery.pull()
    assert [e.id for e in again.events] == [first.events[0].id]
    assert again.events[0].attempt == 2


def test_an_acked_event_is_never_handed_out_again_and_acks_are_idempotent(
    pulse: PulseDriver, delivery: DeliveryDriver
) -> None:
    delivery.subscribe()
    delivery.succeeded_task()
    (event,) = delivery.pull(deadline=5).events

    assert delivery.ack([event.id, "no-such-event"]) == {
        event.id: AckStatus.ACKED,
        "no-such-event": AckStatus.UNKNOWN,
    }
    assert delivery.ack([event.id]) == {event.id: AckStatus.ALREADY_ACKED}
    pulse.advance(60)
    assert delivery.pull().events == []
    assert [r.state for r in delivery.deliveries()] == ["DELIVERED"]


def test_an_event_never_acked_is_parked_after_max_attempts_not_dropped(
    pulse: PulseDriver, delivery: DeliveryDriver
) -> None:
    delivery.subscribe(max_attempts=2)
    delivery.succeeded_task()
    for _ in range(2):
        assert len(delivery.pull(deadline=1).events) == 1
        pulse.advance(2)

    batch = delivery.pull()
    assert (batch.events, batch.parked) == ([], 1)
    (row,) = delivery.deliveries()
    assert (row.state, row.attempts) == ("PARKED", 2)
    assert delivery.get().counts["PARKED"] == 1
    # A consumer that did process it may still acknowledge it.
    assert delivery.ack([row.event_id]) == {row.event_id: AckStatus.ACKED}


def test_review_and_cancel_outcomes_reach_subscribers_like_any_other(
    pulse: PulseDriver, delivery: DeliveryDriver
) -> None:
    delivery.subscribe()
    pulse.submit(safety=Safety.UNSAFE)
    grant = pulse.claim_one()
    pulse.start(grant)
    pulse.complete(grant, Outcome.UNKNOWN)
    pulse.review(grant.task_id, "failed")
    waiting = pulse.submit(params={"n": 2}).task_id
    pulse.cancel(waiting)

    events = delivery.pull(limit=10).events
    assert sorted((e.task_id, e.task_state) for e in events) == sorted(
        [
            (grant.task_id, "NEEDS_REVIEW"),
            (grant.task_id, "FAILED"),
            (waiting, "CANCELLED"),
        ]
    )
    reviewed = next(e for e in events if e.task_state == "FAILED")
    assert reviewed.payload["reason"].startswith("review:")


def test_a_push_failure_is_retried_after_a_bounded_backoff(
    pulse: PulseDriver, delivery: DeliveryDriver
) -> None:
    delivery.subscribe("hook", "push", backoff_initial_ms=10_000, backoff_max_ms=60_000)
    delivery.succeeded_task()
    (item,) = delivery.lease_push("hook")
    before = pulse.now()

    assert delivery.report(item, error="HTTP 503") is PushResult.FAILED
    (row,) = delivery.deliveries("hook")
    assert (row.state, row.attempts, row.last_error) == ("PENDING", 1, "HTTP 503")
    wait = (row.next_attempt_at - before).total_seconds()
    assert 5 <= wait <= 11, "equal jitter: between half and all of the 10 s first delay"
    assert delivery.lease_push("hook") == [], "not due before its backoff"
    pulse.advance(11)
    (retry,) = delivery.lease_push("hook")
    assert retry.event.attempt == 2
    assert delivery.report(retry) is PushResult.DELIVERED
    assert delivery.deliveries("hook")[0].state == "DELIVERED"


def test_a_report_from_a_lapsed_push_lease_changes_nothing(
    pulse: PulseDriver, delivery: DeliveryDriver
) -> None:
    delivery.subscribe("hook", "push", timeout_ms=1_000)
    delivery.succeeded_task()
    (stale,) = delivery.lease_push("hook")
    pulse.advance(120)  # the lease (timeout + margin) lapsed; another replica takes it
    (fresh,) = delivery.lease_push("hook")

    assert delivery.report(stale, error="timed out") is PushResult.STALE
    assert delivery.report(fresh) is PushResult.DELIVERED
    assert delivery.report(stale) is PushResult.STALE


def test_the_last_allowed_push_failure_parks_it_and_redrive_is_audited(
    pulse: PulseDriver, delivery: DeliveryDriver
) -> None:
    delivery.subscribe("hook", "push", max_attempts=2, backoff_initial_ms=1_000)
    delivery.succeeded_task()
    (item,) = delivery.lease_push("hook")
    assert delivery.report(item, error="HTTP 500") is PushResult.FAILED
    pulse.advance(2)
    (item,) = delivery.lease_push("hook")
    assert delivery.report(item, error="HTTP 500") is PushResult.PARKED
    pulse.advance(3600)
    assert delivery.lease_push("hook") == [], "parked deliveries wait for a person"

    assert delivery.redrive("hook") == 1
    (row,) = delivery.deliveries("hook")
    assert (row.state, row.attempts, row.parked_at) == ("PENDING", 0, None)
    (audit,) = [a for a in delivery.audit("hook") if a.action == "subscription.redrive"]
    assert (audit.actor, audit.reason, audit.after["count"]) == (
        "ops@example.com",
        "receiver fixed",
        1,
    )
    (again,) = delivery.lease_push("hook")
    assert delivery.report(again) is PushResult.DELIVERED


def test_backoff_doubles_caps_and_stays_bounded_for_any_attempt_count() -> None:
    policy = DeliveryPolicy(backoff_initial_ms=1_000, backoff_max_ms=60_000)
    rng = random.Random(1)
    for attempts, full in ((1, 1), (2, 2), (3, 4), (7, 60), (10**9, 60)):
        delay = policy.backoff_after(attempts, rng)
        assert dt.timedelta(seconds=full / 2) <= delay <= dt.timedelta(seconds=full), attempts


def test_putting_the_same_subscription_again_changes_nothing_and_audits_nothing(
    pulse: PulseDriver, delivery: DeliveryDriver
) -> None:
    first = delivery.subscribe(outcomes=("FAILED",))
    assert delivery.subscribe(outcomes=("FAILED",)).version == first.version == 1
    assert delivery.subscribe(outcomes=("FAILED", "NEEDS_REVIEW")).version == 2
    actions = [a.action for a in delivery.audit("results")]
    assert actions == ["subscription.create", "subscription.update"]


def test_a_push_subscription_needs_a_url_and_a_secret_reference(delivery: DeliveryDriver) -> None:
    spec = SubscriptionSpec(
        name="hook", mode=Mode.PUSH, url="https://x.example", secret_ref="../etc/passwd"
    )
    with pytest.raises(InvalidRequest, match="secret_ref"):
        delivery.pulse.tx(
            lambda c: put_subscription(c, delivery.namespace, spec, actor="admin@example.com")
        )


@pytest.mark.parametrize(
    "url", ["http://[::1/hook", "http://h:99999/", "http://:80/", "http://a b/"]
)
def test_a_push_url_the_sender_could_not_address_is_refused_naming_the_field(
    delivery: DeliveryDriver, url: str
) -> None:
    spec = SubscriptionSpec(name="hook", mode=Mode.PUSH, url=url, secret_ref="hook-secret")
    with pytest.raises(InvalidRequest, match=r"^url: .* is not a valid URL"):
        delivery.pulse.tx(
            lambda c: put_subscription(c, delivery.namespace, spec, actor="admin@example.com")
        )


def test_deleting_a_subscription_with_undelivered_events_needs_an_explicit_discard(
    pulse: PulseDriver, delivery: DeliveryDriver
) -> None:
    delivery.subscribe()
    delivery.succeeded_task()
    with pytest.raises(Conflict, match="1 pending"):
        delivery.delete()
    assert delivery.delete(discard=True)["PENDING"] == 1
    (audit,) = [a for a in delivery.audit("results") if a.action == "subscription.delete"]
    assert audit.after == {"discarded_undelivered": 1}
