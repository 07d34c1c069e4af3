"""Activating a step inside the advancing transaction (seed §5 "流程启动 / 推进", invariant 9):
a task step's Pulse task, a wait or sleep row, a poll's first round — created in the same
transaction that moves the step to ACTIVE, so a step is never active without what serves it.

Step tasks are created only through ``pulse.submit.submit_task`` with the instance's execution
gate, the instance and activation ids, and an idempotency key derived from the activation (and
round): the same activation can never create a second task.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from orbit_store.errors import Conflict, InvalidRequest, NotFound
from orbit_store.ids import new_id
from orbit_store.payload import oversize
from orbit_store.pulse.model import Safety, WaitPath
from orbit_store.pulse.submit.accept import SubmitRequest, submit_task
from orbit_store.schema import workflow_activations, workflow_poll_rounds, workflow_waits

from . import waits
from .buffered import Submission
from .context import InstanceContext, LostRace, Step
from .dsl import cel
from .dsl.spec import TaskTemplate
from .model import ACTOR_PREFIX, PollOutcome, RoundState, StepState, WaitState
from .transitions import move_step, open_activation


def activate(ctx: InstanceContext, step: Step) -> None:
    """PENDING → ACTIVE, creating what serves the step (or failing it when that is impossible)."""
    spec = ctx.definition.step(step.name)
    if spec.task is not None:
        activation_id, seq = new_id(), step.activation_count + 1
        try:
            task = submit_step_task(ctx, step.name, seq, spec.task, activation_id)
        except StepRefused as refused:
            open_activation(ctx, step, activation_id)
            fail_step(ctx, step, refused.kind, refused.message)
            return
        open_activation(ctx, step, activation_id, task_id=task.task_id)
        task.record(ctx, step)
    elif spec.wait is not None:
        deadline = None
        if spec.wait.timeout_seconds is not None:
            deadline = ctx.now + dt.timedelta(seconds=spec.wait.timeout_seconds)
        activation_id = open_activation(ctx, step, new_id(), deadline_at=deadline)
        wait_id = _insert_wait(ctx, activation_id, "signal", spec.wait.signal, deadline)
        waits.take_pending(ctx, step, wait_id, spec.wait.signal)
    elif spec.sleep is not None:
        try:
            wake = _wake_time(ctx, spec.sleep.seconds, spec.sleep.until)
        except StepRefused as refused:
            open_activation(ctx, step, new_id())
            fail_step(ctx, step, refused.kind, refused.message)
            return
        activation_id = open_activation(ctx, step, new_id(), deadline_at=wake)
        _insert_wait(ctx, activation_id, "sleep", None, wake)
    elif spec.poll is not None:
        deadline = None
        if spec.poll.deadline_seconds is not None:
            deadline = ctx.now + dt.timedelta(seconds=spec.poll.deadline_seconds)
        open_activation(ctx, step, new_id(), max_rounds=spec.poll.max_rounds, deadline_at=deadline)
        start_round(ctx, step)


def _insert_wait(
    ctx: InstanceContext,
    activation_id: str,
    kind: str,
    signal_name: str | None,
    deadline: dt.datetime | None,
) -> str:
    wait_id = new_id()
    row = dict(
        id=wait_id,
        activation_id=activation_id,
        instance_id=ctx.instance.id,
        namespace=ctx.namespace,
        kind=kind,
        signal_name=signal_name,
        deadline_at=deadline,
        state=WaitState.WAITING.value,
        created_at=ctx.now,
    )
    if ctx.writes is not None:  # inserted with the set's others (``set_writes``)
        ctx.writes.wait_rows[wait_id] = row
    else:
        ctx.conn.execute(workflow_waits.insert().values(**row))
    if deadline is not None:
        ctx.timers_changed = True
    return wait_id


def _wake_time(ctx: InstanceContext, seconds: float | None, until: str | None) -> dt.datetime:
    if seconds is not None:
        return ctx.now + dt.timedelta(seconds=seconds)
    try:
        text = cel.render(until, ctx.variables())
        wake = dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except (cel.CelError, ValueError) as exc:
        raise StepRefused("sleep_until_invalid", f"sleep.until: {exc}") from None
    if wake.tzinfo is not None:
        wake = wake.astimezone(dt.UTC).replace(tzinfo=None)
    return wake


class StepRefused(Exception):
    """What serves the step cannot be created: its template fails, or Pulse refuses the task
    for good (undeclared or draining queue, bad values). The step fails with ``kind``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind, self.message = kind, message


@dataclass(frozen=True)
class CreatedTask:
    task_id: str
    queue: str
    handler: str

    def record(self, ctx: InstanceContext, step: Step) -> None:
        details = {"task_id": self.task_id, "queue": self.queue, "handler": self.handler}
        ctx.event("task.created", step.name, step.activation_count, details)


