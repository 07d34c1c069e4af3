"""The one way an instance, a step or an activation changes state: a legal-move table, a
conditional UPDATE guarded by the state read under the instance lock, a checked affected-row
count, and a history event in the same transaction (the model is ``pulse/transitions.py``).

A step's current activation moves with it: :func:`move_step` updates both.
"""

from __future__ import annotations

from typing import Any

from orbit_store.schema import workflow_activations, workflow_instances, workflow_steps

from .buffered import NeedsSinglePath
from .context import InstanceContext, LostRace, Step
from .model import InstanceState, StepState

S = StepState

INSTANCE_MOVES: frozenset[tuple[InstanceState, InstanceState]] = frozenset(
    {
        (InstanceState.RUNNING, InstanceState.SUCCEEDED),
        (InstanceState.RUNNING, InstanceState.FAILED),
        (InstanceState.RUNNING, InstanceState.CANCELLED),
    }
)

STEP_MOVES: frozenset[tuple[StepState, StepState]] = frozenset(
    {
        (S.PENDING, S.ACTIVE),
        (S.PENDING, S.SKIPPED),
        (S.PENDING, S.FAILED),  # its `when` could not be evaluated
        (S.PENDING, S.CANCELLED),
        (S.ACTIVE, S.PARKED),
        (S.ACTIVE, S.SUCCEEDED),
        (S.ACTIVE, S.FAILED),
        (S.ACTIVE, S.TIMED_OUT),
        (S.ACTIVE, S.CANCELLED),
        (S.PARKED, S.SUCCEEDED),
        (S.PARKED, S.FAILED),
        (S.PARKED, S.CANCELLED),
        (S.PARKED, S.ACTIVE),  # a manual retry of its task carries the step on
    }
)

#: An activation is created ACTIVE and ends with its step.
ACTIVATION_MOVES = frozenset((a, b) for a, b in STEP_MOVES if a.is_live)

SETTLED = frozenset({S.SUCCEEDED, S.FAILED, S.TIMED_OUT, S.SKIPPED, S.CANCELLED})


def move_instance(ctx: InstanceContext, to: InstanceState, *, reason: str, **values: Any) -> None:
    """RUNNING → an outcome; bumps state_version; records ``instance.<outcome>``."""
    inst = ctx.instance
    if (inst.state, to) not in INSTANCE_MOVES:
        raise ValueError(f"illegal workflow move {inst.state} -> {to} for {inst.id}")
    if to.is_terminal:
        values["finished_at"] = ctx.now
    moved = dict(state=to.value, state_version=inst.state_version + 1, updated_at=ctx.now)
    if ctx.writes is not None:
        ctx.writes.instance.update(moved, **values)
    else:
        _write_instance(ctx, moved, values)
    inst.state, inst.state_version = to, inst.state_version + 1
    inst.finished_at = values.get("finished_at", inst.finished_at)
    ctx.report.finished = to
    ctx.event(f"instance.{to.value.lower()}", details={"reason": reason, **_shown(values)})


def _write_instance(ctx: InstanceContext, moved: dict[str, Any], values: dict[str, Any]) -> None:
    inst = ctx.instance
    updated = ctx.conn.execute(
        workflow_instances.update()
        .where(
            workflow_instances.c.id == inst.id,
            workflow_instances.c.state == inst.state.value,
            workflow_instances.c.state_version == inst.state_version,
        )
        .values(**moved, **values)
    )
    if updated.rowcount != 1:
        raise LostRace(f"workflow {inst.id} moved on from {inst.state}@{inst.state_version}")


def set_control(ctx: InstanceContext, *, paused: bool, control_version: int) -> None:
    """Record pause/resume on the instance (with the gate's new control version)."""
    inst = ctx.instance
    updated = ctx.conn.execute(
        workflow_instances.update()
        .where(
            workflow_instances.c.id == inst.id,
            workflow_instances.c.state_version == inst.state_version,
        )
        .values(
            paused=paused,
            control_version=control_version,
            state_version=inst.state_version + 1,
            updated_at=ctx.now,
        )
    )
    if updated.rowcount != 1:
        raise LostRace(f"workflow {inst.id} changed under its lock")
    inst.paused, inst.control_version = paused, control_version
    inst.state_version += 1


