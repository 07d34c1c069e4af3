"""Signals and waits (seed §5 "信号受理 / 消费", invariant 10): accepted idempotently, they
advance only a matching active wait; waits time out into fail, continue or a goto branch."""

from __future__ import annotations

import pytest

from orbit_store.errors import IdempotencyConflict, InvalidRequest

from ..drivers.weave_driver import WeaveDriver, task_step

APPROVAL = {
    "steps": [
        task_step("prepare"),
        {"name": "approval", "dependsOn": ["prepare"], "wait": {"signal": "approved"}},
        task_step(
            "publish",
            dependsOn=["approval"],
            params={"by": "${signals.approved.by}", "step": "${steps.approval.result.payload}"},
        ),
    ]
}
ECHO = {"test.prepare": lambda p: {"ready": True}, "test.publish": lambda p: p}


def test_a_signal_completes_the_active_wait_and_later_steps_see_it(weave: WeaveDriver) -> None:
    weave.publish("article", APPROVAL)
    wf = weave.start_workflow("article")
    weave.run_tasks(ECHO)
    assert weave.step_states(wf)["approval"] == "ACTIVE"
    accepted = weave.signal(wf, "approved", {"by": "ann"})
    assert (accepted.state, accepted.consumed_by_step) == ("CONSUMED", "approval")
    assert weave.step_states(wf) == {
        "prepare": "SUCCEEDED",
        "approval": "SUCCEEDED",
        "publish": "PENDING",
    }
    weave.consume()  # the signal's deferred advance creates the next task
    assert weave.step_states(wf)["publish"] == "ACTIVE"
    weave.run_tasks(ECHO)
    assert weave.instance(wf).state == "SUCCEEDED"
    assert weave.task_of(wf, "publish").params == {"by": "ann", "step": {"by": "ann"}}


def test_a_signal_for_a_wait_that_is_not_active_advances_nothing_inv10(
    weave: WeaveDriver,
) -> None:
    weave.publish("article", APPROVAL)
    wf = weave.start_workflow("article")
    before = weave.step_states(wf)
    accepted = weave.signal(wf, "approved", {"by": "early"})
    assert accepted.state == "PENDING" and accepted.consumed_by_step is None
    assert weave.step_states(wf) == before, "prepare still runs; the wait is not active yet"
    assert len(weave.tasks_of(wf)) == 1
    weave.run_tasks(ECHO)
    assert weave.instance(wf).state == "SUCCEEDED", "the wait took the pending signal later"
    assert [s.state for s in weave.signals(wf)] == ["CONSUMED"]


def test_a_signal_the_definition_never_waits_for_is_refused(weave: WeaveDriver) -> None:
    weave.publish("article", APPROVAL)
    wf = weave.start_workflow("article")
    with pytest.raises(InvalidRequest, match=r"no wait for signal 'aproved'.*approved"):
        weave.signal(wf, "aproved")
    assert weave.signals(wf) == []


def test_the_same_signal_id_is_a_replay_and_other_content_a_conflict(weave: WeaveDriver) -> None:
    weave.publish("article", APPROVAL)
    wf = weave.start_workflow("article")
    first = weave.signal(wf, "approved", {"by": "ann"}, signal_id="s-1")
    again = weave.signal(wf, "approved", {"by": "ann"}, signal_id="s-1")
    assert (first.replayed, again.replayed) == (False, True)
    with pytest.raises(IdempotencyConflict):
        weave.signal(wf, "approved", {"by": "bob"}, signal_id="s-1")
    assert len(weave.signals(wf)) == 1


def timed_wait(on_timeout: str) -> dict[str, object]:
    return {
        "steps": [
            {
                "name": "approval",
                "wait": {"signal": "approved", "timeoutSeconds": 60, "onTimeout": on_timeout},
            },
            task_step("ship", dependsOn=["approval"]),
            task_step("escalate", dependsOn=["approval"]),
        ]
    }


def test_a_wait_that_times_out_fails_the_workflow_by_default(weave: WeaveDriver) -> None:
    weave.publish("timed", timed_wait("fail"))
    wf = weave.start_workflow("timed")
    weave.wake()
    assert weave.step_states(wf)["approval"] == "ACTIVE", "not due yet"
    weave.advance(61)
    weave.wake()
    row = weave.instance(wf)
    assert row.state == "FAILED" and row.error["state"] == "TIMED_OUT"
    assert weave.tasks_of(wf) == []


def test_on_timeout_continue_runs_the_dependents(weave: WeaveDriver) -> None:
    weave.publish("timed", timed_wait("continue"))
    wf = weave.start_workflow("timed")
    weave.advance(61)
    weave.wake()
    assert weave.step_states(wf) == {
        "approval": "TIMED_OUT",
        "ship": "ACTIVE",
        "escalate": "ACTIVE",
    }


def test_on_timeout_goto_takes_only_the_timeout_branch(weave: WeaveDriver) -> None:
    weave.publish("timed", timed_wait("goto escalate"))
    wf = weave.start_workflow("timed")
    weave.advance(61)
    weave.wake()
    assert weave.step_states(wf) == {
        "approval": "TIMED_OUT",
        "ship": "SKIPPED",
        "escalate": "ACTIVE",
    }
    assert weave.signal(wf, "approved").state == "PENDING", "too late: nothing waits any more"
    weave.run_tasks({"test.escalate": lambda p: {}})
    assert weave.instance(wf).state == "SUCCEEDED"
    assert [s.state for s in weave.signals(wf)] == ["EXPIRED"], "unmatched signals expire"


def test_a_signal_in_time_skips_the_goto_branch(weave: WeaveDriver) -> None:
    weave.publish("timed", timed_wait("goto escalate"))
    wf = weave.start_workflow("timed")
    weave.signal(wf, "approved")
    weave.consume()
    assert weave.step_states(wf) == {
        "approval": "SUCCEEDED",
        "ship": "ACTIVE",
        "escalate": "SKIPPED",
    }
    weave.advance(61)
    weave.wake()
    assert weave.step_states(wf)["approval"] == "SUCCEEDED", "a satisfied wait never times out"


def test_a_sleep_wakes_after_its_duration(weave: WeaveDriver) -> None:
    weave.publish(
        "cool-off",
        {
            "steps": [
                {"name": "pause", "sleep": {"seconds": 30}},
                task_step("go", dependsOn=["pause"]),
            ]
        },
    )
    wf = weave.start_workflow("cool-off")
    weave.advance(29)
    weave.wake()
    assert weave.step_states(wf)["pause"] == "ACTIVE"
    weave.advance(2)
    weave.wake()
    assert weave.step_states(wf) == {"pause": "SUCCEEDED", "go": "ACTIVE"}


def test_a_sleep_until_an_instant_from_the_input(weave: WeaveDriver) -> None:
    weave.publish(
        "later",
        {
            "steps": [
                {"name": "wait", "sleep": {"until": "${input.at}"}},
                task_step("go", dependsOn=["wait"]),
            ]
        },
    )
    at = weave.now(100).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    wf = weave.start_workflow("later", {"at": at})
    weave.advance(50)
    weave.wake()
    assert weave.step_states(wf)["wait"] == "ACTIVE"
    weave.advance(51)
    weave.wake()
    assert weave.step_states(wf)["go"] == "ACTIVE"
