"""`orbit task submit|get|list|cancel`: talk to a server through the SDK."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from rich.table import Table

from orbit_sdk import Client, OrbitError

from .remote import DEFAULT_SERVER, Namespace, Output, Server, Token, console

app = typer.Typer(help="Submit, inspect and cancel tasks on an Orbit server.", no_args_is_help=True)
out = console()
T = TypeVar("T")


def _call(server: str, token: str, action: Callable[[Client], T]) -> T:
    try:
        with Client(server, token=token) as client:
            return action(client)
    except OrbitError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc


def _print_task(task: Any, output: str) -> None:
    if output == "json":
        typer.echo(task.model_dump_json(indent=2))
        return
    table = Table("FIELD", "VALUE", show_header=False)
    for name in (
        "id",
        "namespace",
        "queue",
        "handler",
        "state",
        "state_version",
        "attempts_used",
        "max_attempts",
        "safety",
        "cancel_requested",
        "created_at",
        "finished_at",
        "result",
        "error",
    ):
        value = getattr(task, name, None)
        table.add_row(
            name, json.dumps(value, default=str) if isinstance(value, dict | list) else str(value)
        )
    if task.state == "WAITING":
        table.add_row("waiting", _waiting(task))
    out.print(table)


WAITING_REASONS = {
    "ready": "ready to be leased",
    "scheduled": "scheduled: not due before available_at",
    "gate_closed": "its execution gate is closed (its workflow is paused)",
    "concurrency_limit": "its concurrency key has no free permit",
}


def _waiting(task: Any) -> str:
    """Why a WAITING task waits, and whether any live worker can run it at all."""
    why = WAITING_REASONS.get(task.waiting_reason, task.waiting_reason or "")
    if task.runnable_by_live_worker is False:
        why += (
            f"; no live worker serves queue {task.queue!r} with handler {task.handler!r}: it "
            "will not start until one does"
        )
    return why


@app.command()
def submit(
    handler: Annotated[str, typer.Option(help="Handler name the worker registered.")],
    namespace: Namespace = "default",
    queue: Annotated[str, typer.Option(help="Queue.")] = "default",
    params: Annotated[str, typer.Option(help="JSON parameters.")] = "{}",
    key: Annotated[str | None, typer.Option("--key", help="Idempotency key.")] = None,
    delay: Annotated[float | None, typer.Option(help="Seconds before it may run.")] = None,
    priority: Annotated[int | None, typer.Option(help="Lower runs first.")] = None,
    safety: Annotated[str | None, typer.Option(help="safe or unsafe.")] = None,
    wait: Annotated[
        float | None, typer.Option(help="Wait up to this many seconds for the outcome.")
    ] = None,
    server: Server = DEFAULT_SERVER,
    token: Token = "",
    output: Output = "table",
) -> None:
    """Submit a task. Re-running with the same --key returns the same task."""
    try:
        parsed = json.loads(params)
    except json.JSONDecodeError as exc:
        typer.echo(f"error: --params is not valid JSON: {exc}", err=True)
        raise typer.Exit(2) from exc
    task = _call(
        server,
        token,
        lambda c: c.submit(
            namespace,
            handler=handler,
            queue=queue,
            params=parsed,
            idempotency_key=key,
            delay=delay,
            priority=priority,
            safety=safety,
        ),
    )
    if wait is not None:
        typer.echo(f"submitted {task.id}; waiting up to {wait:g}s for its outcome …", err=True)
        task = _call(server, token, lambda c: c.wait(namespace, task.id, timeout=wait))
    _print_task(task, output)


@app.command()
def get(
    task_id: Annotated[str, typer.Argument(help="Task id.")],
    namespace: Namespace = "default",
    server: Server = DEFAULT_SERVER,
    token: Token = "",
    output: Output = "table",
) -> None:
    """Show a task (with its attempts and events in JSON output)."""
    _print_task(_call(server, token, lambda c: c.get(namespace, task_id)), output)


@app.command("list")
def list_(
    namespace: Namespace = "default",
    queue: Annotated[str | None, typer.Option(help="Only this queue.")] = None,
    state: Annotated[str | None, typer.Option(help="Only this state.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many (newest first).")] = 50,
    server: Server = DEFAULT_SERVER,
    token: Token = "",
    output: Output = "table",
) -> None:
    """List tasks, newest first."""
    page = _call(
        server, token, lambda c: c.list(namespace, queue=queue, state=state, page_size=limit)
    )
    if output == "json":
        typer.echo(json.dumps([t.model_dump(mode="json") for t in page.items], indent=2))
        return
    table = Table("ID", "QUEUE", "HANDLER", "STATE", "ATTEMPTS", "CREATED")
    for t in page.items:
        table.add_row(
            t.id,
            t.queue,
            t.handler,
            t.state,
            f"{t.attempts_used}/{t.max_attempts}",
            str(t.created_at),
        )
    out.print(table)


@app.command()
def cancel(
    task_id: Annotated[str, typer.Argument(help="Task id.")],
    namespace: Namespace = "default",
    reason: Annotated[str, typer.Option(help="Why (recorded in the audit log).")] = "",
    server: Server = DEFAULT_SERVER,
    token: Token = "",
    output: Output = "table",
) -> None:
    """Cancel a task (a running one is cancelled once its worker confirms)."""
    _print_task(_call(server, token, lambda c: c.cancel(namespace, task_id, reason=reason)), output)


@app.command()
def review(
    task_id: Annotated[str, typer.Argument(help="Task id (it must be NEEDS_REVIEW).")],
    decision: Annotated[str, typer.Option(help="succeeded or failed.")],
    reason: Annotated[str, typer.Option(help="Why (recorded in the audit log).")],
    evidence: Annotated[str, typer.Option(help="Where the evidence is (ticket, provider id).")],
    expected_version: Annotated[
        int, typer.Option(help="The state_version you looked at (`orbit task get`).")
    ],
    execution_ended: Annotated[
        bool, typer.Option("--execution-ended", help="Confirm no handler is still running.")
    ] = False,
    namespace: Namespace = "default",
    server: Server = DEFAULT_SERVER,
    token: Token = "",
    output: Output = "table",
) -> None:
    """Settle a task awaiting review as succeeded or failed (audited)."""
    task = _call(
        server,
        token,
        lambda c: c.review(
            namespace,
            task_id,
            decision=decision,
            reason=reason,
            evidence_ref=evidence,
            expected_state_version=expected_version,
            execution_ended=execution_ended,
        ),
    )
    _print_task(task, output)


@app.command()
def retry(
    task_id: Annotated[str, typer.Argument(help="Task id (FAILED or CANCELLED).")],
    reason: Annotated[str, typer.Option(help="Why (recorded in the audit log).")],
    expected_version: Annotated[
        int, typer.Option(help="The state_version you looked at (`orbit task get`).")
    ],
    safe_to_retry: Annotated[
        bool, typer.Option("--safe-to-retry", help="Confirm running it again is safe.")
    ] = False,
    namespace: Namespace = "default",
    server: Server = DEFAULT_SERVER,
    token: Token = "",
    output: Output = "table",
) -> None:
    """Create the one manual retry of a task: a new task linked by retry_of."""
    task = _call(
        server,
        token,
        lambda c: c.retry(
            namespace,
            task_id,
            reason=reason,
            expected_state_version=expected_version,
            safe_to_retry=safe_to_retry,
        ),
    )
    _print_task(task, output)
