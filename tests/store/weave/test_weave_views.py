"""The instance view (seed §6.3): per step its state, activations and linked task state, and the
explicit difference "task finished, orchestration not yet advanced" with the inbox lag."""

from __future__ import annotations

from orbit_store.pulse.model import Outcome
from orbit_store.weave.queries import InstanceDetail, get_detail, history, list_instances

from ..drivers.weave_driver import WeaveDriver, task_step

FLOW = {
    "steps": [
        task_step("first"),
        {
            "name": "approval",
            "dependsOn": ["first"],
            "wait": {"signal": "go", "timeoutSeconds": 60},
        },
        task_step("last", dependsOn=["approval"]),
    ]
}


def detail(weave: WeaveDriver, wf: str) -> InstanceDetail:
    found = weave.tx(lambda conn: get_detail(conn, weave.namespace, wf))
    assert found is not None
    return found


def test_a_finished_task_not_yet_applied_is_shown_with_the_inbox_lag(weave: WeaveDriver) -> None:
    weave.publish("flow", FLOW)
    wf = weave.start_workflow("flow")
    first = detail(weave, wf).steps[0]
    assert (first.state, first.awaiting_orchestration) == ("ACTIVE", False)
    assert first.detail.endswith("WAITING") and first.activations[0].task_state == "WAITING"
    weave.finish_task(weave.task_of(wf, "first").id, Outcome.SUCCEEDED)
    weave.advance(2)
    view = detail(weave, wf)
    first = view.steps[0]
    assert (first.state, first.activations[0].task_state) == ("ACTIVE", "SUCCEEDED")
    assert first.awaiting_orchestration and first.inbox_lag_seconds is not None
    assert first.inbox_lag_seconds >= 2
    assert first.detail.startswith("task finished (SUCCEEDED), orchestration not yet advanced")
    assert view.inbox_pending == 1 and view.steps[1].detail == "waiting for first"
    weave.consume()
    view = detail(weave, wf)
    assert not view.steps[0].awaiting_orchestration and view.inbox_pending == 0
    assert view.steps[1].detail.startswith("waiting for signal 'go' until ")


def test_parked_and_paused_steps_say_what_to_do(weave: WeaveDriver) -> None:
    weave.publish("flow", FLOW)
    wf = weave.start_workflow("flow")
    weave.finish_task(weave.task_of(wf, "first").id, Outcome.UNKNOWN)
    weave.consume()
    assert detail(weave, wf).steps[0].detail.startswith("parked: task ")
    weave.control("pause", wf)
    view = detail(weave, wf)
    assert view.instance.paused and view.steps[2].detail == "paused: decided after resume"


def test_history_lists_every_event_in_order_and_lists_page(weave: WeaveDriver) -> None:
    weave.publish("flow", FLOW)
    wf = weave.start_workflow("flow")
    weave.run_tasks({"test.first": lambda p: {}, "test.last": lambda p: {}})
    weave.signal(wf, "go", {"ok": True})
    weave.run_tasks({"test.last": lambda p: {}})
    events = weave.tx(lambda conn: history(conn, weave.namespace, wf))
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [f"{e.kind}:{e.step_name}" for e in events if e.kind.startswith("step.")] == [
        "step.activated:first",
        "step.succeeded:first",
        "step.activated:approval",
        "step.succeeded:approval",
        "step.activated:last",
        "step.succeeded:last",
    ]
    other = weave.start_workflow("flow")
    page, cursor = weave.tx(lambda conn: list_instances(conn, weave.namespace, limit=1))
    assert [v.id for v in page] == [other] and cursor == other
    rest, end = weave.tx(
        lambda conn: list_instances(conn, weave.namespace, limit=1, before_id=cursor)
    )
    assert [v.id for v in rest] == [wf] and end is None
