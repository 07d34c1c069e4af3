"""The core of every Weave transaction: move the instance as far as the DAG allows, now.

``advance`` runs under the instance lock, inside the transaction that caused it (start, inbox
consumption, signal, timer, resume), so the step change and the next step's task or wait commit
together (invariant 9). It is a no-op for a paused or finished instance: nothing new is granted
while paused (invariant 12); resume calls it again.

Rules (docs/concepts/workflows.md):
- a PENDING step is decided once every dependency is settled (SUCCEEDED, SKIPPED, TIMED_OUT or
  FAILED — the last two only count when their policy lets the workflow continue);
- it is SKIPPED when it is on a branch not taken: every dependency was skipped, or it depends on
  a wait with ``onTimeout: goto`` and is the wrong side of it (the goto target runs only after a
  timeout, every other dependent only after the signal); or when its ``when`` is false;
- a FAILED step with ``onFailure: fail``, or a TIMED_OUT wait with ``onTimeout: fail``, fails the
  instance: everything still open is cancelled;
- when every step is settled the instance SUCCEEDS with ``output`` (a template) or, without
  one, the results of its steps.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from orbit_store.errors import Conflict
from orbit_store.pulse.manual.cancel import cancel_task
from orbit_store.schema import workflow_activations, workflow_poll_rounds, workflow_waits

from . import firing, waits
from .activate import activate, fail_step
from .context import InstanceContext, Step
from .dsl import cel
from .model import InstanceState, RoundState, StepState, WaitState
from .transitions import move_instance, move_step


def advance(ctx: InstanceContext) -> None:
    if ctx.instance.state.is_terminal or ctx.instance.paused:
        return
    firing.fire_due(ctx)
    for name in ctx.definition.order:
        step = ctx.steps[name]
        if step.state is StepState.PENDING and _is_ready(ctx, name):
            _decide(ctx, step)
    _finish_if_done(ctx)


def _is_ready(ctx: InstanceContext, name: str) -> bool:
    spec = ctx.definition.step(name)
    return all(
        not ctx.steps[dep].state.is_open and not _is_fatal(ctx, dep) for dep in spec.depends_on
    )


def _is_fatal(ctx: InstanceContext, name: str) -> bool:
    """A settled state that fails the instance under the step's policy."""
    state, spec = ctx.steps[name].state, ctx.definition.step(name)
    if state is StepState.FAILED:
        return spec.on_failure == "fail"
    if state is StepState.TIMED_OUT:
        return spec.wait is not None and spec.wait.on_timeout == "fail"
    return state is StepState.CANCELLED


def _decide(ctx: InstanceContext, step: Step) -> None:
    why_skip = _branch_not_taken(ctx, step.name)
    spec = ctx.definition.step(step.name)
    if why_skip is None and spec.when is not None:
        try:
            if not cel.condition(spec.when, ctx.variables()):
                why_skip = f"when is false: {spec.when}"
        except cel.CelError as exc:
            fail_step(ctx, step, "when_failed", f"when: {exc}")
            return
    if why_skip is not None:
        move_step(ctx, step, StepState.SKIPPED, reason=why_skip)
        return
    activate(ctx, step)


def _branch_not_taken(ctx: InstanceContext, name: str) -> str | None:
    deps = ctx.definition.step(name).depends_on
    for dep in deps:
        edge = ctx.definition.goto_edge(dep, name)
        timed_out = ctx.steps[dep].state is StepState.TIMED_OUT
        if edge is True and not timed_out:
            return f"the timeout branch of wait {dep!r}, whose signal arrived"
        if edge is False and timed_out:
            return f"wait {dep!r} timed out: its goto branch runs instead"
    if deps and all(ctx.steps[dep].state is StepState.SKIPPED for dep in deps):
        return "every dependency was skipped"
    return None


def _finish_if_done(ctx: InstanceContext) -> None:
    fatal = next((n for n in ctx.definition.order if _is_fatal(ctx, n)), None)
    if fatal is not None:
        step = ctx.steps[fatal]
        close_instance(
            ctx,
            InstanceState.FAILED,
            reason=f"step {fatal} {step.state.value}",
            error={"step": fatal, "state": step.state.value, "error": step.error},
        )
        return
    if any(s.state.is_open for s in ctx.steps.values()):
        return
    output_template = ctx.definition.spec.output
    if output_template is None:
        output = {s.name: s.result for s in ctx.steps.values() if s.state is StepState.SUCCEEDED}
    else:
        try:
            output = cel.render(output_template, ctx.variables())
        except cel.CelError as exc:
            error = {"type": "output_failed", "message": f"output: {exc}"}
            close_instance(ctx, InstanceState.FAILED, reason=error["message"], error=error)
            return
    waits.expire_pending(ctx)
    move_instance(ctx, InstanceState.SUCCEEDED, reason="every step settled", output=output)


def close_instance(
    ctx: InstanceContext, to: InstanceState, *, reason: str, error: Any = None
) -> None:
    """End the instance as FAILED or CANCELLED: open steps are cancelled — their waiting
    tasks cancelled, running ones asked to stop (Pulse rules; a task awaiting review is left
    to its reviewer) — and unmatched signals expire."""
    for name in ctx.definition.order:
        step = ctx.steps[name]
        if step.state.is_live:
            _stop_activation(ctx, step)
        if step.state.is_open:
            move_step(ctx, step, StepState.CANCELLED, reason=f"workflow {to.value.lower()}")
    waits.expire_pending(ctx)
    values = {"error": error} if error is not None else {}
    move_instance(ctx, to, reason=reason, **values)


def _stop_activation(ctx: InstanceContext, step: Step) -> None:
    conn, activation_id = ctx.conn, step.current_activation_id
    conn.execute(
        workflow_waits.update()
        .where(
            workflow_waits.c.activation_id == activation_id,
            workflow_waits.c.state == WaitState.WAITING.value,
        )
        .values(state=WaitState.CANCELLED.value, finished_at=ctx.now)
    )
    conn.execute(
        workflow_poll_rounds.update()
        .where(
            workflow_poll_rounds.c.activation_id == activation_id,
            workflow_poll_rounds.c.state == RoundState.RUNNING.value,
        )
        .values(state=RoundState.CANCELLED.value, finished_at=ctx.now)
    )
    task_id = _current_task(ctx, step)
    if task_id is None:
        return
    try:
        cancel_task(
            conn,
            namespace=ctx.namespace,
            task_id=task_id,
            actor=ctx.actor or f"workflow:{ctx.instance.id}",
            reason=f"workflow {ctx.instance.id} ended",
        )
    except Conflict:  # NEEDS_REVIEW: settled by review, not by cancel
        ctx.event("task.left_for_review", step.name, step.activation_count, {"task_id": task_id})


def _current_task(ctx: InstanceContext, step: Step) -> str | None:
    return ctx.conn.execute(
        sa.select(workflow_activations.c.task_id).where(
            workflow_activations.c.id == step.current_activation_id
        )
    ).scalar_one_or_none()
