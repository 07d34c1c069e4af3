"""Invariant 8 for schedules and workflows changed through the API (the resources' own changes
are in tests/reconcile/test_apply_audit.py and tests/operator/test_operator_audit.py): each
change appends its audit row in its own transaction — rolled back together, committed together
— and a change that changes nothing appends none."""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

from orbit_store.audit import AuditQuery, list_audit
from orbit_store.schedules import declare
from orbit_store.schedules.queries import get_schedule
from orbit_store.weave import control
from orbit_store.weave.definitions import get_definition, publish_audited
from orbit_store.weave.dsl.spec import parse

from ..drivers.schedule_driver import ScheduleDriver
from ..drivers.weave_driver import WeaveDriver
from ..weave.test_weave_signals import APPROVAL
from .test_audit import assert_audited_with_the_change


def audit_rows(driver: ScheduleDriver | WeaveDriver, resource_id: str) -> list[Any]:
    query = AuditQuery(namespace=driver.namespace, resource_id=resource_id, newest_first=False)
    pulse = driver.pulse if isinstance(driver, ScheduleDriver) else driver
    return pulse.tx(lambda c: list_audit(c, query, limit=100))


# --- schedules -------------------------------------------------------------------------------


def schedule_state(schedules: ScheduleDriver) -> tuple[int, bool] | None:
    """(version, suspended) of schedule "nightly", or None."""
    with schedules.pulse.engine.connect() as conn:
        view = get_schedule(conn, schedules.namespace, "nightly")
    return None if view is None else (view.version, view.spec.suspended)


def schedule_work(schedules: ScheduleDriver, function: Any, **kw: Any) -> Any:
    return functools.partial(
        function, namespace=schedules.namespace, actor="ops@example.com", reason="ticket 7", **kw
    )


def test_creating_a_schedule_is_audited_with_the_change(schedules: ScheduleDriver) -> None:
    create = schedule_work(schedules, declare.create_schedule, spec=schedules.spec("nightly"))
    assert_audited_with_the_change(
        schedules.pulse, "schedule.create", create, lambda: schedule_state(schedules) is not None
    )
    (row,) = audit_rows(schedules, "nightly")
    assert (row.actor, row.reason, row.resource_kind, row.resource_version) == (
        "ops@example.com",
        "ticket 7",
        "Schedule",
        1,
    )
    assert row.before is None and row.after["fields"]["cron"] == "* * * * *"


def test_updating_a_schedule_is_audited_with_the_change(schedules: ScheduleDriver) -> None:
    schedules.create("nightly")
    spec = replace(schedules.get("nightly").spec, cron="0 3 * * *")
    update = schedule_work(schedules, declare.update_schedule, spec=spec)
    assert_audited_with_the_change(
        schedules.pulse, "schedule.update", update, lambda: schedule_state(schedules) == (2, False)
    )
    row = audit_rows(schedules, "nightly")[-1]
    assert row.before["fields"]["cron"] == "* * * * *"
    assert (row.after["fields"]["cron"], row.after["changed"]) == ("0 3 * * *", ["cron", "version"])


def test_suspending_and_resuming_a_schedule_are_audited_with_the_change(
    schedules: ScheduleDriver,
) -> None:
    schedules.create("nightly")
    suspend = schedule_work(schedules, declare.set_suspended, name="nightly", suspended=True)
    assert_audited_with_the_change(
        schedules.pulse, "schedule.suspend", suspend, lambda: schedule_state(schedules) == (2, True)
    )
    resume = schedule_work(schedules, declare.set_suspended, name="nightly", suspended=False)
    assert_audited_with_the_change(
        schedules.pulse, "schedule.resume", resume, lambda: schedule_state(schedules) == (3, False)
    )


def test_deleting_a_schedule_is_audited_with_the_change(schedules: ScheduleDriver) -> None:
    schedules.create("nightly")
    delete = schedule_work(schedules, declare.delete_schedule, name="nightly")
    assert_audited_with_the_change(
        schedules.pulse, "schedule.delete", delete, lambda: schedule_state(schedules) is None
    )
    row = audit_rows(schedules, "nightly")[-1]
    assert row.before["fields"]["cron"] == "* * * * *" and row.after is None


def test_a_schedule_change_that_changes_nothing_is_not_audited(schedules: ScheduleDriver) -> None:
    schedules.create("nightly")
    schedules.update("nightly")  # the same spec
    schedules.suspend("nightly", suspended=False)  # not suspended already
    assert [r.action for r in audit_rows(schedules, "nightly")] == ["schedule.create"]


# --- workflows -------------------------------------------------------------------------------


def latest_version(weave: WeaveDriver, name: str) -> int | None:
    with weave.engine.connect() as conn:
        info = get_definition(conn, weave.namespace, name)
    return None if info is None else info.latest_version


def test_publishing_a_workflow_definition_is_audited_with_the_change(weave: WeaveDriver) -> None:
    publish = functools.partial(
        publish_audited,
        namespace=weave.namespace,
        name="article",
        spec=parse(APPROVAL),
        actor="ops@example.com",
        reason="approval step",
    )
    assert_audited_with_the_change(
        weave, "workflowdefinition.publish", publish, lambda: latest_version(weave, "article") == 1
    )
    weave.tx(publish)  # the same spec again: no new version, no audit row
    (row,) = audit_rows(weave, "article")
    assert (row.resource_kind, row.resource_version, row.reason) == (
        "WorkflowDefinition",
        1,
        "approval step",
    )
    with weave.engine.connect() as conn:
        info = get_definition(conn, weave.namespace, "article")
    assert info is not None
    assert row.after["fields"]["digest"] == info.versions[0].digest, "what was published"


def workflow_state(weave: WeaveDriver, instance_id: str) -> tuple[str, bool]:
    instance = weave.instance(instance_id)
    return instance.state, bool(instance.paused)


def control_work(weave: WeaveDriver, action: str, instance_id: str) -> Any:
    return functools.partial(
        getattr(control, f"{action}_workflow"),
        namespace=weave.namespace,
        instance_id=instance_id,
        actor="ops@example.com",
        reason="incident 12",
    )


def test_pausing_and_resuming_a_workflow_are_audited_with_the_change(weave: WeaveDriver) -> None:
    weave.publish("article", APPROVAL)
    wf = weave.start_workflow("article")
    assert_audited_with_the_change(
        weave,
        "workflow.pause",
        control_work(weave, "pause", wf),
        lambda: workflow_state(weave, wf) == ("RUNNING", True),
    )
    assert_audited_with_the_change(
        weave,
        "workflow.resume",
        control_work(weave, "resume", wf),
        lambda: workflow_state(weave, wf) == ("RUNNING", False),
    )


def test_cancelling_a_workflow_is_audited_with_the_change(weave: WeaveDriver) -> None:
    weave.publish("article", APPROVAL)
    wf = weave.start_workflow("article")
    assert_audited_with_the_change(
        weave,
        ["workflow.cancel", "task.cancel"],  # its open step's task, by Pulse's rules
        control_work(weave, "cancel", wf),
        lambda: workflow_state(weave, wf)[0] == "CANCELLED",
    )
    (row,) = audit_rows(weave, wf)
    assert (row.actor, row.reason, row.before["state"]) == (
        "ops@example.com",
        "incident 12",
        "RUNNING",
    )
    weave.consume()  # the cancelled task's outcome, for verify at teardown