def submit_step_task(
    ctx: InstanceContext,
    step_name: str,
    seq: int,
    template: TaskTemplate,
    activation_id: str,
    *,
    key_suffix: str = "",
    extra: dict[str, Any] | None = None,
) -> CreatedTask:
    """Create the Pulse task of activation ``seq`` of the step from its template. Raises
    StepRefused (a template that fails, params over the payload limit, a task Pulse refuses);
    QuotaExceeded propagates (the whole advance is retried later)."""
    variables = {**ctx.variables(), **(extra or {})}
    try:
        handler = str(cel.render(template.handler, variables))
        queue = str(cel.render(template.queue, variables))
        params = cel.render(template.params, variables)
    except cel.CelError as exc:
        raise StepRefused("template_failed", str(exc)) from None
    too_large = oversize(ctx.max_payload_bytes, params=params)
    if too_large is not None:  # the limit a task submitted through the API is held to
        raise StepRefused("payload_too_large", f"the task's {too_large.detail}")
    inst = ctx.instance
    request = SubmitRequest(
        namespace=inst.namespace,
        queue=queue,
        handler=handler,
        params=params,
        idempotency_key=f"wf:{inst.id}:{step_name}:{seq}{key_suffix}",
        priority=template.priority,
        max_attempts=template.max_attempts,
        safety=Safety(template.safety) if template.safety else None,
        gate_id=inst.gate_id,
        workflow_instance_id=inst.id,
        workflow_activation_id=activation_id,
        submitted_by=ACTOR_PREFIX + inst.id,
    )
    if ctx.writes is not None:  # submitted with the set's others (``set_writes``)
        placeholder = f"pending-task:{new_id()}"
        ctx.writes.submissions.append(Submission(placeholder, request, queue, handler))
        return CreatedTask(placeholder, queue, handler)
    try:
        result = submit_task(ctx.conn, request)
    except (NotFound, Conflict, InvalidRequest) as exc:  # raised before Pulse wrote anything
        raise StepRefused("task_refused", str(exc)) from None
    if result.wait_path is WaitPath.READY:
        ctx.report.ready_tasks.append((queue, handler))
    return CreatedTask(result.task_id, queue, handler)


def start_round(ctx: InstanceContext, step: Step) -> None:
    """The next poll round (seed §5 "查询下一轮"): check the budget and deadline, write the
    round (UNIQUE per activation), count it and create its task — or end the step exhausted.
    The round budget lives in the activation row and is never reset (invariant 11)."""
    spec = ctx.definition.step(step.name).poll
    assert spec is not None
    activation = poll_checkpoint(ctx, step, ctx.now)
    if activation is None:
        return
    number = activation.rounds_used + 1
    try:
        task = submit_step_task(
            ctx,
            step.name,
            step.activation_count,
            spec,
            activation.id,
            key_suffix=f":r{number}",
            extra={"round": number},
        )
    except StepRefused as refused:
        fail_step(ctx, step, refused.kind, refused.message)
        return
    task_id = task.task_id
    ctx.conn.execute(
        workflow_poll_rounds.insert().values(
            id=new_id(),
            activation_id=activation.id,
            instance_id=ctx.instance.id,
            namespace=ctx.namespace,
            round=number,
            task_id=task_id,
            state=RoundState.RUNNING.value,
            created_at=ctx.now,
        )
    )
    updated = ctx.conn.execute(
        workflow_activations.update()
        .where(
            workflow_activations.c.id == activation.id,
            workflow_activations.c.rounds_used == activation.rounds_used,
        )
        .values(rounds_used=number, task_id=task_id, next_poll_at=None)
    )
    if updated.rowcount != 1:
        raise LostRace(f"poll {step.name} of workflow {ctx.instance.id} counted twice")
    if activation.next_poll_at is not None:
        ctx.timers_changed = True
    task.record(ctx, step)
    ctx.event("poll.round_started", step.name, step.activation_count, {"round": number})


def poll_checkpoint(ctx: InstanceContext, step: Step, at: dt.datetime) -> sa.Row[Any] | None:
    """The poll's activation row when a round may start at ``at`` — rounds left and the
    deadline not passed — else None, with the step failed as exhausted."""
    activation = ctx.conn.execute(
        sa.select(workflow_activations).where(
            workflow_activations.c.id == step.current_activation_id
        )
    ).one()
    used = activation.rounds_used
    why = None
    if used >= activation.max_rounds:
        why = f"no match after {used} rounds (maxRounds)"
    elif activation.deadline_at is not None and at >= activation.deadline_at:
        why = f"the deadline passed after {used} rounds"
    if why is None:
        return activation
    ctx.report.poll_outcomes.append(PollOutcome.EXHAUSTED)
    fail_step(ctx, step, "poll_exhausted", f"poll {step.name}: {why}")
    return None


def fail_step(ctx: InstanceContext, step: Step, kind: str, message: str) -> None:
    move_step(ctx, step, StepState.FAILED, reason=message, error={"type": kind, "message": message})
