"""The delivery and workflow gauges as the gauge loop reads them from MySQL (ORBIT.md §11): the
values the data implies, ages on database time, and no stale series for what is gone — a
namespace whose workflows ended or a subscription deleted drops out at the next refresh."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import sqlalchemy as sa
from prometheus_client.core import Metric

from orbit.metrics.delivery import delivery_gauges
from orbit.metrics.workflows import workflow_gauges

from ..drivers.delivery_driver import DeliveryDriver
from ..drivers.weave_driver import WeaveDriver
from ..weave.test_weave_inbox import TWO_STEPS, finish_first
from ..weave.test_weave_signals import APPROVAL

Reader = Callable[[sa.Connection], Iterable[Metric]]
Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def read(engine: sa.Engine, reader: Reader, namespace: str) -> Series:
    """The reader's samples of ``namespace``: (name, labels without namespace) → value."""
    with engine.connect() as conn:
        families = list(reader(conn))
    return {
        (s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "namespace"))): s.value
        for family in families
        for s in family.samples
        if s.labels.get("namespace") == namespace
    }


# --- deliveries ------------------------------------------------------------------------------


def subscription_series(delivery: DeliveryDriver, name: str) -> dict[str, float]:
    found = read(delivery.pulse.engine, delivery_gauges, delivery.namespace)
    return {
        metric: v for (metric, labels), v in found.items() if labels == (("subscription", name),)
    }


def test_delivery_gauges_count_pending_and_parked_and_age_the_oldest_on_database_time(
    delivery: DeliveryDriver,
) -> None:
    delivery.subscribe("results")
    delivery.subscribe("hook", "push", max_attempts=1)
    delivery.succeeded_task()
    (item,) = delivery.lease_push("hook")
    delivery.report(item, error="HTTP 500")  # the last allowed attempt: parked
    delivery.pulse.advance(120)
    delivery.succeeded_task()

    pull = subscription_series(delivery, "results")
    assert (pull["orbit_delivery_backlog"], pull["orbit_deliveries_parked"]) == (2, 0)
    assert 120 <= pull["orbit_delivery_oldest_age_seconds"] < 180
    push = subscription_series(delivery, "hook")
    assert (push["orbit_delivery_backlog"], push["orbit_deliveries_parked"]) == (1, 1)


def test_a_subscription_with_nothing_pending_shows_zeros_and_a_deleted_one_nothing(
    delivery: DeliveryDriver,
) -> None:
    delivery.subscribe("results")
    assert subscription_series(delivery, "results") == {
        "orbit_delivery_backlog": 0,
        "orbit_delivery_oldest_age_seconds": 0,
        "orbit_deliveries_parked": 0,
    }
    delivery.delete("results")
    assert subscription_series(delivery, "results") == {}


# --- workflows -------------------------------------------------------------------------------


def workflow_series(weave: WeaveDriver) -> Series:
    return read(weave.engine, workflow_gauges, weave.namespace)


def test_workflow_gauges_count_live_instances_by_state_and_pending_signals(
    weave: WeaveDriver,
) -> None:
    weave.publish("article", APPROVAL)
    running = weave.start_workflow("article")
    paused = weave.start_workflow("article")
    weave.control("pause", paused)
    weave.signal(running, "approved", {"by": "early"})  # no wait is active yet: pending

    found = workflow_series(weave)

    assert found[("orbit_workflow_instances", (("state", "RUNNING"),))] == 1
    assert found[("orbit_workflow_instances", (("state", "PAUSED"),))] == 1
    assert found[("orbit_workflow_signal_backlog", ())] == 1
    assert found[("orbit_workflow_inbox_backlog", ())] == 0
    assert found[("orbit_workflow_inbox_oldest_age_seconds", ())] == 0


def test_the_inbox_backlog_and_its_oldest_age_until_the_consumer_takes_it(
    weave: WeaveDriver,
) -> None:
    weave.publish("two", TWO_STEPS)
    wf = weave.start_workflow("two")
    finish_first(weave, wf)
    weave.advance(90)

    found = workflow_series(weave)
    assert found[("orbit_workflow_inbox_backlog", ())] == 1
    assert 90 <= found[("orbit_workflow_inbox_oldest_age_seconds", ())] < 150

    weave.consume()
    found = workflow_series(weave)
    assert found[("orbit_workflow_inbox_backlog", ())] == 0
    assert found[("orbit_workflow_inbox_oldest_age_seconds", ())] == 0


def test_a_namespace_whose_workflows_all_ended_has_no_workflow_gauges(weave: WeaveDriver) -> None:
    """A prometheus_client Gauge kept the last value of such a namespace for ever."""
    weave.publish("article", APPROVAL)
    wf = weave.start_workflow("article")
    assert workflow_series(weave)
    weave.control("cancel", wf)
    assert workflow_series(weave)[("orbit_workflow_inbox_backlog", ())] == 1, "its task's outcome"
    weave.consume()
    assert workflow_series(weave) == {}
