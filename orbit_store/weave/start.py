"""Starting a workflow (seed §5 "流程启动 / 推进"; invariants 6, 9, 10).

One transaction creates the instance bound to one published version, its execution gate, a
PENDING row per step, the start event, and — through ``advance`` — the first steps' tasks and
waits. Starting is idempotent by ``(namespace, start_key)``: the same key and request returns
the original instance; the same key with another request is a conflict. A commit whose outcome
is unknown is resolved by looking the key up (:func:`find_started`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from typing import Any

import jsonschema
import sqlalchemy as sa

from orbit_store.clock import db_now
from orbit_store.errors import (
    Conflict,
    FieldProblem,
    IdempotencyConflict,
    InvalidInput,
    NotFound,
)
from orbit_store.ids import new_id
from orbit_store.payload import DEFAULT_MAX_PAYLOAD_BYTES
from orbit_store.pulse.limits.gates import create_gate
from orbit_store.schema import (
    workflow_definition_versions,
    workflow_definitions,
    workflow_instances,
    workflow_steps,
)

from .advance_held import advance_held
from .context import InstanceContext, lock_instance
from .definitions import load_version
from .dsl.spec import Definition
from .model import AdvanceReport, InstanceState, StartResult, StepState

GATE_OWNER = "workflow_instance"


@dataclass(frozen=True)
class StartRequest:
    namespace: str
    definition: str
    start_key: str
    input: Any
    version: int | None = None
    started_by: str | None = None
    #: What the first steps' tasks may carry (not part of the request's meaning).
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES

    def digest(self) -> str:
        meaning = {"definition": self.definition, "version": self.version, "input": self.input}
        text = json.dumps(meaning, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode()).hexdigest()


def find_started(conn: sa.Connection, request: StartRequest) -> StartResult | None:
    """The instance the start key already names (a replay), or None; raises on a reused key."""
    row = conn.execute(
        sa.select(
            workflow_instances.c.id, workflow_instances.c.state, workflow_instances.c.start_digest
        ).where(
            workflow_instances.c.namespace == request.namespace,
            workflow_instances.c.start_key == request.start_key,
        )
    ).one_or_none()
    return None if row is None else replay_of(row, request)


def replay_of(row: Any, request: StartRequest) -> StartResult:
    """The instance ``row`` (id, state, start_digest) that ``request``'s start key names, as
    its replay; raises IdempotencyConflict when it was started by another request."""
    if row.start_digest != request.digest():
        raise IdempotencyConflict(
            f"start key {request.start_key!r} already started workflow {row.id} with a "
            "different request; use a new start key for a new workflow"
        )
    return StartResult(row.id, InstanceState(row.state), replayed=True)


def start_workflow(conn: sa.Connection, request: StartRequest) -> tuple[StartResult, AdvanceReport]:
    """Start (or find) the instance; raises NotFound, Conflict (retired), InvalidRequest
    (input), QuotaExceeded (a first step's task; nothing written)."""
    existing = find_started(conn, request)
    if existing is not None:
        return existing, AdvanceReport(namespace=request.namespace)
    definition_id, version_id, version = _bind_version(conn, request)
    definition = load_version(conn, version_id)
    check_input(definition.spec.input_schema, request.input)
    now = db_now(conn)
    instance_id = new_id()
    gate_id = create_gate(
        conn, namespace=request.namespace, owner_kind=GATE_OWNER, owner_id=instance_id, now=now
    )
    conn.execute(
        workflow_instances.insert().values(
            instance_row(request, instance_id, gate_id, (definition_id, version_id, version), now)
        )
    )
    conn.execute(workflow_steps.insert(), step_rows(request, instance_id, definition, now))

    def fresh() -> InstanceContext:
        ctx = lock_instance(
            conn,
            request.namespace,
            instance_id,
            actor=request.started_by,
            max_payload_bytes=request.max_payload_bytes,
        )
        ctx.event(
            "instance.started",
            details={"definition": request.definition, "version": version},
        )
        return ctx

    ctx = advance_held(conn, fresh)
    return StartResult(instance_id, ctx.instance.state, replayed=False), ctx.report


def instance_row(
    request: StartRequest,
    instance_id: str,
    gate_id: str,
    bound: tuple[str, str, int],
    now: dt.datetime,
) -> dict[str, Any]:
    """The new instance's row: RUNNING, bound to ``bound`` (definition id, version id, version)."""
    definition_id, version_id, version = bound
    return {
        "id": instance_id,
        "namespace": request.namespace,
        "definition_id": definition_id,
        "definition_version_id": version_id,
        "definition_name": request.definition,
        "version": version,
        "start_key": request.start_key,
        "start_digest": request.digest(),
        "state": InstanceState.RUNNING.value,
        "state_version": 1,
        "paused": False,
        "control_version": 1,
        "gate_id": gate_id,
        "input": request.input,
        "event_seq": 0,
        "started_by": request.started_by,
        "created_at": now,
        "updated_at": now,
    }


def step_rows(
    request: StartRequest, instance_id: str, definition: Definition, now: dt.datetime
) -> list[dict[str, Any]]:
    """A PENDING row per step of the new instance."""
    return [
        {
            "id": new_id(),
            "instance_id": instance_id,
            "namespace": request.namespace,
            "name": step.name,
            "kind": step.kind,
            "state": StepState.PENDING.value,
            "activation_count": 0,
            "updated_at": now,
        }
        for step in definition.spec.steps
    ]


def _bind_version(conn: sa.Connection, request: StartRequest) -> tuple[str, str, int]:
    definition: Any = conn.execute(
        sa.select(workflow_definitions).where(
            workflow_definitions.c.namespace == request.namespace,
            workflow_definitions.c.name == request.definition,
        )
    ).one_or_none()
    version = chosen_version(request, definition)
    version_id = conn.execute(
        sa.select(workflow_definition_versions.c.id).where(
            workflow_definition_versions.c.definition_id == definition.id,
            workflow_definition_versions.c.version == version,
        )
    ).scalar_one_or_none()
    return bound_version(request, definition, version, version_id)


def chosen_version(request: StartRequest, definition: Any) -> int:
    """The version ``request`` starts of its definition's row (None: not published); raises
    NotFound, or Conflict when the definition was withdrawn."""
    if definition is None:
        raise NotFound(
            f"workflow definition {request.definition!r} is not published in namespace "
            f"{request.namespace!r}: publish it (WorkflowDefinition resource, `orbit apply`, "
            "or POST …/workflow-definitions) first"
        )
    if definition.retired_at is not None:
        raise Conflict(
            f"workflow definition {request.definition!r} was withdrawn (its resource was "
            "deleted): it starts no new workflows; running ones continue"
        )
    return int(request.version or definition.latest_version)


def bound_version(
    request: StartRequest, definition: Any, version: int, version_id: str | None
) -> tuple[str, str, int]:
    """(definition id, version id, version); raises NotFound when the version does not exist."""
    if version_id is None:
        raise NotFound(
            f"workflow definition {request.definition!r} has no version {version} "
            f"(latest is {definition.latest_version})"
        )
    return definition.id, version_id, version


def check_input(schema: dict[str, Any] | None, value: Any) -> None:
    """Every way ``value`` fails the definition's inputSchema, in path order."""
    if schema is None:
        return
    found = sorted(
        (
            FieldProblem(("input", *e.absolute_path), e.message)
            for e in jsonschema.Draft202012Validator(schema).iter_errors(value)
        ),
        key=lambda p: (p.path, p.message),
    )
    if found:
        first = f"{found[0].path}: {found[0].message}"
        count = "1 problem" if len(found) == 1 else f"{len(found)} problems"
        raise InvalidInput(
            f"{count} with the input (the definition's inputSchema); the first: {first}", found
        )
