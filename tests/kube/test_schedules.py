"""Schedule resources through the operator: the row in MySQL, a new version per spec change,
status (last/next fire, recent occurrences) read back from MySQL, and refusals that name the
field."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from orbit.engines.scheduler import scheduler_pass
from orbit_store.schema import schedules

from .conftest import ORBIT, Kube, orbit_resource, wait_for

pytestmark = pytest.mark.slow

EVERY_SECOND = "* * * * * *"


def schedule_row(engine: sa.Engine, namespace: str, name: str) -> Any:
    with engine.connect() as conn:
        return conn.execute(
            sa.select(schedules).where(schedules.c.namespace == namespace, schedules.c.name == name)
        ).one_or_none()


def test_schedule_lifecycle(kube: Kube, engine: sa.Engine, namespace: str) -> None:
    spec = {"schedule": "0 9 * * MON-FRI", "timeZone": "Europe/Berlin"}
    kube.create(
        orbit_resource("Schedule", namespace, "report", {**spec, "taskTemplate": {"handler": "r"}})
    )

    obj = kube.wait_ready("Schedule", namespace, "report")
    status = obj["status"]
    assert (status["version"], status["state"], status["observedGeneration"]) == (1, "Active", 1)
    assert status["nextScheduleTime"].endswith(":00:00Z")
    assert status["conditions"][0]["message"].startswith("next fire ")
    row = schedule_row(engine, namespace, "report")
    assert (row.cron, row.time_zone, row.source, row.version) == (
        "0 9 * * MON-FRI",
        "Europe/Berlin",
        "operator",
        1,
    )

    kube.patch(ORBIT, "Schedule", namespace, "report", {"spec": {"schedule": EVERY_SECOND}})
    wait_for("version 2", lambda: schedule_row(engine, namespace, "report").version == 2)

    def fired() -> list[dict[str, Any]]:
        scheduler_pass(engine, namespace=namespace)
        occurrences = kube.orbit("Schedule", namespace, "report")["status"].get(
            "recentOccurrences", []
        )
        return [o for o in occurrences if o["status"] == "FIRED"]

    first = wait_for("a fire shown in status", fired)[0]
    assert first["reason"] == "Scheduled" and first["taskId"]
    obj = kube.orbit("Schedule", namespace, "report")
    assert obj["status"]["lastScheduleTime"] and obj["status"]["observedGeneration"] == 2

    kube.patch(ORBIT, "Schedule", namespace, "report", {"spec": {"suspend": True}})
    wait_for(
        "suspended in status",
        lambda: kube.orbit("Schedule", namespace, "report")["status"]["state"] == "Suspended",
    )
    assert "nextScheduleTime" not in kube.orbit("Schedule", namespace, "report")["status"]
    assert schedule_row(engine, namespace, "report").next_fire_at is None

    kube.delete(ORBIT, "Schedule", namespace, "report")
    kube.wait_gone(ORBIT, "Schedule", namespace, "report")
    assert schedule_row(engine, namespace, "report") is None


def test_a_schedule_with_a_bad_expression_is_invalid(
    kube: Kube, engine: sa.Engine, namespace: str
) -> None:
    kube.create(
        orbit_resource(
            "Schedule",
            namespace,
            "typo",
            {"schedule": "0 25 * * *", "taskTemplate": {"handler": "h"}},
        )
    )
    obj = kube.wait_ready("Schedule", namespace, "typo", status="False", reason="InvalidSpec")
    message = obj["status"]["conditions"][0]["message"]
    assert "spec.schedule: '0 25 * * *' is not a valid cron expression (Bad hour)" in message
    assert schedule_row(engine, namespace, "typo") is None
    kube.delete(ORBIT, "Schedule", namespace, "typo")
    kube.wait_gone(ORBIT, "Schedule", namespace, "typo")