def open_activation(ctx: InstanceContext, step: Step, activation_id: str, **values: Any) -> str:
    """PENDING → ACTIVE with a new activation (seq = previous count + 1); returns its id."""
    _check(step, S.ACTIVE)
    seq = step.activation_count + 1
    row = dict(
        id=activation_id,
        instance_id=ctx.instance.id,
        namespace=ctx.namespace,
        step_name=step.name,
        seq=seq,
        kind=step.kind,
        state=S.ACTIVE.value,
        rounds_used=0,
        created_at=ctx.now,
        **values,
    )
    if ctx.writes is not None:
        if step.kind == "poll":  # its round is written alone
            raise NeedsSinglePath(f"step {step.name} is a {step.kind}")
        ctx.writes.activation_rows[activation_id] = row
    else:
        ctx.conn.execute(workflow_activations.insert().values(**row))
    _update_step(
        ctx,
        step,
        S.ACTIVE,
        activation_count=seq,
        current_activation_id=activation_id,
    )
    step.activation_count, step.current_activation_id = seq, activation_id
    ctx.event("step.activated", step.name, seq, {"kind": step.kind})
    return activation_id


def move_step(
    ctx: InstanceContext,
    step: Step,
    to: StepState,
    *,
    reason: str,
    result: Any = None,
    error: Any = None,
) -> None:
    """Move the step — and its current activation, if live — to ``to``, with the result or
    error it ended with; records ``step.<state>``."""
    _check(step, to)
    live = step.state.is_live
    values: dict[str, Any] = {}
    if to in SETTLED:
        values["finished_at"] = ctx.now
    if result is not None:
        values["result"] = result
    if error is not None:
        values["error"] = error
    if live and step.current_activation_id is not None:
        _move_activation(ctx, step, to, values)
    _update_step(ctx, step, to, **values)
    step.result = values.get("result", step.result)
    step.error = values.get("error", step.error)
    ctx.event(
        f"step.{to.value.lower()}",
        step.name,
        step.activation_count or None,
        {"reason": reason, **_shown({"error": error})},
    )


def _check(step: Step, to: StepState) -> None:
    if (step.state, to) not in STEP_MOVES:
        raise ValueError(f"illegal step move {step.state} -> {to} for step {step.name}")


def _update_step(ctx: InstanceContext, step: Step, to: StepState, **values: Any) -> None:
    if ctx.writes is not None:
        ctx.writes.move_step(
            step.id, step.state.value, dict(state=to.value, updated_at=ctx.now, **values)
        )
        step.state = to
        ctx.report.step_changes += 1
        return
    updated = ctx.conn.execute(
        workflow_steps.update()
        .where(workflow_steps.c.id == step.id, workflow_steps.c.state == step.state.value)
        .values(state=to.value, updated_at=ctx.now, **values)
    )
    if updated.rowcount != 1:
        raise LostRace(f"step {step.name} of workflow {ctx.instance.id} moved on")
    step.state = to
    ctx.report.step_changes += 1


def _move_activation(
    ctx: InstanceContext, step: Step, to: StepState, values: dict[str, Any]
) -> None:
    if (step.state, to) not in ACTIVATION_MOVES:
        raise ValueError(f"illegal activation move {step.state} -> {to} for step {step.name}")
    extra = {"next_poll_at": None} if to in SETTLED and step.kind == "poll" else {}
    if ctx.writes is not None:
        assert step.current_activation_id is not None
        ctx.writes.move_activation(
            step.current_activation_id, step.state.value, dict(state=to.value, **values, **extra)
        )
        ctx.timers_changed = ctx.timers_changed or bool(extra)
        return
    updated = ctx.conn.execute(
        workflow_activations.update()
        .where(
            workflow_activations.c.id == step.current_activation_id,
            workflow_activations.c.state == step.state.value,
        )
        .values(state=to.value, **values, **extra)
    )
    if updated.rowcount != 1:
        raise LostRace(f"activation of step {step.name} moved on")
    if extra:
        ctx.timers_changed = True


def _shown(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if k in ("error", "output") and v is not None}
