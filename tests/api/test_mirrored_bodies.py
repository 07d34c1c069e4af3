"""Response bodies made from the store's views (orbit/api/schemas/mirror.py): a body has the
store view's fields in its order, the API's descriptions and narrower types, nested views become
their bodies, and a description of a field the store does not have fails at import."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from orbit.api.routes import schedules as schedule_routes
from orbit.api.schemas import fencing as wire_fencing
from orbit.api.schemas import results as wire_results
from orbit.api.schemas import schedules as wire_schedules
from orbit.api.schemas import tasks as wire_tasks
from orbit.api.schemas import views as wire
from orbit.api.schemas import workers as wire_workers
from orbit.api.schemas import workflows as wire_workflows
from orbit.api.schemas.base import Out
from orbit.api.schemas.mirror import mirrors
from orbit_store import audit, fencing, overview
from orbit_store.delivery import model as delivery_model
from orbit_store.pulse import model as pulse_model
from orbit_store.pulse.views import queries as task_views
from orbit_store.pulse.workers import worker_views
from orbit_store.recovery import restore_fence
from orbit_store.schedules import cron, model, trigger
from orbit_store.weave import definitions, queries


@dataclasses.dataclass(frozen=True)
class Part:
    name: str
    at: dt.datetime


@dataclasses.dataclass(frozen=True)
class Whole:
    id: str
    state: str
    parts: list[Part]
    first: Part | None
    internal: int = 0


@mirrors(Part, said={"name": "What it is called."})
class PartBody(Out):
    pass


@mirrors(
    Whole,
    nested=[PartBody],
    types={"state": Literal["OPEN", "SHUT"]},
    omit=["internal"],
)
class WholeBody(Out):
    id: str = Field(..., description="Declared by the API in place of the store's.")
    replayed: bool = Field(False, description="The wire's own.")


def test_a_body_has_the_views_fields_in_order_then_those_it_declares() -> None:
    assert list(WholeBody.model_fields) == ["state", "parts", "first", "id", "replayed"]
    assert PartBody.model_fields["name"].description == "What it is called."
    assert (
        WholeBody.model_fields["id"].description == "Declared by the API in place of the store's."
    )
    assert all(f.is_required() for n, f in WholeBody.model_fields.items() if n != "replayed")


def test_nested_views_become_their_bodies_and_values_come_from_the_store_objects() -> None:
    at = dt.datetime(2026, 1, 2, 3, 4, 5)
    whole = Whole("w1", "OPEN", [Part("p", at)], None, internal=7)
    body = WholeBody.model_validate(whole)
    assert isinstance(body.parts[0], PartBody)
    assert body.model_dump(mode="json") == {
        "id": "w1",
        "state": "OPEN",
        "parts": [{"name": "p", "at": "2026-01-02T03:04:05Z"}],  # Out: naive UTC says so
        "first": None,
        "replayed": False,
    }


def test_a_narrowed_type_is_checked() -> None:
    with pytest.raises(ValueError, match="state"):
        WholeBody.model_validate(Whole("w1", "AJAR", [], None))


def test_a_given_order_sets_the_wires_fields_among_the_stores() -> None:
    @mirrors(Part, order=["kind", "name", "at"])
    class Kinded(Out):
        kind: str

    assert list(Kinded.model_fields) == ["kind", "name", "at"]


def test_an_order_that_misses_a_field_fails_at_import() -> None:
    with pytest.raises(TypeError, match=r"missing \['at'\], unknown \['colour'\]"):

        @mirrors(Part, order=["name", "colour"])
        class _Unordered(Out):
            pass


def test_saying_something_of_a_field_the_store_lacks_fails_at_import() -> None:
    with pytest.raises(TypeError, match="Part has no field colour"):

        @mirrors(Part, said={"colour": "gone from the store"})
        class _Stale(Out):
            pass


@pytest.mark.parametrize(
    ("body", "view"),
    [
        (wire.QueueOverview, overview.QueueOverview),
        (wire.Overview, overview.Overview),
        (wire.WorkerSession, worker_views.SessionView),
        (wire_workflows.DefinitionVersion, definitions.VersionInfo),
        (wire_workflows.Activation, queries.ActivationView),
        (wire_workflows.Step, queries.StepView),
        (wire_workflows.PendingSignal, queries.SignalView),
        (wire_workflows.WorkflowEvent, queries.EventView),
        (wire_schedules.Occurrence, model.OccurrenceView),
        (wire_schedules.Triggered, trigger.Triggered),
        (wire_schedules.PreviewInstant, cron.PreviewInstant),
        (wire_tasks.Attempt, task_views.AttemptView),
        (wire_tasks.TaskEvent, task_views.EventView),
        (wire_workers.HeartbeatResult, pulse_model.RenewResult),
        (wire_fencing.Fence, fencing.RestoreFence),
        (wire_fencing.FenceReport, restore_fence.FenceReport),
        (wire_results.AuditEntry, audit.AuditEntry),
    ],
)
def test_the_views_bodies_carry_exactly_the_store_views_fields(
    body: type[BaseModel], view: type
) -> None:
    assert list(body.model_fields) == [f.name for f in dataclasses.fields(view)]


def test_a_workflow_is_the_stores_instance_view_and_whether_its_start_was_replayed() -> None:
    stored = [f.name for f in dataclasses.fields(queries.InstanceView)]
    assert list(wire_workflows.Workflow.model_fields) == [*stored, "replayed"]


def test_a_task_is_the_stores_task_view_without_its_current_attempt_then_replayed() -> None:
    stored = [f.name for f in dataclasses.fields(task_views.TaskView)]
    stored.remove("current_attempt_id")
    declared = ["waiting_reason", "runnable_by_live_worker"]  # with the wire's descriptions
    expected = [*(n for n in stored if n not in declared), "replayed", *declared]
    assert list(wire_tasks.Task.model_fields) == expected


def test_a_schedule_is_the_stores_view_with_its_spec_flattened_and_its_state() -> None:
    stored = [f.name for f in dataclasses.fields(model.ScheduleView)]
    mirrored = [n for n in wire_schedules.Schedule.model_fields if n in stored]
    assert mirrored == [n for n in stored if n != "spec"]
    declared = [n for n in wire_schedules.Schedule.model_fields if n not in stored]
    assert declared == [*wire_schedules.SPEC_FIELDS, "state"]


def test_a_schedule_body_shows_every_field_of_a_store_view() -> None:
    at = dt.datetime(2026, 1, 2, 3, 4, 5)
    spec = model.ScheduleSpec("nightly", "0 9 * * *", model.TaskTemplate("reports.nightly"))
    occurrence = model.OccurrenceView(
        at, at, 1, at, model.OccurrenceStatus.FIRED, "Scheduled", "", 1, "t1", "SUCCEEDED"
    )
    view = model.ScheduleView(
        "s1", "ns", "nightly", spec, 3, at, None, "api", at, at, 2, [occurrence]
    )
    body = schedule_routes.to_wire(view).model_dump(mode="json")
    assert (body["id"], body["version"], body["active_tasks"], body["state"]) == (
        "s1",
        3,
        2,
        "Active",
    )
    assert (body["cron"], body["suspend"], body["task"]["handler"]) == (
        "0 9 * * *",
        False,
        "reports.nightly",
    )
    assert body["occurrences"][0]["task_state"] == "SUCCEEDED"


def test_a_result_event_is_the_stores_with_its_kind_named_type_second() -> None:
    stored = [f.name for f in dataclasses.fields(delivery_model.ResultEvent)]
    fields = list(wire_results.ResultEvent.model_fields)
    assert fields == ["id", "type", *(n for n in stored if n not in ("id", "kind"))]
