"""`orbit admin verify` finds broken workflow invariants: each check is shown failing on a state
made by hand that the engine itself never produces."""

from __future__ import annotations

import sqlalchemy as sa

from orbit_store.pulse.model import Outcome
from orbit_store.pulse.submit.accept import SubmitRequest, submit_task
from orbit_store.recovery.verify import verify
from orbit_store.schema import execution_gates, workflow_inbox, workflow_instances, workflow_steps

from ..drivers.weave_driver import WeaveDriver, task_step

FLOW = {"steps": [task_step("a"), task_step("b", dependsOn=["a"])]}


def violations(weave: WeaveDriver) -> dict[str, int]:
    with weave.engine.connect() as conn:
        report = verify(conn, weave.namespace)
    return {name: c.violations for name, c in report.checks.items() if c.violations}


def started(engine: sa.Engine) -> tuple[WeaveDriver, str]:
    weave = WeaveDriver(engine)
    weave.publish("flow", FLOW)
    return weave, weave.start_workflow("flow")


def test_a_clean_run_has_no_violations(engine: sa.Engine) -> None:
    weave, wf = started(engine)
    weave.run_tasks({"test.a": lambda p: {}, "test.b": lambda p: {}})
    assert weave.instance(wf).state == "SUCCEEDED"
    assert violations(weave) == {}


def test_a_second_task_for_one_activation_is_found_inv9(engine: sa.Engine) -> None:
    weave, wf = started(engine)
    first = weave.task_of(wf, "a")
    extra = SubmitRequest(
        namespace=weave.namespace,
        queue="default",
        handler="test.a",
        workflow_instance_id=wf,
        workflow_activation_id=first.workflow_activation_id,
    )
    weave.tx(lambda conn: submit_task(conn, extra))
    assert violations(weave) == {"workflow_task_created_twice": 1}


def test_a_lost_outcome_event_and_a_stalled_workflow_are_found_inv9(engine: sa.Engine) -> None:
    weave, wf = started(engine)
    weave.finish_task(weave.task_of(wf, "a").id, Outcome.SUCCEEDED)
    weave.tx(
        lambda conn: conn.execute(workflow_inbox.delete().where(workflow_inbox.c.instance_id == wf))
    )
    assert violations(weave) == {"workflow_outcome_not_delivered": 1}
    weave.tx(
        lambda conn: conn.execute(
            workflow_steps.update()
            .where(workflow_steps.c.instance_id == wf, workflow_steps.c.name == "a")
            .values(state="SUCCEEDED")
        )
    )
    assert violations(weave) == {"workflow_outcome_not_delivered": 1, "workflow_stalled": 1}


def test_a_paused_workflow_with_an_open_gate_is_found_inv12(engine: sa.Engine) -> None:
    weave, wf = started(engine)
    weave.control("pause", wf)
    gate_id = weave.instance(wf).gate_id
    weave.tx(
        lambda conn: conn.execute(
            execution_gates.update().where(execution_gates.c.id == gate_id).values(allowed=True)
        )
    )
    # Pulse's own check sees the same corruption: the gate's task waits as if it were closed.
    assert violations(weave) == {"workflow_paused_gate_mismatch": 1, "path_contradicts_gate": 1}


def test_a_resumed_workflow_with_an_unapplied_continuation_is_found_inv12(
    engine: sa.Engine,
) -> None:
    weave, wf = started(engine)
    (grant,) = weave.claim()
    weave.start(grant)
    weave.control("pause", wf)
    weave.succeed(grant, {})
    weave.consume()
    assert violations(weave) == {}, "paused with its continuation: fine"
    weave.tx(
        lambda conn: conn.execute(
            workflow_instances.update().where(workflow_instances.c.id == wf).values(paused=False)
        )
    )
    found = violations(weave)
    assert found["workflow_continuation_left_behind"] == 1
