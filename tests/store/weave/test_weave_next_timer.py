"""The timer loop wakes for the next timer (``timers.seconds_to_next_timer``) instead of finding
it up to a poll interval late: the read names the earliest wake time of a running, unpaused
instance that is not backing off, in database time."""

from __future__ import annotations

import functools
import uuid

from orbit_store.weave import service, timers
from orbit_store.weave.start import StartRequest

from ..drivers.weave_driver import WeaveDriver, task_step

#: Seconds past the first retry delay of a failed firing.
RETRY_PAST = timers.RETRY_BASE_SECONDS * 2 + 1


def sleep_then_work(seconds: float) -> dict[str, object]:
    return {
        "steps": [
            {"name": "nap", "sleep": {"seconds": seconds}},
            task_step("work", dependsOn=["nap"]),
        ]
    }


def next_timer(weave: WeaveDriver) -> float | None:
    """Seconds to this namespace's next timer, at the driver's clock."""
    return weave.tx(functools.partial(timers.seconds_to_next_timer, namespace=weave.namespace))


def test_no_timer_gives_none(weave: WeaveDriver) -> None:
    weave.publish("work", {"steps": [task_step("work")]})
    weave.start_workflow("work")

    assert next_timer(weave) is None


def test_a_sleep_gives_the_seconds_to_its_end_and_zero_once_it_is_due(
    weave: WeaveDriver,
) -> None:
    weave.publish("nap", sleep_then_work(60))
    weave.start_workflow("nap")

    ahead = next_timer(weave)
    assert ahead is not None and 0 < ahead <= 60
    weave.advance(40)
    later = next_timer(weave)
    assert later is not None and 0 < later <= 20
    weave.advance(30)
    assert next_timer(weave) == 0, "a due timer is never a negative wait"


def test_the_earliest_of_several_timers_counts(weave: WeaveDriver) -> None:
    weave.publish("long", sleep_then_work(600))
    weave.publish("short", sleep_then_work(30))
    weave.start_workflow("long")
    weave.start_workflow("short")

    ahead = next_timer(weave)
    assert ahead is not None and 0 < ahead <= 30


def test_a_paused_instance_is_left_out(weave: WeaveDriver) -> None:
    weave.publish("nap", sleep_then_work(5))
    wf = weave.start_workflow("nap")
    weave.control("pause", wf)
    weave.advance(10)

    assert next_timer(weave) is None, "its timers fire on resume, not by the loop"


def test_an_instance_backing_off_is_left_out_until_its_retry(weave: WeaveDriver) -> None:
    weave.publish("nap", sleep_then_work(5))
    wf = weave.start_workflow("nap")
    weave.quota("full", max_waiting=0)  # the next step's task is refused: the firing fails
    weave.advance(10)
    assert weave.wake().errors == 1

    assert weave.instance(wf).timer_retry_at is not None
    assert next_timer(weave) is None, "a failing firing does not make the loop spin"
    weave.advance(RETRY_PAST)
    assert next_timer(weave) == 0, "due again at its retry time"


def test_a_start_that_sets_a_timer_says_so_and_one_that_does_not_stays_quiet(
    weave: WeaveDriver,
) -> None:
    """The report's ``timer_sooner`` is what wakes the server's timer loop."""
    weave.publish("nap", sleep_then_work(30))
    weave.publish("work", {"steps": [task_step("work")]})

    _, napping = service.start(weave.engine, _request(weave, "nap"))
    _, working = service.start(weave.engine, _request(weave, "work"))

    assert napping.timer_sooner and not working.timer_sooner


def _request(weave: WeaveDriver, definition: str) -> StartRequest:
    return StartRequest(
        namespace=weave.namespace,
        definition=definition,
        start_key=str(uuid.uuid4()),
        input={},
        started_by="tester",
    )
