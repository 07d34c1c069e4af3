"""Bounded polling (seed §5 "查询下一轮", invariant 11): a task per round, persisted rounds with
a UNIQUE number, a budget that restarts, pause/resume and task retries never reset."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orbit_store.weave import definitions
from orbit_store.weave.inbox import Due, consume

from ..drivers.weave_driver import WeaveDriver, task_step


def poll_spec(max_rounds: int = 3, **extra: Any) -> dict[str, Any]:
    return {
        "steps": [
            {
                "name": "shipment",
                "poll": {
                    "handler": "test.track",
                    "params": {"parcel": "${input.parcel}", "round": "${round}"},
                    "until": "result.status == 'delivered'",
                    "intervalSeconds": 10,
                    "maxRounds": max_rounds,
                    **extra,
                },
            },
            task_step("invoice", dependsOn=["shipment"]),
        ]
    }


def statuses(*answers: str) -> Callable[[Any], Any]:
    replies = iter(answers)
    return lambda params: {"status": next(replies), "round": params["round"]}


def poll_round(weave: WeaveDriver, handler: Callable[[Any], Any]) -> None:
    """Let the interval pass, fire the timer, run the round's task and consume its outcome."""
    weave.advance(10)
    weave.wake()
    weave.run_tasks({"test.track": handler, "test.invoice": lambda p: {}})


def test_polls_round_by_round_until_the_condition_holds(weave: WeaveDriver) -> None:
    weave.publish("track", poll_spec(max_rounds=5))
    wf = weave.start_workflow("track", {"parcel": "P1"})
    handler = statuses("in transit", "in transit", "delivered")
    weave.run_tasks({"test.track": handler})
    assert weave.step_states(wf)["shipment"] == "ACTIVE"
    assert weave.instance(wf).wake_at is not None, "the next round is a persisted timer"
    poll_round(weave, handler)
    poll_round(weave, handler)
    assert weave.instance(wf).state == "SUCCEEDED"
    rounds = weave.rounds(wf)
    assert [(r.round, r.state) for r in rounds] == [
        (1, "NOT_MATCHED"),
        (2, "NOT_MATCHED"),
        (3, "MATCHED"),
    ]
    assert weave.steps(wf)["shipment"].result == {"status": "delivered", "round": 3}
    assert len({r.task_id for r in rounds}) == 3, "a task per round"


def test_the_next_round_waits_for_its_interval(weave: WeaveDriver) -> None:
    weave.publish("track", poll_spec())
    wf = weave.start_workflow("track", {"parcel": "P1"})
    weave.run_tasks({"test.track": statuses("in transit")})
    weave.advance(9)
    weave.wake()
    assert len(weave.rounds(wf)) == 1


def test_max_rounds_is_never_exceeded_inv11(weave: WeaveDriver) -> None:
    weave.publish("track", poll_spec(max_rounds=2))
    wf = weave.start_workflow("track", {"parcel": "P1"})
    never = statuses(*["in transit"] * 10)
    weave.run_tasks({"test.track": never})
    for _ in range(4):
        poll_round(weave, never)
    assert len(weave.rounds(wf)) == 2
    (activation,) = weave.activations(wf, "shipment")
    assert (activation.rounds_used, activation.max_rounds) == (2, 2)
    row = weave.instance(wf)
    assert row.state == "FAILED"
    assert "no match after 2 rounds" in row.error["error"]["message"]


def test_the_deadline_ends_polling_inv11(weave: WeaveDriver) -> None:
    weave.publish("track", poll_spec(max_rounds=100, deadlineSeconds=25))
    wf = weave.start_workflow("track", {"parcel": "P1"})
    never = statuses(*["in transit"] * 10)
    weave.run_tasks({"test.track": never})
    poll_round(weave, never)  # round 2 at +10 s
    poll_round(weave, never)  # round 3 at +20 s; a 4th would start at +30 s, after the deadline
    poll_round(weave, never)
    assert len(weave.rounds(wf)) == 3
    row = weave.instance(wf)
    assert row.state == "FAILED"
    assert "deadline" in row.error["error"]["message"]


def test_task_retries_inside_a_round_do_not_spend_rounds_inv11(weave: WeaveDriver) -> None:
    weave.publish("track", poll_spec(max_rounds=2))
    wf = weave.start_workflow("track", {"parcel": "P1"})
    (grant,) = weave.claim()
    weave.start(grant)
    weave.fail(grant, retryable=True)
    weave.advance(5)  # the queue's backoff
    weave.run_tasks({"test.track": statuses("in transit")})
    (round_1,) = weave.rounds(wf)
    assert round_1.state == "NOT_MATCHED"
    assert len(weave.attempts(round_1.task_id)) == 2, "two attempts, one round"
    assert weave.activations(wf, "shipment")[0].rounds_used == 1


def test_the_budget_survives_pause_and_resume_inv11(weave: WeaveDriver) -> None:
    weave.publish("track", poll_spec(max_rounds=2))
    wf = weave.start_workflow("track", {"parcel": "P1"})
    never = statuses(*["in transit"] * 10)
    weave.run_tasks({"test.track": never})
    weave.control("pause", wf)
    weave.advance(60)
    weave.wake()
    assert len(weave.rounds(wf)) == 1, "no round while paused"
    weave.control("resume", wf)
    weave.consume()  # the resume's deferred advance
    assert len(weave.rounds(wf)) == 2, "the due round starts on resume"
    weave.control("pause", wf)
    weave.control("resume", wf)
    poll_round(weave, never)
    poll_round(weave, never)
    assert len(weave.rounds(wf)) == 2, "resuming never refills the budget"
    assert weave.instance(wf).state == "FAILED"


def test_the_budget_survives_a_restart_mid_round_inv11(weave: WeaveDriver) -> None:
    """Everything Weave knows is in the database: after a restart (connections and caches
    gone) the round in flight completes and the next round is round 2 — once, however many
    replicas fire the same timer."""
    weave.publish("track", poll_spec(max_rounds=3))
    wf = weave.start_workflow("track", {"parcel": "P1"})
    (grant,) = weave.claim()
    weave.start(grant)
    weave.base_engine.dispose()  # the old server's connections are gone …
    definitions._versions.clear()  # … and so is its memory
    weave.succeed(grant, {"status": "in transit"})
    weave.consume()
    weave.advance(10)
    weave.wake()
    weave.wake()  # a second replica firing the same timer
    assert [r.round for r in weave.rounds(wf)] == [1, 2]
    assert weave.activations(wf, "shipment")[0].rounds_used == 2


def test_a_duplicate_delivery_of_a_round_result_starts_no_extra_round_inv9(
    weave: WeaveDriver,
) -> None:
    weave.publish("track", poll_spec(max_rounds=3, intervalSeconds=0))
    wf = weave.start_workflow("track", {"parcel": "P1"})
    (grant,) = weave.claim()
    weave.start(grant)
    weave.succeed(grant, {"status": "in transit"})
    (message,) = weave.inbox(wf)
    due = Due(message.id, message.namespace, message.instance_id)
    for _ in range(3):
        weave.tx(
            lambda c: consume(
                c, namespace=due.namespace, instance_id=due.instance_id, inbox_id=due.id
            )
        )
    weave.wake()
    weave.wake()
    assert [r.round for r in weave.rounds(wf)] == [1, 2]
    assert [m.state for m in weave.inbox(wf)] == ["CONSUMED"]
