"""Review, then retry, resumes a workflow (seed §2 "NEEDS_REVIEW → FAILED" then a manual retry
linked by ``retry_of``; invariants 8 and 10): a step whose task went to review stays parked when
the reviewer settles it as failed, and the retry's successor carries the step — the activation
now waits on the successor, whose outcome continues the workflow."""

from __future__ import annotations

from orbit_store.pulse.model import Outcome

from ..drivers.weave_driver import WeaveDriver, task_step

TWO_STEPS = {"steps": [task_step("charge"), task_step("ship", dependsOn=["charge"])]}
HANDLERS = {"test.charge": lambda p: {"charged": True}, "test.ship": lambda p: {"shipped": True}}


def test_review_then_retry_resumes_the_workflow_inv8(weave: WeaveDriver) -> None:
    weave.publish("order", TWO_STEPS)
    wf = weave.start_workflow("order")
    original = weave.task_of(wf, "charge").id
    weave.finish_task(original, Outcome.UNKNOWN)
    weave.consume()
    assert weave.step_states(wf) == {"charge": "PARKED", "ship": "PENDING"}

    weave.review(original, "failed")
    weave.consume()
    assert weave.step_states(wf) == {"charge": "PARKED", "ship": "PENDING"}, "awaits a retry"
    successor = weave.retry(original).task_id
    weave.consume()

    assert weave.step_states(wf) == {"charge": "ACTIVE", "ship": "PENDING"}
    assert weave.task_of(wf, "charge").id == successor
    assert weave.task(successor).workflow_instance_id == wf
    weave.run_tasks(HANDLERS)
    assert weave.instance(wf).state == "SUCCEEDED"
    assert weave.steps(wf)["charge"].result == {"charged": True}
    assert [t.handler for t in weave.tasks_of(wf)] == ["test.charge", "test.charge", "test.ship"]
