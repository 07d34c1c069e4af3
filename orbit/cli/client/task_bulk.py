"""`orbit task submit-many`: tasks from JSON lines (a file or standard input), sent in batches
of up to 1,000 through ``Client.submit_many``; one result per line.

Exit codes (exits.py): 0 every line created or replayed; 1 a line was refused or conflicted
(the others were accepted); 2 the input is invalid (nothing was sent); 4 token; 5 server
unreachable (the batches sent before stay accepted; re-running with the same keys is safe).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from orbit.cli.exits import ExitCode
from orbit.cli.inputs import read_text, storable_json
from orbit.cli.output import Column, LocalTime, Output, OutputFormat, print_list
from orbit.cli.remote import Namespace, Server, Token, remote

#: A line's fields (the API's TaskSubmission) → ``Client.submit`` keywords.
FIELDS = {
    "handler": "handler",
    "queue": "queue",
    "params": "params",
    "idempotency_key": "idempotency_key",
    "delay_seconds": "delay",
    "available_at": "available_at",
    "deadline_at": "deadline_at",
    "priority": "priority",
    "concurrency_key": "concurrency_key",
    "concurrency_limit": "concurrency_limit",
    "safety": "safety",
}
RETRY_FIELDS = {
    "max_attempts",
    "backoff_initial_seconds",
    "backoff_max_seconds",
    "backoff_multiplier",
}

COLUMNS = [
    Column("LINE", lambda r: str(r.index + 1)),
    Column.field("status"),
    Column.field("task_id"),
    Column("DETAIL", lambda r: (r.problem.detail or r.problem.title) if r.problem else ""),
    Column.field("idempotency_key", wide=True),
]


def submit_many(
    file: Annotated[
        str,
        typer.Option(
            "--file",
            "-f",
            help="JSON lines, one task per line with the API's submission fields "
            '({"handler": "shop.mail", "params": {…}, "idempotency_key": "…"}); - for stdin.',
        ),
    ],
    queue: Annotated[str, typer.Option(help="Queue of lines that name none.")] = "default",
    key_prefix: Annotated[
        str | None,
        typer.Option(
            help="Key of a line without idempotency_key: PREFIX + its line number, so running "
            "the same file again replays instead of doubling (default: a new key per line)."
        ),
    ] = None,
    batch_size: Annotated[int, typer.Option(min=1, max=1000, help="Tasks per request.")] = 1000,
    namespace: Namespace = None,
    server: Server = None,
    token: Token = None,
    output: Output = OutputFormat.TABLE,
    local: LocalTime = False,
) -> None:
    """Submit many tasks from JSON lines; prints one result per line (progress on stderr)."""
    items = _parse(read_text(file if file == "-" else f"@{file}", "--file"), queue, key_prefix)
    if not items:
        raise typer.BadParameter("no tasks: the input has no JSON lines", param_hint="--file")

    def progress(done: int, accepted: int) -> None:
        typer.echo(f"sent {done}/{len(items)}, {accepted} accepted", err=True)

    with remote(server, token, namespace) as r:
        results = r.client.submit_many(
            r.namespace, items, batch_size=batch_size, on_progress=progress
        )
    print_list(results, COLUMNS, output)
    failed = [result for result in results if not result.ok]
    if failed:
        typer.echo(f"error: {len(failed)} of {len(results)} lines were not accepted", err=True)
        raise typer.Exit(ExitCode.FAILED)


def _parse(text: str, queue: str, key_prefix: str | None) -> list[dict[str, Any]]:
    items = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = storable_json(line)
        except json.JSONDecodeError as exc:
            raise typer.BadParameter(
                f"line {number}: not JSON: {exc.msg}", param_hint="--file"
            ) from exc
        except ValueError as exc:
            raise typer.BadParameter(f"line {number}: {exc}", param_hint="--file") from exc
        if not isinstance(data, dict) or not data.get("handler"):
            raise typer.BadParameter(
                f'line {number}: expected an object with a "handler"', param_hint="--file"
            )
        items.append(_item(data, number, queue, key_prefix))
    return items


def _item(data: dict[str, Any], number: int, queue: str, key_prefix: str | None) -> Any:
    retry = data.pop("retry", None) or {}
    unknown = sorted(set(data) - set(FIELDS)) + sorted(set(retry) - RETRY_FIELDS)
    if unknown:
        known = ", ".join([*FIELDS, "retry"])
        raise typer.BadParameter(
            f"line {number}: unknown field {unknown[0]!r} (known: {known})", param_hint="--file"
        )
    item = {FIELDS[name]: value for name, value in data.items()}
    item.update(retry)
    item.setdefault("queue", queue)
    if key_prefix is not None:
        item.setdefault("idempotency_key", f"{key_prefix}{number}")
    return item
