"""`orbit task submit|submit-many|get|list|watch|cancel|review|retry`: tasks through a server,
via the SDK.

Exit codes (exits.py): 0 done; 2 invalid input; 4 token problem; 5 server unreachable; 1 any
other refusal. With `--wait` and `watch`: 0 SUCCEEDED, 10 FAILED, 11 CANCELLED, 12 NEEDS_REVIEW,
13 still going when the time ran out.
"""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Callable
from typing import Annotated

import typer

from orbit.cli import paging
from orbit.cli.client import task_bulk
from orbit.cli.client.progress_view import ProgressWatch
from orbit.cli.client.task_views import TASK_COLUMNS, describe_task, event_line
from orbit.cli.exits import ExitCode, for_state
from orbit.cli.inputs import read_json
from orbit.cli.interrupt import CtrlC
from orbit.cli.output import (
    LocalTime,
    Output,
    OutputFormat,
    plain,
    print_item,
    print_list,
    print_rows,
    refuse_id,
)
from orbit.cli.remote import Namespace, Reason, Remote, Server, Token, remote
from orbit_sdk import Task, TaskState, TimeoutExpired

app = typer.Typer(
    help="Submit, inspect, watch and cancel tasks on an Orbit server.", no_args_is_help=True
)
app.command("submit-many")(task_bulk.submit_many)


class Safety(enum.StrEnum):
    SAFE = "safe"
    UNSAFE = "unsafe"


