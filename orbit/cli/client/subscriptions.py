"""`orbit subscription put|list|get|delete|redrive|pull`: result subscriptions through a server."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from orbit.cli.output import Column, LocalTime, Output, OutputFormat, document, plain, print_list
from orbit.cli.remote import Namespace, Reason, Server, Token, remote

app = typer.Typer(
    help="Declare result subscriptions, pull and acknowledge events, redrive parked ones.",
    no_args_is_help=True,
)
Name = Annotated[str, typer.Argument(help="Subscription name.")]


def _deliveries(state: str) -> Column:
    return Column(state, lambda s: s.deliveries.get(state, 0))


def _wanted(s: Any) -> str:
    wanted = {k: v for k, v in s.filter.model_dump().items() if v}
    return json.dumps(wanted) if wanted else "everything"


SUBSCRIPTION_COLUMNS = [
    Column.field("name"),
    Column.field("mode"),
    Column("TARGET", lambda s: s.url or "-"),
    Column("FILTER", _wanted),
    *(_deliveries(state) for state in ("PENDING", "DELIVERED", "PARKED")),
    Column.field("max_attempts", wide=True),
]


#: The API's field names → this module's options, so errors name what to change.
OPTIONS = {
    "mode": "--mode",
    "queues": "--queue",
    "handlers": "--handler",
    "outcomes": "--outcome",
    "url": "--url",
    "secret_ref": "--secret-ref",
    "max_attempts": "--max-attempts",
    "reason": "--reason",
    "discard_undelivered": "--discard-undelivered",
}


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
    url: Annotated[
        str | None,
        typer.Option(
            help="push: where to POST (a public address, or one the server's --webhook-allow "
            "lists)."
        ),
    ] = None,
    secret_ref: Annotated[
        str | None,
        typer.Option(
            help="push: the signing secret's name in this namespace's folder on the server "
            "(DIR/NAMESPACE/NAME)."
        ),
    ] = None,
    max_attempts: Annotated[int, typer.Option(help="Then the delivery is PARKED.")] = 10,
    reason: Reason = "",
    namespace: Namespace = None,
    server: Server = None,
    token: Token = None,
    output: Output = OutputFormat.TABLE,
    local: LocalTime = False,
) -> None:
    """Create or update a subscription (admin role; audited)."""
    with remote(server, token, namespace, OPTIONS) as r:
        sub = r.client.put_subscription(
            r.namespace,
            name,
            mode=mode,
            queues=queue,
            handlers=handler,
            outcomes=outcome,
            url=url,
            secret_ref=secret_ref,
            max_attempts=max_attempts,
            reason=reason,
        )
    if output.is_document:
        typer.echo(document(plain(sub), output))
    else:
        print_list([sub], SUBSCRIPTION_COLUMNS, output)


@app.command("list")
def list_(
    namespace: Namespace = None,
    server: Server = None,
    token: Token = None,
    output: Output = OutputFormat.TABLE,
    local: LocalTime = False,
) -> None:
    """List subscriptions with their deliveries per state."""
    with remote(server, token, namespace, OPTIONS) as r:
        subs = r.client.list_subscriptions(r.namespace)
    print_list(subs, SUBSCRIPTION_COLUMNS, output, empty="no subscriptions")


@app.command()
def delete(
    name: Name,
    reason: Reason = "",
    discard_undelivered: Annotated[
        bool,
        typer.Option("--discard-undelivered", help="Also drop PENDING/PARKED deliveries."),
    ] = False,
    namespace: Namespace = None,
    server: Server = None,
    token: Token = None,
) -> None:
    """Delete a subscription (refused while deliveries are undelivered unless told; audited)."""
    with remote(server, token, namespace, OPTIONS) as r:
        removed = r.client.delete_subscription(
            r.namespace, name, reason=reason, discard_undelivered=discard_undelivered
        )
    typer.echo(f"deleted subscription {name!r}; removed deliveries: {json.dumps(removed)}")


@app.command()
def redrive(
    name: Name,
    reason: Annotated[str, typer.Option(help="Why (recorded in the audit log).")],
    namespace: Namespace = None,
    server: Server = None,
    token: Token = None,
) -> None:
    """Send PARKED deliveries again with a fresh attempt budget (admin role; audited)."""
    with remote(server, token, namespace, OPTIONS) as r:
        count = r.client.redrive_subscription(r.namespace, name, reason=reason)
    typer.echo(f"redriven {count} parked deliveries of {name!r}")


@app.command()
def pull(
    name: Name,
    limit: Annotated[int, typer.Option(help="At most this many events.")] = 10,
    ack_deadline: Annotated[float, typer.Option(help="Seconds until unacked come back.")] = 30,
    ack: Annotated[bool, typer.Option("--ack", help="Acknowledge what was printed.")] = False,
    namespace: Namespace = None,
    server: Server = None,
    token: Token = None,
) -> None:
    """Pull events of a pull subscription as JSON lines (and acknowledge them with --ack)."""
    with remote(server, token, namespace, OPTIONS) as r:
        batch = r.client.pull_events(
            r.namespace, name, limit=limit, ack_deadline_seconds=ack_deadline
        )
        for event in batch.events:
            typer.echo(event.model_dump_json())
        if ack and batch.events:
            ids = [e.id for e in batch.events]
            r.client.ack_events(r.namespace, name, ids)
            typer.echo(f"acknowledged {len(ids)} events", err=True)
