"""UTC instants on the command line: ISO 8601 with ``Z`` or an offset, never a local guess."""

from __future__ import annotations

import datetime as dt

import typer


def parse_utc(value: str, flag: str) -> dt.datetime:
    """The instant as naive UTC (how the store keeps time); exit 2 with the fix otherwise."""
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as exc:
        typer.echo(f"error: {flag} {value!r} is not ISO 8601 (e.g. 2026-01-01T00:00:00Z)", err=True)
        raise typer.Exit(2) from exc
    if parsed.tzinfo is None:
        typer.echo(
            f"error: {flag} {value!r} has no time zone; add Z for UTC (e.g. {value}Z)", err=True
        )
        raise typer.Exit(2)
    return parsed.astimezone(dt.UTC).replace(tzinfo=None)
