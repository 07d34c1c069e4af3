"""A signal is never lost to a quota (seed §5 "信号受理": accepting persists the signal's
idempotency record and a pending record; invariant 10): accepting consumes the matching wait and
answers at once, and the follow-up tasks are created by the inbox consumer, which retries while a
quota refuses them. ``resume`` of a paused workflow defers its follow-ups the same way."""

from __future__ import annotations

from ..drivers.weave_driver import WeaveDriver, task_step

WAIT_THEN_SHIP = {
    "steps": [
        {"name": "approval", "wait": {"signal": "approved"}},
        task_step("ship", dependsOn=["approval"]),
    ]
}


def test_a_signal_is_accepted_whatever_the_quota_and_advances_when_it_frees(
    weave: WeaveDriver,
) -> None:
    weave.publish("gate", WAIT_THEN_SHIP)
    wf = weave.start_workflow("gate")
    weave.quota("full", max_waiting=0)

    result = weave.signal(wf, "approved", {"by": "ann"}, signal_id="s-1")

    assert (result.state.value, result.consumed_by_step) == ("CONSUMED", "approval")
    assert weave.signal(wf, "approved", {"by": "ann"}, signal_id="s-1").replayed
    assert weave.step_states(wf) == {"approval": "SUCCEEDED", "ship": "PENDING"}
    assert weave.consume().errors == 1, "the quota refuses the next task: retried later"
    (pending,) = [m for m in weave.inbox(wf) if m.state == "PENDING"]
    assert "QuotaExceeded" in pending.last_error
    weave.quota("full", max_waiting=10)
    weave.advance(2)
    weave.consume()
    assert weave.step_states(wf) == {"approval": "SUCCEEDED", "ship": "ACTIVE"}
    weave.run_tasks({"test.ship": lambda params: {"shipped": True}})
    assert weave.instance(wf).state == "SUCCEEDED"


def test_resume_is_accepted_whatever_the_quota_and_advances_when_it_frees(
    weave: WeaveDriver,
) -> None:
    weave.publish("gate", WAIT_THEN_SHIP)
    wf = weave.start_workflow("gate")
    weave.control("pause", wf)
    assert weave.signal(wf, "approved", {"by": "ann"}).state.value == "PENDING"
    weave.quota("full", max_waiting=0)

    assert weave.control("resume", wf).changed

    assert not weave.instance(wf).paused
    assert weave.consume().errors == 1
    weave.quota("full", max_waiting=10)
    weave.advance(2)
    weave.consume()
    assert weave.step_states(wf) == {"approval": "SUCCEEDED", "ship": "ACTIVE"}
