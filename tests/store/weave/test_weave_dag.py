"""Weave's DAG: steps start when their dependencies settle, parallel branches join, `when` and
failure policies decide what runs (ORBIT.md §8; docs/concepts/workflows.md)."""

from __future__ import annotations

from typing import Any

import pytest

from orbit_store.pulse.model import Outcome

from ..drivers.weave_driver import WeaveDriver, task_step

DIAMOND = {
    "steps": [
        task_step("reserve", params={"order": "${input.order}"}),
        task_step("charge", dependsOn=["reserve"], params={"amount": "${input.amount}"}),
        task_step("pack", dependsOn=["reserve"]),
        task_step(
            "ship",
            dependsOn=["charge", "pack"],
            params={"label": "${steps.pack.result.box} for ${string(input.order)}"},
        ),
    ]
}


def echo(params: Any) -> Any:
    return {"echo": params}


HANDLERS = {
    "test.reserve": echo,
    "test.charge": echo,
    "test.pack": lambda params: {"box": "B7"},
    "test.ship": echo,
}


def open_steps(weave: WeaveDriver, wf: str) -> set[str]:
    return {name for name, state in weave.step_states(wf).items() if state == "ACTIVE"}


def test_start_creates_only_the_first_steps_task(weave: WeaveDriver) -> None:
    weave.publish("order", DIAMOND)
    wf = weave.start_workflow("order", {"order": 7, "amount": 30})
    assert weave.step_states(wf) == {
        "reserve": "ACTIVE",
        "charge": "PENDING",
        "pack": "PENDING",
        "ship": "PENDING",
    }
    (task,) = weave.tasks_of(wf)
    assert (task.handler, task.params, task.state) == ("test.reserve", {"order": 7}, "WAITING")
    assert task.gate_id == weave.instance(wf).gate_id


def test_parallel_branches_run_together_and_join(weave: WeaveDriver) -> None:
    weave.publish("order", DIAMOND)
    wf = weave.start_workflow("order", {"order": 7, "amount": 30})
    weave.finish_task(weave.task_of(wf, "reserve").id, Outcome.SUCCEEDED)
    weave.consume()
    assert open_steps(weave, wf) == {"charge", "pack"}, "both branches start at once"
    weave.run_tasks(HANDLERS)
    row = weave.instance(wf)
    assert row.state == "SUCCEEDED"
    assert weave.task_of(wf, "ship").params == {"label": "B7 for 7"}
    assert row.output["charge"] == {"echo": {"amount": 30}}
    assert len(weave.tasks_of(wf)) == 4, "one task per step"


def test_when_false_skips_a_step_and_a_branch_with_only_skipped_inputs(
    weave: WeaveDriver,
) -> None:
    weave.publish(
        "gift",
        {
            "steps": [
                task_step("order"),
                task_step("wrap", dependsOn=["order"], when="input.gift"),
                task_step("card", dependsOn=["wrap"]),
                task_step("ship", dependsOn=["order", "card"]),
            ]
        },
    )
    wf = weave.start_workflow("gift", {"gift": False})
    weave.run_tasks({f"test.{n}": echo for n in ("order", "wrap", "card", "ship")})
    assert weave.step_states(wf) == {
        "order": "SUCCEEDED",
        "wrap": "SKIPPED",
        "card": "SKIPPED",
        "ship": "SUCCEEDED",
    }
    assert weave.instance(wf).state == "SUCCEEDED"


def fail(params: Any) -> Any:
    raise RuntimeError("card declined")


def test_a_failed_step_fails_the_workflow_and_cancels_what_is_open(weave: WeaveDriver) -> None:
    weave.publish("order", DIAMOND)
    wf = weave.start_workflow("order", {"order": 1, "amount": 5})
    weave.run_tasks({**HANDLERS, "test.charge": fail})
    row = weave.instance(wf)
    assert row.state == "FAILED"
    assert row.error["step"] == "charge"
    assert weave.step_states(wf)["ship"] == "CANCELLED"


def test_on_failure_continue_lets_dependents_run(weave: WeaveDriver) -> None:
    weave.publish(
        "notify",
        {
            "steps": [
                task_step("sms", onFailure="continue"),
                task_step(
                    "log",
                    dependsOn=["sms"],
                    params={"sms": "${steps.sms.state}"},
                ),
            ]
        },
    )
    wf = weave.start_workflow("notify")
    weave.run_tasks({"test.sms": fail, "test.log": echo})
    assert weave.instance(wf).state == "SUCCEEDED"
    assert weave.task_of(wf, "log").params == {"sms": "FAILED"}


def test_an_input_value_cel_cannot_hold_fails_the_step_that_uses_it_saying_why(
    weave: WeaveDriver,
) -> None:
    """CEL integers are 64-bit; JSON's are not. A template over an integer beyond that range
    fails its step as any template that cannot be evaluated does, never the request."""
    weave.publish("order", DIAMOND)
    wf = weave.start_workflow("order", {"order": 10**30, "amount": 5})
    row = weave.instance(wf)
    assert row.state == "FAILED"
    assert row.error["step"] == "reserve" and "range" in str(row.error)


@pytest.mark.parametrize("expression", ["1.0/0.0", 'double("NaN")'])
def test_a_template_that_yields_a_non_json_number_fails_its_step_saying_why(
    weave: WeaveDriver, expression: str
) -> None:
    """CEL has infinities and NaN; JSON, and so the store, has not. Such params fail the step as
    a template error — never a task the database refuses, retried by the inbox for ever."""
    weave.publish("calc", {"steps": [task_step("divide", params={"x": f"${{{expression}}}"})]})
    wf = weave.start_workflow("calc", {})
    row = weave.instance(wf)
    assert row.state == "FAILED"
    assert row.error["step"] == "divide" and "JSON" in str(row.error), row.error
    assert weave.tasks_of(wf) == []
