"""A worker's batch of reports on workflow tasks takes Pulse's set path (``complete_set``): the
tasks' outcomes and their Weave inbox rows commit together (invariant 9), the rows in one
INSERT — the statements of a batch do not grow with its size."""

from __future__ import annotations

import pytest

from orbit_store.pulse import batches
from orbit_store.pulse.model import CompletionStatus, Outcome
from orbit_store.weave.outcomes import source_event_id

from ..drivers.sent_statements import sent_statements
from ..drivers.weave_driver import WeaveDriver, task_step

TWO_STEPS = {"steps": [task_step("first"), task_step("second", dependsOn=["first"])]}


def _complete_firsts(weave: WeaveDriver, size: int) -> tuple[list[str], int]:
    ids = [weave.start_workflow("two") for _ in range(size)]
    grants = weave.claim(limit=size, start_handlers=("test.first",))
    assert len(grants) == size
    items = [
        batches.CompletionItem(g.attempt_id, g.token, Outcome.SUCCEEDED, result={"n": 1})
        for g in grants
    ]
    with sent_statements(weave.base_engine) as sent:
        results = batches.run_batch(
            weave.engine, batches.complete_attempts, namespace=weave.namespace, items=items
        )
    assert {r.status for r in results.values()} == {CompletionStatus.APPLIED}  # type: ignore[union-attr]
    return ids, len(sent)


def test_a_batch_of_workflow_task_reports_writes_each_outcome_once_inv9(
    weave: WeaveDriver,
) -> None:
    weave.publish("two", TWO_STEPS)
    ids, _ = _complete_firsts(weave, 4)
    for wf in ids:
        task = weave.task_of(wf, "first")
        (message,) = weave.inbox(wf)
        assert message.source_event_id == source_event_id(task.id, task.state_version)
        assert (message.state, message.kind, message.task_id) == (
            "PENDING",
            "task.succeeded",
            task.id,
        )
        assert message.payload == {"state": "SUCCEEDED", "result": {"n": 1}, "error": None}
    weave.consume()
    assert all(weave.step_states(wf)["second"] == "ACTIVE" for wf in ids)


@pytest.mark.mariadb_only
def test_the_statements_of_a_batch_of_workflow_reports_do_not_grow(weave: WeaveDriver) -> None:
    weave.publish("two", TWO_STEPS)
    counts = {size: _complete_firsts(weave, size)[1] for size in (8, 32)}
    assert counts[8] == counts[32], counts
