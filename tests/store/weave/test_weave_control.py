"""Pause, resume and cancel (seed §5 "流程暂停 / 继续", invariant 12): the instance's control
version and its execution gate move together; in-flight results are recorded while paused and
applied on resume through continuation records; cancel follows Pulse's cancellation rules."""

from __future__ import annotations

import pytest

from orbit_store.errors import Conflict
from orbit_store.pulse.model import LeaseGrant, Outcome

from ..drivers.weave_driver import WeaveDriver, task_step

FLOW = {
    "steps": [
        task_step("fetch"),
        task_step("audit"),
        task_step("store", dependsOn=["fetch"]),
    ]
}
ECHO = {f"test.{n}": (lambda p: {"ok": True}) for n in ("fetch", "audit", "store")}


def grant_for(weave: WeaveDriver, wf: str, step: str) -> LeaseGrant:
    """Claim everything due and return the grant of ``step``'s task (others released)."""
    wanted = weave.task_of(wf, step).id
    found = None
    for grant in weave.claim(limit=100):
        if grant.task_id == wanted:
            found = grant
        else:
            weave.complete(grant, Outcome.RELEASED)
    assert found is not None, f"{step} was not granted"
    return found


def test_pause_closes_the_gate_and_moves_both_control_versions_together_inv12(
    weave: WeaveDriver,
) -> None:
    weave.publish("flow", FLOW)
    wf = weave.start_workflow("flow")
    result = weave.control("pause", wf)
    assert (result.paused, result.changed, result.control_version) == (True, True, 2)
    gate = weave.gate(wf)
    assert (gate.allowed, gate.control_version) == (False, 2)
    assert weave.instance(wf).control_version == 2
    assert weave.control("pause", wf).changed is False, "pausing twice changes nothing"
    assert weave.claim(limit=100) == [], "no grants while paused"
    resumed = weave.control("resume", wf)
    assert (resumed.paused, resumed.control_version) == (False, 3)
    assert (weave.gate(wf).allowed, weave.gate(wf).control_version) == (True, 3)
    assert len(weave.claim(limit=100)) == 2


def test_pause_with_a_task_in_flight_records_its_result_and_resume_continues_inv12(
    weave: WeaveDriver,
) -> None:
    weave.publish("flow", FLOW)
    wf = weave.start_workflow("flow")
    running = grant_for(weave, wf, "fetch")
    assert weave.start(running).started
    weave.control("pause", wf)
    weave.succeed(running, {"page": 1})  # in flight when paused: its result is kept
    weave.consume()
    states = weave.step_states(wf)
    assert states["fetch"] == "SUCCEEDED", "the in-flight result is recorded"
    assert states["store"] == "PENDING", "no follow-up while paused"
    # Both created by the start, in one submission: no order between them.
    assert sorted(t.handler for t in weave.tasks_of(wf)) == ["test.audit", "test.fetch"]
    (message,) = weave.inbox(wf)
    assert message.state == "CONSUMED" and message.outcome.startswith("deferred")
    assert weave.claim(limit=100) == [], "the waiting audit task is not leased while paused"
    weave.control("resume", wf)
    weave.consume()  # the resume's deferred advance
    assert weave.step_states(wf)["store"] == "ACTIVE", "resume applies the continuation"
    weave.run_tasks(ECHO)
    assert weave.instance(wf).state == "SUCCEEDED"
    assert "continuation.recorded:fetch" in weave.history(wf)


def test_a_task_granted_before_pause_cannot_start_after_it_inv12(weave: WeaveDriver) -> None:
    weave.publish("flow", FLOW)
    wf = weave.start_workflow("flow")
    granted = grant_for(weave, wf, "fetch")
    weave.control("pause", wf)
    refused = weave.start(granted)
    assert (refused.started, refused.refusal) == (False, "gate_closed")
    assert weave.state(granted.task_id) == "WAITING", "handed back, not lost"


def test_cancel_cancels_waiting_tasks_and_asks_running_ones_to_stop(weave: WeaveDriver) -> None:
    weave.publish("flow", FLOW)
    wf = weave.start_workflow("flow")
    running = grant_for(weave, wf, "fetch")
    weave.start(running)
    result = weave.control("cancel", wf, reason="customer left")
    assert result.state == "CANCELLED"
    fetch, audit = weave.task_of(wf, "fetch"), weave.task_of(wf, "audit")
    assert (fetch.state, fetch.cancel_requested) == ("RUNNING", True)
    assert audit.state == "CANCELLED"
    assert set(weave.step_states(wf).values()) == {"CANCELLED"}
    weave.complete(running, Outcome.CANCELLED)
    weave.consume()
    assert weave.instance(wf).state == "CANCELLED", "a late outcome changes nothing"
    assert weave.control("cancel", wf).changed is False
    assert [a.action for a in weave.audit(wf)] == ["workflow.cancel"]


def test_a_finished_workflow_cannot_be_paused(weave: WeaveDriver) -> None:
    weave.publish("flow", FLOW)
    wf = weave.start_workflow("flow")
    weave.run_tasks(ECHO)
    with pytest.raises(Conflict, match="only a RUNNING workflow"):
        weave.control("pause", wf)


def test_a_signal_sent_while_paused_is_applied_on_resume_inv12(weave: WeaveDriver) -> None:
    weave.publish(
        "approve",
        {
            "steps": [
                {"name": "approval", "wait": {"signal": "go"}},
                task_step("ship", dependsOn=["approval"]),
            ]
        },
    )
    wf = weave.start_workflow("approve")
    weave.control("pause", wf)
    assert weave.signal(wf, "go").state == "PENDING", "accepted, not applied while paused"
    assert weave.step_states(wf) == {"approval": "ACTIVE", "ship": "PENDING"}
    weave.control("resume", wf)
    assert weave.step_states(wf) == {"approval": "SUCCEEDED", "ship": "PENDING"}
    weave.consume()  # the resume's deferred advance
    assert weave.step_states(wf) == {"approval": "SUCCEEDED", "ship": "ACTIVE"}
