"""Workflow methods of ``Client`` and ``AsyncClient``: publish definitions, start workflows,
signal, pause, resume, cancel, read and wait for them.

    client.publish_workflow("shop", "order", spec)
    wf = client.start_workflow("shop", "order", input={"order": 7}, start_key="order-7")
    client.signal_workflow("shop", wf.id, "approved", {"by": "ann"})
    done = client.wait_workflow("shop", wf.id, timeout=60)
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ._wire import workflow_calls as calls
from ._wire.transport import AsyncTransport, SyncTransport
from .errors import TimeoutExpired
from .workflow_models import (
    FINISHED_WORKFLOW_STATES,
    Signal,
    Workflow,
    WorkflowDefinition,
    WorkflowDetail,
    WorkflowEvent,
    WorkflowPage,
)


def _timeout(workflow_id: str, timeout: float | None, last: WorkflowDetail) -> TimeoutExpired:
    err = TimeoutExpired.from_detail(
        f"workflow {workflow_id} still {last.state} after {timeout}s",
        title="Timed out waiting for workflow",
    )
    assert isinstance(err, TimeoutExpired)
    err.task = last  # the last state seen; the workflow carries on
    return err


class WorkflowMethods:
    """Mixed into ``Client``."""

    _transport: SyncTransport

    def publish_workflow(
        self, namespace: str, name: str, spec: dict[str, Any], reason: str = ""
    ) -> WorkflowDefinition:
        """Publish ``spec`` as the next immutable version of ``name`` — or nothing, when it equals
        the latest (``changed`` says which). Needs the admin role; a new version is audited with
        ``reason``. ``ValidationFailed`` lists every problem of the spec by field in
        ``problem.errors``."""
        response = self._transport.send(calls.publish(namespace, name, spec, reason))
        return WorkflowDefinition.model_validate(response.json())

    def get_workflow_definition(self, namespace: str, name: str) -> WorkflowDefinition:
        response = self._transport.send(calls.get_definition(namespace, name))
        return WorkflowDefinition.model_validate(response.json())

    def start_workflow(
        self,
        namespace: str,
        definition: str,
        *,
        input: Any = None,
        start_key: str | None = None,
        version: int | None = None,
    ) -> Workflow:
        """Start a workflow of the latest (or the given) version. Without ``start_key`` a fresh
        one is made for this call, so transport retries are safe; pass your own (an order id)
        to make *your* retries safe too. ``replayed`` tells whether the key found one."""
        call = calls.start(namespace, definition, input=input, start_key=start_key, version=version)
        return Workflow.model_validate(self._transport.send(call).json())

    def get_workflow(self, namespace: str, workflow_id: str) -> WorkflowDetail:
        """The workflow with each step's state, activations, task states and inbox lag."""
        response = self._transport.send(calls.get(namespace, workflow_id))
        return WorkflowDetail.model_validate(response.json())

    def list_workflows(
        self,
        namespace: str,
        *,
        state: str | None = None,
        definition: str | None = None,
        page_size: int = 50,
        page_token: str | None = None,
    ) -> WorkflowPage:
        call = calls.list_(
            namespace,
            state=state,
            definition=definition,
            page_size=page_size,
            page_token=page_token,
        )
        return WorkflowPage.model_validate(self._transport.send(call).json())

    def workflow_history(self, namespace: str, workflow_id: str) -> list[WorkflowEvent]:
        response = self._transport.send(calls.history(namespace, workflow_id))
        return [WorkflowEvent.model_validate(e) for e in response.json()["events"]]

    def signal_workflow(
        self,
        namespace: str,
        workflow_id: str,
        name: str,
        payload: Any = None,
        *,
        signal_id: str | None = None,
    ) -> Signal:
        """Send a signal. It advances only an active wait of that name; otherwise it stays
        PENDING for a later one. Pass ``signal_id`` to make your own retries replays."""
        call = calls.signal(namespace, workflow_id, name, payload, signal_id)
        return Signal.model_validate(self._transport.send(call).json())

    def pause_workflow(self, namespace: str, workflow_id: str, reason: str = "") -> Workflow:
        """No new tasks are granted; running ones finish and their results are kept."""
        return self._control(namespace, workflow_id, "pause", reason)

    def resume_workflow(self, namespace: str, workflow_id: str, reason: str = "") -> Workflow:
        return self._control(namespace, workflow_id, "resume", reason)

    def cancel_workflow(self, namespace: str, workflow_id: str, reason: str = "") -> Workflow:
        return self._control(namespace, workflow_id, "cancel", reason)

    def _control(self, namespace: str, workflow_id: str, action: str, reason: str) -> Workflow:
        response = self._transport.send(calls.control(namespace, workflow_id, action, reason))
        return Workflow.model_validate(response.json())

    def wait_workflow(
        self,
        namespace: str,
        workflow_id: str,
        timeout: float | None = 30,
        poll_interval: float = 0.25,
    ) -> WorkflowDetail:
        """Poll until the workflow has finished; ``TimeoutExpired`` otherwise (its ``task`` is
        the last state seen). ``timeout=None`` waits forever."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            detail = self.get_workflow(namespace, workflow_id)
            if detail.state in FINISHED_WORKFLOW_STATES:
                return detail
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise _timeout(workflow_id, timeout, detail)
            time.sleep(poll_interval if remaining is None else min(poll_interval, remaining))


class AsyncWorkflowMethods:
    """Mixed into ``AsyncClient``: the same methods, awaitable."""

    _transport: AsyncTransport

    async def publish_workflow(
        self, namespace: str, name: str, spec: dict[str, Any], reason: str = ""
    ) -> WorkflowDefinition:
        response = await self._transport.send(calls.publish(namespace, name, spec, reason))
        return WorkflowDefinition.model_validate(response.json())

    async def get_workflow_definition(self, namespace: str, name: str) -> WorkflowDefinition:
        response = await self._transport.send(calls.get_definition(namespace, name))
        return WorkflowDefinition.model_validate(response.json())

    async def start_workflow(
        self,
        namespace: str,
        definition: str,
        *,
        input: Any = None,
        start_key: str | None = None,
        version: int | None = None,
    ) -> Workflow:
        call = calls.start(namespace, definition, input=input, start_key=start_key, version=version)
        return Workflow.model_validate((await self._transport.send(call)).json())

    async def get_workflow(self, namespace: str, workflow_id: str) -> WorkflowDetail:
        response = await self._transport.send(calls.get(namespace, workflow_id))
        return WorkflowDetail.model_validate(response.json())

    async def list_workflows(
        self,
        namespace: str,
        *,
        state: str | None = None,
        definition: str | None = None,
        page_size: int = 50,
        page_token: str | None = None,
    ) -> WorkflowPage:
        call = calls.list_(
            namespace,
            state=state,
            definition=definition,
            page_size=page_size,
            page_token=page_token,
        )
        return WorkflowPage.model_validate((await self._transport.send(call)).json())

    async def workflow_history(self, namespace: str, workflow_id: str) -> list[WorkflowEvent]:
        response = await self._transport.send(calls.history(namespace, workflow_id))
        return [WorkflowEvent.model_validate(e) for e in response.json()["events"]]

    async def signal_workflow(
        self,
        namespace: str,
        workflow_id: str,
        name: str,
        payload: Any = None,
        *,
        signal_id: str | None = None,
    ) -> Signal:
        call = calls.signal(namespace, workflow_id, name, payload, signal_id)
        return Signal.model_validate((await self._transport.send(call)).json())

    async def pause_workflow(self, namespace: str, workflow_id: str, reason: str = "") -> Workflow:
        return await self._control(namespace, workflow_id, "pause", reason)

    async def resume_workflow(self, namespace: str, workflow_id: str, reason: str = "") -> Workflow:
        return await self._control(namespace, workflow_id, "resume", reason)

    async def cancel_workflow(self, namespace: str, workflow_id: str, reason: str = "") -> Workflow:
        return await self._control(namespace, workflow_id, "cancel", reason)

    async def _control(
        self, namespace: str, workflow_id: str, action: str, reason: str
    ) -> Workflow:
        call = calls.control(namespace, workflow_id, action, reason)
        return Workflow.model_validate((await self._transport.send(call)).json())

    async def wait_workflow(
        self,
        namespace: str,
        workflow_id: str,
        timeout: float | None = 30,
        poll_interval: float = 0.25,
    ) -> WorkflowDetail:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            detail = await self.get_workflow(namespace, workflow_id)
            if detail.state in FINISHED_WORKFLOW_STATES:
                return detail
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                raise _timeout(workflow_id, timeout, detail)
            await asyncio.sleep(
                poll_interval if remaining is None else min(poll_interval, remaining)
            )