class Decision(enum.StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"


TaskId = Annotated[str, typer.Argument(help="Task id.", show_default=False)]
ExpectedVersion = Annotated[
    int, typer.Option(help="The state_version you looked at (`orbit task get`).")
]
Interval = Annotated[float, typer.Option(min=0.05, help="Seconds between polls.")]

#: The API's field names → this module's options, so errors name what to change.
OPTIONS = {
    "handler": "--handler",
    "queue": "--queue",
    "params": "--params",
    "idempotency_key": "--key",
    "delay_seconds": "--delay",
    "priority": "--priority",
    "safety": "--safety",
    "retry": "--max-attempts",
    "concurrency_key": "--concurrency-key",
    "concurrency_limit": "--concurrency-limit",
    "state": "--state",
    "page_size": "--limit",
    "page_token": "--page-token",
    "decision": "--decision",
    "reason": "--reason",
    "evidence_ref": "--evidence",
    "expected_state_version": "--expected-version",
    "execution_ended": "--execution-ended",
    "safe_to_retry": "--safe-to-retry",
}


@app.command()
def submit(
    handler: Annotated[str, typer.Option(help="Handler name a worker registered.")],
    params: Annotated[
        str, typer.Option(help="JSON parameters: literal JSON, @FILE, or - for standard input.")
    ] = "{}",
    queue: Annotated[str, typer.Option(help="Queue.")] = "default",
    key: Annotated[
        str | None,
        typer.Option("--key", help="Idempotency key (default: a new one for this submission)."),
    ] = None,
    delay: Annotated[float | None, typer.Option(help="Seconds before it may run.")] = None,
    priority: Annotated[int | None, typer.Option(help="-1000..1000; lower runs first.")] = None,
    safety: Annotated[
        Safety | None, typer.Option(case_sensitive=False, help="safe or unsafe to re-run.")
    ] = None,
    max_attempts: Annotated[
        int | None, typer.Option(help="Attempt budget, the first included.")
    ] = None,
    concurrency_key: Annotated[
        str | None, typer.Option(help="Limit tasks sharing this key.")
    ] = None,
    concurrency_limit: Annotated[
        int | None, typer.Option(help="How many may run at once per key.")
    ] = None,
    wait: Annotated[
        float | None,
        typer.Option(help="Wait up to this many seconds for the outcome (exit code says which)."),
    ] = None,
    namespace: Namespace = None,
    server: Server = None,
    token: Token = None,
    output: Output = OutputFormat.TABLE,
    local: LocalTime = False,
) -> None:
    """Submit a task. Re-running with the same --key returns the same task."""
    if key is not None and not key.strip():
        raise typer.BadParameter(
            "must not be empty; leave it out to get a new key", param_hint="--key"
        )
    parsed = read_json(params, "--params")
    with remote(server, token, namespace, OPTIONS) as r:
        task = r.client.submit(
            r.namespace,
            handler=handler,
            queue=queue,
            params=parsed,
            idempotency_key=key,
            delay=delay,
            priority=priority,
            safety=safety.value if safety else None,
            max_attempts=max_attempts,
            concurrency_key=concurrency_key,
            concurrency_limit=concurrency_limit,
        )
        if wait is None:
            print_item(task, output, describe_task)
            return
        typer.echo(f"submitted {task.id}; waiting up to {wait:g}s for its outcome …", err=True)
        _wait_and_exit(r, task.id, wait, output)


def _wait_and_exit(r: Remote, task_id: str, timeout: float, output: OutputFormat) -> None:
    try:
        done = r.client.wait(r.namespace, task_id, timeout=timeout)
    except TimeoutExpired as exc:
        if exc.task is not None:
            print_item(exc.task, output, describe_task)
        typer.echo(
            f"error: task {task_id} is still {exc.task.state if exc.task else 'going'} after "
            f"{timeout:g}s; it keeps going (follow it with: orbit task watch {task_id})",
            err=True,
        )
        raise typer.Exit(ExitCode.STILL_RUNNING) from exc
    print_item(done, output, describe_task)
    if done.state != TaskState.SUCCEEDED:
        typer.echo(f"task {task_id} ended {done.state}", err=True)
    raise typer.Exit(for_state(done.state))


@app.command()
def get(
    task_id: TaskId,
    namespace: Namespace = None,
    server: Server = None,
    token: Token = None,
    output: Output = OutputFormat.TABLE,
    local: LocalTime = False,
) -> None:
    """Show a task: its fields, why it is in its state, its attempts and events."""
    with remote(server, token, namespace, OPTIONS) as r:
        print_item(r.client.get(r.namespace, task_id), output, describe_task)


@app.command("list")
def list_(
    queue: Annotated[str | None, typer.Option(help="Only this queue.")] = None,
    handler: Annotated[str | None, typer.Option(help="Only tasks of this handler.")] = None,
    state: Annotated[
        TaskState | None, typer.Option(case_sensitive=False, help="Only tasks in this state.")
    ] = None,
    limit: paging.Limit = 50,
    page_token: paging.PageToken = None,
    all_: paging.All = False,
    watch: Annotated[
        bool,
        typer.Option("--watch", "-w", help="Keep printing tasks as they change (Ctrl-C ends)."),
    ] = False,
    interval: Interval = 1.0,
    namespace: Namespace = None,
    server: Server = None,
    token: Token = None,
    output: Output = OutputFormat.TABLE,
    local: LocalTime = False,
) -> None:
    """List tasks, newest first (says so when more match than it shows)."""
    state_name = state.value if state else None
    with remote(server, token, namespace, OPTIONS) as r:

        def fetch(size: int, token: str | None) -> tuple[list[Task], str | None]:
            page = r.client.list(
                r.namespace, queue, state_name, page_size=size, page_token=token, handler=handler
            )
            return list(page.items), page.next_page_token

        items, next_token = paging.collect(
            fetch, limit=None if all_ else limit, page_token=page_token
        )
        if watch:
            _watch_list(
                lambda: paging.collect(fetch, limit=limit, page_token=None)[0],
                items,
                interval,
                output,
            )
            return
        print_list(items, TASK_COLUMNS, output, next_page_token=next_token, empty="no tasks found")
        if not output.is_document:
            paging.more_hint(len(items), next_token, "tasks")


def _watch_list(
    fetch: Callable[[], list[Task]], items: list[Task], interval: float, output: OutputFormat
) -> None:
    """Print the list, then each task again whenever its state_version changes; Ctrl-C ends."""
    seen: dict[str, int] = {}
    try:
        with CtrlC() as ctrl_c:
            while True:
                changed = [t for t in reversed(items) if seen.get(t.id) != t.state_version]
                if changed:
                    print_rows(changed, TASK_COLUMNS, output, header=not seen)
                    seen.update((t.id, t.state_version) for t in changed)
                if ctrl_c.wait(interval):
                    return
                items = fetch()
    except KeyboardInterrupt:  # pressed twice: a request in flight was interrupted
        return


@app.command()
def watch(
    task_id: TaskId,
    timeout: Annotated[
        float | None, typer.Option(help="Give up after this many seconds (exit 13).")
    ] = None,
    interval: Interval = 0.5,
    namespace: Namespace = None,
    server: Server = None,
    token: Token = None,
    output: Output = OutputFormat.TABLE,
    local: LocalTime = False,
) -> None:
    """Print a task's state changes as they happen, until it settles; the exit code says how
    it ended (0 SUCCEEDED, 10 FAILED, 11 CANCELLED, 12 NEEDS_REVIEW, 13 timed out)."""
    refuse_id(output, "orbit task watch (it prints events)")
    deadline = None if timeout is None else time.monotonic() + timeout
    shown = 0
    progress = ProgressWatch()
    with remote(server, token, namespace, OPTIONS) as r:
        try:
            while True:
                task = r.client.get(r.namespace, task_id)
                for event in task.events[shown:]:
                    if output.is_document:
                        typer.echo(json.dumps(plain(event)))
                    else:
                        progress.echo(event_line(event))
                shown = len(task.events)
                if not output.is_document:
                    progress.show(task.progress)
                if task.is_settled:
                    raise typer.Exit(for_state(task.state))
                if deadline is not None and time.monotonic() >= deadline:
                    typer.echo(
                        f"error: task {task_id} is still {task.state} after {timeout:g}s",
                        err=True,
                    )
                    raise typer.Exit(ExitCode.STILL_RUNNING)
                time.sleep(interval)
        finally:
            progress.close()


@app.command()
def cancel(
    task_id: TaskId,
    reason: Reason = "",
    namespace: Namespace = None,
    server: Server = None,
    token: Token = None,
    output: Output = OutputFormat.TABLE,
    local: LocalTime = False,
) -> None:
    """Cancel a task (a running one is cancelled once its worker confirms)."""
    with remote(server, token, namespace, OPTIONS) as r:
        print_item(r.client.cancel(r.namespace, task_id, reason=reason), output, describe_task)


@app.command()
def review(
    task_id: Annotated[str, typer.Argument(help="Task id (it must be NEEDS_REVIEW).")],
    decision: Annotated[Decision, typer.Option(case_sensitive=False, help="succeeded or failed.")],
    reason: Reason,
    evidence: Annotated[str, typer.Option(help="Where the evidence is (ticket, provider id).")],
    expected_version: ExpectedVersion,
    execution_ended: Annotated[
        bool, typer.Option("--execution-ended", help="Confirm no handler is still running.")
    ] = False,
    namespace: Namespace = None,
    server: Server = None,
    token: Token = None,
    output: Output = OutputFormat.TABLE,
    local: LocalTime = False,
) -> None:
    """Settle a task awaiting review as succeeded or failed (audited)."""
    with remote(server, token, namespace, OPTIONS) as r:
        task = r.client.review(
            r.namespace,
            task_id,
            decision=decision.value,
            reason=reason,
            evidence_ref=evidence,
            expected_state_version=expected_version,
            execution_ended=execution_ended,
        )
        print_item(task, output, describe_task)


@app.command()
def retry(
    task_id: Annotated[str, typer.Argument(help="Task id (FAILED or CANCELLED).")],
    reason: Reason,
    expected_version: ExpectedVersion,
    safe_to_retry: Annotated[
        bool, typer.Option("--safe-to-retry", help="Confirm running it again is safe.")
    ] = False,
    namespace: Namespace = None,
    server: Server = None,
    token: Token = None,
    output: Output = OutputFormat.TABLE,
    local: LocalTime = False,
) -> None:
    """Create the one manual retry of a task: a new task linked by retry_of."""
    with remote(server, token, namespace, OPTIONS) as r:
        task = r.client.retry(
            r.namespace,
            task_id,
            reason=reason,
            expected_state_version=expected_version,
            safe_to_retry=safe_to_retry,
        )
        print_item(task, output, describe_task)
