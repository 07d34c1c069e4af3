"""`orbit subscription put|list|get|delete|redrive|pull`: result subscriptions through a server."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table

from .remote import DEFAULT_SERVER, Namespace, Output, Server, Token, console
from .tasks import _call

app = typer.Typer(
    help="Declare result subscriptions, pull and acknowledge events, redrive parked ones.",
    no_args_is_help=True,
)
out = console()
Name = Annotated[str, typer.Argument(help="Subscription name.")]
Reason = Annotated[str, typer.Option(help="Why (recorded in the audit log).")]


def _print(items: list[Any], output: str) -> None:
    if output == "json":
        typer.echo(json.dumps([i.model_dump(mode="json") for i in items], indent=2))
        return
    table = Table("NAME", "MODE", "TARGET", "FILTER", "PENDING", "DELIVERED", "PARKED")
    for s in items:
        wanted = {k: v for k, v in s.filter.model_dump().items() if v}
        table.add_row(
            s.name,
            s.mode,
            s.url or "-",
            json.dumps(wanted) if wanted else "everything",
            *(str(s.deliveries.get(state, 0)) for state in ("PENDING", "DELIVERED", "PARKED")),
        )
    out.print(table)


@app.command()
def put(
    name: Name,
    mode: Annotated[str, typer.Option(help="pull or push.")] = "pull",
    queue: Annotated[list[str] | None, typer.Option(help="Only these queues (repeat).")] = None,
    handler: Annotated[
        list[str] | None, typer.Option(help="Only handlers matching (glob; repeat).")
    ] = None,
    outcome: Annotated[
        list[str] | None,
        typer.Option(help="Only these outcomes: SUCCEEDED FAILED CANCELLED NEEDS_REVIEW."),
    ] = None,
    url: Annotated[str | None, typer.Option(help="push: where to POST.")] = None,
    secret_ref: Annotated[
        str | None, typer.Option(help="push: the signing secret's name on the server.")
    ] = None,
    max_attempts: Annotated[int, typer.Option(help="Then the delivery is PARKED.")] = 10,
    reason: Reason = "",
    namespace: Namespace = "default",
    server: Server = DEFAULT_SERVER,
    token: Token = "",
    output: Output = "table",
) -> None:
    """Create or update a subscription (admin role; audited)."""
    sub = _call(
        server,
        token,
        lambda c: c.put_subscription(
            namespace,
            name,
            mode=mode,
            queues=queue,
            handlers=handler,
            outcomes=outcome,
            url=url,
            secret_ref=secret_ref,
            max_attempts=max_attempts,
            reason=reason,
        ),
    )
    _print([sub], output)


@app.command("list")
def list_(
    namespace: Namespace = "default",
    server: Server = DEFAULT_SERVER,
    token: Token = "",
    output: Output = "table",
) -> None:
    """List subscriptions with their deliveries per state."""
    _print(_call(server, token, lambda c: c.list_subscriptions(namespace)), output)


@app.command()
def delete(
    name: Name,
    reason: Reason = "",
    discard_undelivered: Annotated[
        bool,
        typer.Option("--discard-undelivered", help="Also drop PENDING/PARKED deliveries."),
    ] = False,
    namespace: Namespace = "default",
    server: Server = DEFAULT_SERVER,
    token: Token = "",
) -> None:
    """Delete a subscription (refused while deliveries are undelivered unless told; audited)."""
    removed = _call(
        server,
        token,
        lambda c: c.delete_subscription(
            namespace, name, reason=reason, discard_undelivered=discard_undelivered
        ),
    )
    typer.echo(f"deleted subscription {name!r}; removed deliveries: {json.dumps(removed)}")


@app.command()
def redrive(
    name: Name,
    reason: Annotated[str, typer.Option(help="Why (recorded in the audit log).")],
    namespace: Namespace = "default",
    server: Server = DEFAULT_SERVER,
    token: Token = "",
) -> None:
    """Send PARKED deliveries again with a fresh attempt budget (admin role; audited)."""
    count = _call(server, token, lambda c: c.redrive_subscription(namespace, name, reason=reason))
    typer.echo(f"redriven {count} parked deliveries of {name!r}")


@app.command()
def pull(
    name: Name,
    limit: Annotated[int, typer.Option(help="At most this many events.")] = 10,
    ack_deadline: Annotated[float, typer.Option(help="Seconds until unacked come back.")] = 30,
    ack: Annotated[bool, typer.Option("--ack", help="Acknowledge what was printed.")] = False,
    namespace: Namespace = "default",
    server: Server = DEFAULT_SERVER,
    token: Token = "",
) -> None:
    """Pull events of a pull subscription as JSON lines (and acknowledge them with --ack)."""
    batch = _call(
        server,
        token,
        lambda c: c.pull_events(namespace, name, limit=limit, ack_deadline_seconds=ack_deadline),
    )
    for event in batch.events:
        typer.echo(event.model_dump_json())
    if ack and batch.events:
        ids = [e.id for e in batch.events]
        _call(server, token, lambda c: c.ack_events(namespace, name, ids))
        typer.echo(f"acknowledged {len(ids)} events", err=True)
