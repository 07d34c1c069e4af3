"""Definitions (invariant 10): validated specs with errors naming the field, immutable versions
with digests, instances bound to the version they started on, idempotent starts."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from orbit_store.errors import Conflict, IdempotencyConflict, InvalidInput, InvalidRequest, NotFound
from orbit_store.weave.definitions import get_definition, publish_definition, retire_definition
from orbit_store.weave.dsl.spec import InvalidDefinition, parse

from ..drivers.weave_driver import WeaveDriver, task_step

V1 = {"steps": [task_step("a"), task_step("b", dependsOn=["a"])]}
V2 = {"steps": [task_step("a"), task_step("b", dependsOn=["a"]), task_step("c", dependsOn=["b"])]}
ALL = {f"test.{n}": (lambda p: {}) for n in "abc"}


def problems(spec: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidDefinition) as caught:
        parse(spec)
    return [str(p) for p in caught.value.problems]


def test_an_unknown_step_in_depends_on_is_named_with_the_steps_there_are() -> None:
    assert problems({"steps": [task_step("a"), task_step("b", dependsOn=["aa"])]}) == [
        "steps[1].dependsOn[0]: unknown step 'aa' (steps are: a, b)"
    ]


def test_a_cycle_is_shown_as_a_path() -> None:
    spec = {
        "steps": [
            task_step("a", dependsOn=["c"]),
            task_step("b", dependsOn=["a"]),
            task_step("c", dependsOn=["b"]),
        ]
    }
    assert problems(spec) == ["steps: dependsOn forms a cycle: a → c → b → a"]


def test_a_wait_without_a_signal_name_is_refused() -> None:
    assert problems({"steps": [{"name": "w", "wait": {"timeoutSeconds": 5}}]}) == [
        "steps[0].wait.signal: Field required"
    ]


def test_bad_cel_is_refused_with_its_field() -> None:
    found = problems({"steps": [task_step("a", when="input.x >", params={"y": "${input.y +}"})]})
    assert [p.split(":")[0] for p in found] == ["steps[0].when", "steps[0].task.params.y"]
    assert "does not compile" in found[0]


def test_a_goto_target_must_depend_on_its_wait() -> None:
    spec = {
        "steps": [
            {"name": "w", "wait": {"signal": "go", "timeoutSeconds": 5, "onTimeout": "goto x"}},
            task_step("x"),
        ]
    }
    assert problems(spec) == [
        "steps[0].wait.onTimeout: the goto target 'x' must list 'w' in its dependsOn "
        "(it is the branch taken when this wait times out)"
    ]


def test_a_step_is_exactly_one_kind() -> None:
    found = problems({"steps": [{"name": "s", "task": {"handler": "h"}, "sleep": {"seconds": 1}}]})
    assert found == [
        "steps[0]: a step is exactly one of task, wait, sleep or poll (this one has task, sleep)"
    ]


def test_step_names_are_cel_identifiers() -> None:
    assert problems({"steps": [task_step("Bad-Name")]}) == [
        "steps[0].name: 'Bad-Name' is not a lowercase CEL identifier (a letter, then letters, "
        "digits or _), which CEL needs to read it as steps.<name> or signals.<name>"
    ]


def test_publishing_the_same_spec_is_a_no_op_and_a_change_is_the_next_version(
    weave: WeaveDriver,
) -> None:
    first = weave.publish("flow", V1)
    again = weave.publish("flow", {"steps": list(reversed(V1["steps"]))[::-1]})
    second = weave.publish("flow", V2)
    assert (first.version, first.changed) == (1, True)
    assert (again.version, again.changed, again.digest) == (1, False, first.digest)
    assert (second.version, second.changed) == (2, True)
    assert second.digest != first.digest


def test_republishing_while_instances_run_leaves_them_on_their_version_inv10(
    weave: WeaveDriver,
) -> None:
    weave.publish("flow", V1)
    old = weave.start_workflow("flow")
    weave.publish("flow", V2)
    new = weave.start_workflow("flow")
    pinned = weave.start_workflow("flow", version=1)
    weave.run_tasks(ALL)
    assert (weave.instance(old).version, set(weave.step_states(old))) == (1, {"a", "b"})
    assert (weave.instance(new).version, set(weave.step_states(new))) == (2, {"a", "b", "c"})
    assert weave.instance(pinned).version == 1
    assert {weave.instance(i).state for i in (old, new, pinned)} == {"SUCCEEDED"}


def test_the_definition_lists_its_versions_with_running_counts(weave: WeaveDriver) -> None:
    weave.publish("flow", V1)
    weave.start_workflow("flow")
    weave.publish("flow", V2)
    info = weave.tx(lambda conn: get_definition(conn, weave.namespace, "flow"))
    assert info is not None
    assert [(v.version, v.running_instances) for v in info.versions] == [(1, 1), (2, 0)]


def test_a_retired_definition_starts_nothing_but_running_instances_finish(
    weave: WeaveDriver,
) -> None:
    weave.publish("flow", V1)
    running = weave.start_workflow("flow")
    still = weave.tx(lambda conn: retire_definition(conn, namespace=weave.namespace, name="flow"))
    assert still == 1
    with pytest.raises(Conflict, match="withdrawn"):
        weave.start_workflow("flow")
    weave.run_tasks(ALL)
    assert weave.instance(running).state == "SUCCEEDED"


def test_starts_are_idempotent_by_start_key(weave: WeaveDriver) -> None:
    weave.publish("flow", V1)
    first = weave.start_workflow("flow", {"x": 1}, key="order-7")
    assert weave.start_workflow("flow", {"x": 1}, key="order-7") == first
    with pytest.raises(IdempotencyConflict):
        weave.start_workflow("flow", {"x": 2}, key="order-7")
    assert len(weave.tasks_of(first)) == 1


def test_input_is_validated_against_the_input_schema(weave: WeaveDriver) -> None:
    schema = {"type": "object", "required": ["order"], "properties": {"order": {"type": "integer"}}}
    weave.publish("flow", {**V1, "inputSchema": schema})
    with pytest.raises(InvalidRequest, match=r"input\.order: 'seven' is not of type 'integer'"):
        weave.start_workflow("flow", {"order": "seven"})
    with pytest.raises(NotFound, match="not published"):
        weave.start_workflow("nope")


def test_a_declared_definition_is_its_resources_until_withdrawn(weave: WeaveDriver) -> None:
    """Ownership as for schedules: while a resource (here `orbit apply`'s manifest) declares
    ``flow``, a publish through the API is refused and publishes nothing (invariant 10: the
    versions are the resource's); once the resource withdrew it, the API may publish."""
    spec = parse(V1)
    declare = functools.partial(
        publish_definition, namespace=weave.namespace, name="flow", spec=spec, source="manifest"
    )
    weave.tx(declare)
    with pytest.raises(Conflict, match="declared by a WorkflowDefinition resource"):
        weave.publish("flow", V2)
    with pytest.raises(Conflict, match="declared by a WorkflowDefinition resource"):
        weave.publish("flow", V1)
    info = weave.tx(lambda conn: get_definition(conn, weave.namespace, "flow"))
    assert info is not None and [v.version for v in info.versions] == [1]

    weave.tx(lambda conn: retire_definition(conn, namespace=weave.namespace, name="flow"))
    assert weave.publish("flow", V2).version == 2


def test_every_input_problem_is_reported_each_with_its_json_path(weave: WeaveDriver) -> None:
    schema = {
        "type": "object",
        "required": ["order", "amount"],
        "properties": {
            "order": {"type": "integer"},
            "amount": {"type": "number", "minimum": 0},
            "lines": {"type": "array", "items": {"type": "string"}},
        },
    }
    weave.publish("flow", {**V1, "inputSchema": schema})
    with pytest.raises(InvalidInput) as refused:
        weave.start_workflow("flow", {"order": "seven", "amount": -1, "lines": ["a", 2]})
    assert [(e.path, e.message) for e in refused.value.errors] == [
        ("input.amount", "-1 is less than the minimum of 0"),
        ("input.lines[1]", "2 is not of type 'string'"),
        ("input.order", "'seven' is not of type 'integer'"),
    ]
    assert str(refused.value).startswith("3 problems with the input")
    with pytest.raises(InvalidInput) as missing:
        weave.start_workflow("flow", {})
    assert [e.path for e in missing.value.errors] == ["input", "input"]  # both required fields
