"""Per-item isolation in every engine loop (ORBIT.md §3): one bad item — a lease, an inbox row, a
workflow's timers, a delivery, a gauge reader — is logged naming it, counted in
``orbit_engine_item_errors_total{loop}``, and never stops the others; a pass that fails as a
whole is ``orbit_engine_errors_total{loop}``. (The scheduler's case is in
tests/store/schedules/test_schedule_loop.py.)

A defect we have not found yet is played by making the item's own transaction raise."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from orbit.engines import deliveries, reaper, weave_inbox, weave_timers
from orbit.engines.egress import EgressPolicy
from orbit.engines.loop import EngineLoop
from orbit.metrics.server import Metrics
from orbit_store.pulse.leases import expiry
from orbit_store.schema import subscriptions
from orbit_store.weave import firing

from ..drivers.delivery_driver import DeliveryDriver
from ..drivers.pulse_driver import PulseDriver
from ..drivers.weave_driver import WeaveDriver
from ..weave.test_weave_inbox import TWO_STEPS, finish_first, poison_outcome


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def item_errors(metrics: Metrics, loop: str) -> float:
    return sample(metrics, "orbit_engine_item_errors_total", loop=loop)


def failing_for(real: Callable[..., Any], bad: Callable[..., bool]) -> Callable[..., Any]:
    """``real``, except that it raises for the calls ``bad`` picks."""

    def work(*args: Any, **kwargs: Any) -> Any:
        if bad(*args, **kwargs):
            raise RuntimeError("a defect in this one item")
        return real(*args, **kwargs)

    return work


# --- reaper ----------------------------------------------------------------------------------


def test_the_reaper_counts_a_lease_it_fails_on_and_lapses_the_others(
    pulse: PulseDriver, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    bad, good = pulse.submit(), pulse.submit()
    pulse.claim(limit=2)
    real = expiry.lapse_attempt
    monkeypatch.setattr(
        expiry,
        "lapse_attempt",
        failing_for(real, lambda conn, lapsed: lapsed.task_id == bad.task_id),
    )
    pulse.advance(31)
    metrics = Metrics(pulse.engine)

    report = reaper.reaper_pass(pulse.engine, metrics, namespace=pulse.namespace)

    assert (report.leases_lapsed, report.errors) == (1, 1)
    assert item_errors(metrics, "reaper") == 1
    assert sample(metrics, "orbit_engine_errors_total", loop="reaper") == 0
    assert pulse.state(good.task_id) == "WAITING" and pulse.state(bad.task_id) == "LEASED"
    assert f"task {bad.task_id}" in caplog.text
    monkeypatch.setattr(expiry, "lapse_attempt", real)
    assert reaper.reaper_pass(pulse.engine, metrics, namespace=pulse.namespace).leases_lapsed == 1


# --- Weave -----------------------------------------------------------------------------------


def test_the_inbox_loop_counts_a_row_it_fails_on_and_consumes_the_others(
    weave: WeaveDriver, caplog: pytest.LogCaptureFixture
) -> None:
    weave.publish("two", TWO_STEPS)
    good, bad = weave.start_workflow("two"), weave.start_workflow("two")
    finish_first(weave, good)
    poisoned = poison_outcome(weave, bad)
    metrics = Metrics(weave.engine)
    woken: list[tuple[str, str, str]] = []

    report = weave_inbox.inbox_pass(
        weave.engine,
        metrics,
        lambda *target: woken.append(target),
        workers=1,
        namespace=weave.namespace,
    )

    assert report.errors == 1 and item_errors(metrics, "weave-inbox") == 1
    assert weave.step_states(good)["second"] == "ACTIVE"
    # the good row's new step task wakes one worker that serves it
    assert woken == [(weave.namespace, "default", "test.second")]
    assert f"inbox row {poisoned}" in caplog.text


def test_the_timer_loop_counts_a_workflow_it_fails_on_and_wakes_the_others(
    weave: WeaveDriver, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    weave.publish("nap", {"steps": [{"name": "nap", "sleep": {"seconds": 5}}]})
    good, bad = weave.start_workflow("nap"), weave.start_workflow("nap")
    # The firing itself fails for that one: in its set, and alone after it.
    monkeypatch.setattr(
        firing, "fire_due", failing_for(firing.fire_due, lambda ctx: ctx.instance.id == bad)
    )
    weave.advance(6)
    metrics = Metrics(weave.engine)

    report = weave_timers.timers_pass(
        weave.engine, metrics, lambda ns: None, workers=1, namespace=weave.namespace
    )

    assert report.errors == 1 and item_errors(metrics, "weave-timers") == 1
    assert weave.instance(good).state == "SUCCEEDED"
    assert weave.step_states(bad) == {"nap": "ACTIVE"}
    assert f"timers of workflow {bad}" in caplog.text


# --- webhook deliveries ----------------------------------------------------------------------


class Receiver:
    """An HTTP receiver for the sender (httpx's transport for tests): answers 204."""

    def __init__(self) -> None:
        self.received: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.received.append(json.loads(request.content)["id"])
        return httpx.Response(204)


@pytest.fixture
def secrets_dir(tmp_path: Path, pulse: PulseDriver) -> Path:
    """The secrets directory; the namespace's own folder holds ``hook-secret``."""
    (tmp_path / pulse.namespace).mkdir()
    secret = "whsec_" + base64.b64encode(b"k" * 32).decode()
    (tmp_path / pulse.namespace / "hook-secret").write_text(secret)
    return tmp_path


@pytest.fixture
def receiver() -> Receiver:
    return Receiver()


@pytest.fixture
def sender(
    pulse: PulseDriver, secrets_dir: Path, receiver: Receiver
) -> Iterator[deliveries.WebhookSender]:
    metrics = Metrics(pulse.engine)
    webhook_sender = deliveries.WebhookSender(
        pulse.engine,
        metrics,
        secrets_dir,
        egress=EgressPolicy.parse(["127.0.0.0/8"]),  # the driver's URLs are on loopback
        transport=httpx.MockTransport(receiver),
    )
    yield webhook_sender
    webhook_sender.close()


def test_the_sender_counts_a_delivery_it_fails_on_and_sends_the_others(
    delivery: DeliveryDriver,
    sender: deliveries.WebhookSender,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for name in ("alpha", "beta"):
        delivery.subscribe(name, "push")
    delivery.succeeded_task()
    (bad,) = delivery.deliveries("alpha")
    monkeypatch.setattr(
        deliveries,
        "record_push_result",
        failing_for(
            deliveries.record_push_result,
            lambda conn, item, error: item.delivery_id == bad.id,
        ),
    )

    report = sender.run_pass(namespace=delivery.namespace)

    assert report.errors == 1 and item_errors(sender.metrics, "deliveries") == 1
    assert [d.state for d in delivery.deliveries("beta")] == ["DELIVERED"]
    assert len(receiver.received) == 2, "both were sent; recording alpha's answer failed"
    assert f"delivery {bad.id}" in caplog.text


def _set_subscription(delivery: DeliveryDriver, name: str, **values: str) -> None:
    delivery.pulse.tx(
        lambda c: c.execute(
            subscriptions.update()
            .where(subscriptions.c.namespace == delivery.namespace, subscriptions.c.name == name)
            .values(**values)
        )
    )


def test_a_receiver_that_cannot_be_addressed_is_a_failed_attempt_and_stops_no_one(
    delivery: DeliveryDriver,
    sender: deliveries.WebhookSender,
    receiver: Receiver,
    secrets_dir: Path,
) -> None:
    """A URL the HTTP client cannot parse (stored before URLs were checked) and a secret that
    is not a readable file each fail their own attempts — retried, then parked — instead of
    ending the pass before later subscriptions are served."""
    for name in ("a-bad-url", "b-bad-secret", "c-fine"):
        delivery.subscribe(name, "push", max_attempts=1)
    _set_subscription(delivery, "a-bad-url", url="http://[::1/hook")
    (secrets_dir / delivery.namespace / "a-directory").mkdir()
    _set_subscription(delivery, "b-bad-secret", secret_ref="a-directory")
    delivery.succeeded_task()

    report = sender.run_pass(namespace=delivery.namespace)

    assert report.errors == 0 and item_errors(sender.metrics, "deliveries") == 0
    assert [d.state for d in delivery.deliveries("c-fine")] == ["DELIVERED"]
    for name in ("a-bad-url", "b-bad-secret"):
        (parked,) = delivery.deliveries(name)
        assert parked.state == "PARKED", name
    (bad_url,) = delivery.deliveries("a-bad-url")
    assert "InvalidURL" in bad_url.last_error


# --- a whole pass ----------------------------------------------------------------------------


def test_a_pass_that_fails_as_a_whole_is_counted_and_the_loop_goes_on() -> None:
    registry_metrics = Metrics(sa.create_engine("sqlite://"))
    passes: list[int] = []

    def run_pass() -> None:
        passes.append(len(passes))
        if len(passes) == 1:
            raise RuntimeError("the database is unreachable")

    loop = EngineLoop(
        "reaper",
        run_pass,
        interval=0.01,
        on_error=lambda name: registry_metrics.engine_errors.labels(name).inc(),
    )
    loop.start()
    deadline = time.monotonic() + 10
    while len(passes) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    loop.stop()
    assert len(passes) >= 2, "the loop ran again after the failed pass"
    assert sample(registry_metrics, "orbit_engine_errors_total", loop="reaper") == 1
