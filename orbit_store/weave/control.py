"""Pause, resume and cancel a workflow (seed §5 "流程暂停 / 继续"; invariants 8, 12).

Pause closes the instance's execution gate and records ``paused`` with the gate's new control
version in one transaction: claims and starts of its tasks are refused from then on, attempts
already running finish and their outcomes are recorded (the inbox goes on consuming them and
leaves continuation rows); signals are accepted and stay pending. Resume opens the gate, marks
the continuations resumed, gives pending signals to active waits and records a deferred advance
in the inbox, in one transaction; the inbox consumer then applies everything that waited, due
timers included, so nothing stalls after it — and a quota refusing the follow-up tasks delays
them without refusing the resume.
Cancel ends the instance: open steps are cancelled, their tasks cancelled by Pulse's rules.
Each writes an audit row with the actor and reason.
"""

from __future__ import annotations

from collections.abc import Mapping

import sqlalchemy as sa

from orbit_store.audit import record_audit
from orbit_store.errors import Conflict
from orbit_store.payload import DEFAULT_MAX_PAYLOAD_BYTES
from orbit_store.pulse.limits.gates import set_gate
from orbit_store.schema import workflow_continuations

from .advance import close_instance
from .context import InstanceContext, lock_instance
from .inbox import RESUMED, defer_advance
from .model import ControlResult, InstanceState
from .transitions import set_control
from .waits import match_waits


def _result(ctx: InstanceContext, changed: bool) -> ControlResult:
    inst = ctx.instance
    return ControlResult(
        inst.id, inst.state, inst.paused, inst.control_version, changed, ctx.report
    )


def _audit(ctx: InstanceContext, action: str, reason: str, before: Mapping[str, object]) -> None:
    inst = ctx.instance
    record_audit(
        ctx.conn,
        namespace=inst.namespace,
        actor=ctx.actor or "unknown",
        action=f"workflow.{action}",
        resource_kind="workflow",
        resource_id=inst.id,
        resource_version=inst.state_version,
        reason=reason or action,
        before=before,
        after={"state": inst.state.value, "paused": inst.paused},
        now=ctx.now,
    )


def _require_running(ctx: InstanceContext, action: str) -> None:
    if ctx.instance.state.is_terminal:
        raise Conflict(
            f"workflow {ctx.instance.id} is {ctx.instance.state.value}: only a RUNNING "
            f"workflow can be {action}d"
        )


def _switch(ctx: InstanceContext, *, paused: bool, reason: str) -> int:
    """Close (pause) or open (resume) the gate and record it on the instance, together; the
    gate must still be at the control version the instance holds. Returns the new version."""
    gate = set_gate(
        ctx.conn,
        namespace=ctx.namespace,
        gate_id=ctx.instance.gate_id,
        allowed=not paused,
        expected_control_version=ctx.instance.control_version,
    )
    set_control(ctx, paused=paused, control_version=gate.control_version)
    action = "pause" if paused else "resume"
    _audit(ctx, action, reason, {"state": ctx.instance.state.value, "paused": not paused})
    return gate.control_version


def pause_workflow(
    conn: sa.Connection, *, namespace: str, instance_id: str, actor: str, reason: str = ""
) -> ControlResult:
    ctx = lock_instance(conn, namespace, instance_id, actor=actor)
    _require_running(ctx, "pause")
    if ctx.instance.paused:
        return _result(ctx, changed=False)
    version = _switch(ctx, paused=True, reason=reason)
    ctx.event("instance.paused", details={"reason": reason, "control_version": version})
    ctx.flush()
    return _result(ctx, changed=True)


def resume_workflow(
    conn: sa.Connection,
    *,
    namespace: str,
    instance_id: str,
    actor: str,
    reason: str = "",
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> ControlResult:
    ctx = lock_instance(
        conn, namespace, instance_id, actor=actor, max_payload_bytes=max_payload_bytes
    )
    _require_running(ctx, "resume")
    if not ctx.instance.paused:
        return _result(ctx, changed=False)
    version = _switch(ctx, paused=False, reason=reason)
    applied = conn.execute(
        workflow_continuations.update()
        .where(
            workflow_continuations.c.instance_id == instance_id,
            workflow_continuations.c.resumed_at.is_(None),
        )
        .values(resumed_at=ctx.now)
    ).rowcount
    details = {"reason": reason, "control_version": version, "continuations": applied}
    ctx.event("instance.resumed", details=details)
    match_waits(ctx)  # signals accepted while paused, for waits already active
    # Follow-ups (tasks a quota may refuse) are the inbox consumer's: resume always succeeds.
    defer_advance(ctx, RESUMED, f"resume:{instance_id}:c{version}")
    ctx.flush()
    return _result(ctx, changed=True)


def cancel_workflow(
    conn: sa.Connection, *, namespace: str, instance_id: str, actor: str, reason: str = ""
) -> ControlResult:
    ctx = lock_instance(conn, namespace, instance_id, actor=actor)
    if ctx.instance.state.is_terminal:
        return _result(ctx, changed=False)
    before = {"state": ctx.instance.state.value, "paused": ctx.instance.paused}
    close_instance(ctx, InstanceState.CANCELLED, reason=reason or "cancelled")
    _audit(ctx, "cancel", reason, before)
    ctx.flush()
    return _result(ctx, changed=True)
