"""Instants on the command line, one rule for every flag: a date alone is midnight UTC; an
instant carries ``Z`` or an offset; one without a zone is refused with the UTC instant to type
instead, never read in a local zone by guess."""

from __future__ import annotations

import datetime as dt
import re

import typer

from orbit.cli.exits import ExitCode

_DATE = re.compile(r"^(\d{4}-\d{2}-\d{2})[zZ]?$")
_DATE_WITH_OFFSET = re.compile(r"^\d{4}-\d{2}-\d{2}[+-]")  # Python reads it as naive: refuse
EXAMPLE = "2026-01-01T00:00:00Z"
HELP = "a date (midnight UTC) or an instant with Z or an offset, e.g. 2026-01-01T00:00:00Z"


def _refuse(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(ExitCode.USAGE)


def parse_instant(value: str, flag: str) -> dt.datetime:
    """The instant, aware and in UTC; exit 2 with a fix that is accepted when typed."""
    text = value.strip()
    try:
        date = _DATE.match(text)
        if date:
            return dt.datetime.combine(dt.date.fromisoformat(date.group(1)), dt.time(), dt.UTC)
        if _DATE_WITH_OFFSET.match(text):
            raise ValueError("a date with an offset")
        parsed = dt.datetime.fromisoformat(re.sub(r"[zZ]$", "+00:00", text))
    except ValueError as exc:
        raise _refuse(f"{flag} {value!r} is not {HELP}") from exc
    if parsed.tzinfo is None:
        raise _refuse(
            f"{flag} {value!r} has no time zone; for that instant in UTC type instead: "
            f"{parsed:%Y-%m-%dT%H:%M:%S}Z"
        )
    return parsed.astimezone(dt.UTC)


def parse_utc(value: str, flag: str) -> dt.datetime:
    """The instant as naive UTC (how the store keeps time); see ``parse_instant``."""
    return parse_instant(value, flag).replace(tzinfo=None)
