"""A test driver for Weave on top of the Pulse driver: one namespace, short names for each
transaction, and a fake worker (``run_tasks``) that claims, starts and completes step tasks the
way a real worker would, through Pulse's own transactions.

    wf = weave.start_workflow("order", {"amount": 5})
    weave.run_tasks({"shop.reserve": lambda params: {"ok": True}})
    assert weave.instance(wf).state == "SUCCEEDED"
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from orbit_store.pulse.model import Outcome, TaskState
from orbit_store.schema import (
    execution_gates,
    tasks,
    workflow_activations,
    workflow_events,
    workflow_inbox,
    workflow_instances,
    workflow_poll_rounds,
    workflow_signals,
    workflow_steps,
)
from orbit_store.weave import control, service
from orbit_store.weave.model import PublishResult, SignalResult
from orbit_store.weave.start import StartRequest

from .pulse_driver import PulseDriver

Handler = Callable[[Any], Any]


def task_step(name: str, handler: str | None = None, **extra: Any) -> dict[str, Any]:
    """A task step; ``extra`` holds dependsOn/when/onFailure and task fields (params, queue)."""
    step: dict[str, Any] = {"name": name}
    for key in ("dependsOn", "when", "onFailure"):
        if key in extra:
            step[key] = extra.pop(key)
    step["task"] = {"handler": handler or f"test.{name}", **extra}
    return step


class WeaveDriver(PulseDriver):
    # --- transactions -----------------------------------------------------------------------
    def publish(self, name: str, spec: dict[str, Any]) -> PublishResult:
        return service.publish(
            self.engine, namespace=self.namespace, name=name, document=spec, actor="tester"
        )

    def start_workflow(
        self,
        definition: str,
        input: Any = None,
        key: str | None = None,
        version: int | None = None,
    ) -> str:
        request = StartRequest(
            namespace=self.namespace,
            definition=definition,
            start_key=key or str(uuid.uuid4()),
            input={} if input is None else input,
            version=version,
            started_by="tester",
        )
        result, _ = service.start(self.engine, request)
        return result.instance_id

    def signal(
        self, instance_id: str, name: str, payload: Any = None, signal_id: str | None = None
    ) -> SignalResult:
        result, _ = service.signal(
            self.engine,
            namespace=self.namespace,
            instance_id=instance_id,
            signal_id=signal_id or str(uuid.uuid4()),
            name=name,
            payload=payload,
            sent_by="tester",
        )
        return result

    def consume(self) -> service.PassReport:
        """One inbox pass over this namespace."""
        return service.consume_pass(self.engine, namespace=self.namespace, limit=500)

    def wake(self) -> service.PassReport:
        """One timer pass over this namespace."""
        return service.timer_pass(self.engine, namespace=self.namespace, limit=500)

    def control(self, action: str, instance_id: str, reason: str = "test") -> Any:
        work = getattr(control, f"{action}_workflow")
        return self.tx(
            functools.partial(
                work,
                namespace=self.namespace,
                instance_id=instance_id,
                actor="tester",
                reason=reason,
            )
        )

    # --- a worker -----------------------------------------------------------------------------
    def run_tasks(self, handlers: dict[str, Handler], rounds: int = 50) -> int:
        """Claim, start and complete due tasks with ``handlers`` (a handler may raise to fail
        its task) and consume the inbox, until nothing moves; returns tasks completed."""
        done = 0
        for _ in range(rounds):
            grants = self.claim(limit=100)
            for grant in grants:
                assert self.start(grant).started
                handler = handlers[grant.handler]
                try:
                    result = handler(grant.params)
                except Exception as exc:
                    self.fail(grant, error={"message": str(exc)})
                else:
                    self.succeed(grant, result)
                done += 1
            consumed = self.consume().reports
            if not grants and not consumed:
                return done
        raise AssertionError("run_tasks did not settle")

    def finish_task(self, task_id: str, outcome: Outcome, result: Any = None) -> None:
        """Claim, start and complete one particular task (it must be due)."""
        self.finish_tasks([task_id], outcome, result)

    def finish_tasks(self, task_ids: list[str], outcome: Outcome, result: Any = None) -> None:
        """Claim, start and complete each of these tasks (they must be due), each in its own
        transactions; any other task claimed on the way is handed back. One claim serves many:
        finishing N tasks one call at a time would hand back the others N times."""
        wanted = set(task_ids)
        while wanted:
            finished = 0
            for grant in self.claim(limit=100):
                if grant.task_id in wanted:
                    assert self.start(grant).started
                    self.complete(grant, outcome, result=result)
                    wanted.discard(grant.task_id)
                    finished += 1
                else:
                    self.complete(grant, Outcome.RELEASED)
            assert finished, f"not claimable: {sorted(wanted)}"
        for task_id in task_ids:
            assert self.state(task_id) != TaskState.WAITING.value, "the task was not claimable"

    # --- reading ----------------------------------------------------------------------------
    def _rows(self, query: sa.Select[Any]) -> list[sa.Row[Any]]:
        with self.engine.connect() as conn:
            return list(conn.execute(query))

    def instance(self, instance_id: str) -> sa.Row[Any]:
        (row,) = self._rows(
            sa.select(workflow_instances).where(workflow_instances.c.id == instance_id)
        )
        return row

    def steps(self, instance_id: str) -> dict[str, sa.Row[Any]]:
        rows = self._rows(
            sa.select(workflow_steps).where(workflow_steps.c.instance_id == instance_id)
        )
        return {row.name: row for row in rows}

    def step_states(self, instance_id: str) -> dict[str, str]:
        return {name: row.state for name, row in self.steps(instance_id).items()}

    def tasks_of(self, instance_id: str) -> list[sa.Row[Any]]:
        return self._rows(
            sa.select(tasks)
            .where(tasks.c.workflow_instance_id == instance_id)
            .order_by(tasks.c.created_at, tasks.c.id)
        )

    def task_of(self, instance_id: str, step: str) -> sa.Row[Any]:
        """The current task of a step."""
        row = self._rows(
            sa.select(tasks)
            .join(workflow_activations, workflow_activations.c.task_id == tasks.c.id)
            .where(
                workflow_activations.c.instance_id == instance_id,
                workflow_activations.c.step_name == step,
            )
            .order_by(workflow_activations.c.seq.desc())
        )
        assert row, f"step {step} has no task"
        return row[0]

    def activations(self, instance_id: str, step: str) -> list[sa.Row[Any]]:
        return self._rows(
            sa.select(workflow_activations)
            .where(
                workflow_activations.c.instance_id == instance_id,
                workflow_activations.c.step_name == step,
            )
            .order_by(workflow_activations.c.seq)
        )

    def rounds(self, instance_id: str) -> list[sa.Row[Any]]:
        return self._rows(
            sa.select(workflow_poll_rounds)
            .where(workflow_poll_rounds.c.instance_id == instance_id)
            .order_by(workflow_poll_rounds.c.round)
        )

    def inbox(self, instance_id: str) -> list[sa.Row[Any]]:
        return self._rows(
            sa.select(workflow_inbox)
            .where(workflow_inbox.c.instance_id == instance_id)
            .order_by(workflow_inbox.c.received_at, workflow_inbox.c.id)
        )

    def signals(self, instance_id: str) -> list[sa.Row[Any]]:
        return self._rows(
            sa.select(workflow_signals).where(workflow_signals.c.instance_id == instance_id)
        )

    def history(self, instance_id: str) -> list[str]:
        rows = self._rows(
            sa.select(workflow_events.c.kind, workflow_events.c.step_name)
            .where(workflow_events.c.instance_id == instance_id)
            .order_by(workflow_events.c.seq)
        )
        return [f"{kind}:{step}" if step else kind for kind, step in rows]

    def gate(self, instance_id: str) -> sa.Row[Any]:
        (row,) = self._rows(
            sa.select(execution_gates).where(
                execution_gates.c.id == self.instance(instance_id).gate_id
            )
        )
        return row
