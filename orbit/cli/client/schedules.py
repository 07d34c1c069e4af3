"""`orbit schedule create|update|get|list|suspend|resume|delete|preview`.

Everything but ``preview`` talks to a server through the SDK; ``preview`` computes the instants
here, with the server's own rules, so an expression can be checked before anything exists.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

import typer

from orbit.cli import timeflags
from orbit.cli.exits import ExitCode
from orbit.cli.inputs import read_json
from orbit.cli.output import (
    Column,
    LocalTime,
    Output,
    OutputFormat,
    document,
    instant,
    print_fields,
    print_item,
    print_list,
    print_section,
    refuse_id,
)
from orbit.cli.remote import Namespace, Reason, Server, Token, remote
from orbit_sdk import Schedule, ScheduleOccurrence
from orbit_store.schedules import cron as crons
from orbit_store.schedules.model import InvalidSchedule

app = typer.Typer(
    help="Cron schedules that submit tasks (time zones, DST, misfire and overlap policies).",
    no_args_is_help=True,
)

#: The API's field names → this module's options, so errors name what to change.
OPTIONS = {
    "cron": "--cron",
    "time_zone": "--time-zone",
    "handler": "--handler",
    "queue": "--queue",
    "params": "--params",
    "concurrency_policy": "--concurrency-policy",
    "starting_deadline_seconds": "--starting-deadline-seconds",
    "misfire_policy": "--misfire-policy",
    "catch_up_limit": "--catch-up-limit",
    "start_at": "--start-at",
    "end_at": "--end-at",
    "suspend": "--suspend",
    "reason": "--reason",
}

Name = Annotated[str, typer.Argument(help="Schedule name (a DNS label).")]
Cron = Annotated[
    str | None,
    typer.Option(help="Cron expression: 5 fields, an optional leading seconds field, or @daily…"),
]
TimeZone = Annotated[str | None, typer.Option("--time-zone", help="IANA zone, e.g. Europe/Berlin.")]
Handler = Annotated[str | None, typer.Option(help="Handler the fired task runs.")]
Queue = Annotated[str | None, typer.Option(help="Queue of the fired tasks.")]
Params = Annotated[
    str | None, typer.Option(help="JSON parameters of the fired tasks (JSON, @FILE or -).")
]
Concurrency = Annotated[
    str | None, typer.Option("--concurrency-policy", help="Allow, Forbid or Replace.")
]
Deadline = Annotated[
    int | None,
    typer.Option(help="Seconds after its instant a fire may still start; later is 'missed'."),
]
Misfire = Annotated[
    str | None,
    typer.Option("--misfire-policy", help="After downtime: Skip, FireOnce or CatchUp."),
]
CatchUp = Annotated[int | None, typer.Option(help="CatchUp fires at most this many.")]
Instant = Annotated[
    str | None, typer.Option(help=f"{timeflags.HELP[0].upper()}{timeflags.HELP[1:]}.")
]
Suspend = Annotated[bool | None, typer.Option("--suspend/--no-suspend", help="Created suspended.")]


def parse_instant(value: str | None, option: str) -> dt.datetime | None:
    """An instant as an aware UTC datetime (timeflags.py); exit 2 with the fix if not one."""
    return None if value is None else timeflags.parse_instant(value, option)


def utc(value: dt.datetime | None) -> str:
    """The instant as every time is printed (output.instant: UTC, or --local's zone)."""
    return "-" if value is None else instant(value)


def local(value: dt.datetime | None, zone: str) -> str:
    if value is None:
        return "-"
    try:
        return value.astimezone(crons.zone_of(zone)).strftime("%Y-%m-%d %H:%M:%S %Z (%z)")
    except InvalidSchedule:
        return "-"


def _spec_of(current: Schedule) -> dict[str, Any]:
    task = current.task
    return {
        "cron": current.cron,
        "time_zone": current.time_zone,
        "handler": task.handler,
        "queue": task.queue,
        "params": task.params,
        "priority": task.priority,
        "safety": task.safety,
        "max_attempts": task.max_attempts,
        "suspend": current.suspend,
        "concurrency_policy": current.concurrency_policy,
        "starting_deadline_seconds": current.starting_deadline_seconds,
        "misfire_policy": current.misfire_policy,
        "catch_up_limit": current.catch_up_limit,
        "start_at": current.start_at,
        "end_at": current.end_at,
    }


def _changes(**given: Any) -> dict[str, Any]:
    changes = {k: v for k, v in given.items() if v is not None}
    if "params" in changes:
        changes["params"] = read_json(changes["params"], "--params")
    for key in ("start_at", "end_at"):
        if key in changes:
            changes[key] = parse_instant(changes[key], "--" + key.replace("_", "-"))
    return changes


def _policies(schedule: Schedule) -> str:
    text = f"concurrency {schedule.concurrency_policy}, misfire {schedule.misfire_policy}"
    if schedule.misfire_policy == "CatchUp":
        text += f" (up to {schedule.catch_up_limit})"
    if schedule.starting_deadline_seconds:
        text += f", starting deadline {schedule.starting_deadline_seconds}s"
    return text


SCHEDULE_COLUMNS = [
    Column.field("name"),
    Column("SCHEDULE", lambda s: s.cron),
    Column("TIMEZONE", lambda s: s.time_zone),
    Column("SUSPEND", lambda s: s.suspend),
    Column("LAST", lambda s: utc(s.last_fire_at)),
    Column("NEXT", lambda s: utc(s.next_fire_at)),
    Column.field("state"),
    Column("TASK", lambda s: f"{s.task.handler}@{s.task.queue}", wide=True),
    Column.field("version", wide=True),
]


def _print(schedule: Schedule, output: OutputFormat) -> None:
    print_item(schedule, output, _describe)


def _describe(schedule: Schedule, wide: bool) -> None:
    zone = schedule.time_zone
    print_fields(
        [
            ("name", schedule.name),
            ("cron", f"{schedule.cron}  ({zone})"),
            ("task", f"{schedule.task.handler} on queue {schedule.task.queue}"),
            ("state", f"{schedule.state} (version {schedule.version})"),
            ("policies", _policies(schedule)),
            ("last fire", f"{utc(schedule.last_fire_at)}  {local(schedule.last_fire_at, zone)}"),
            ("next fire", f"{utc(schedule.next_fire_at)}  {local(schedule.next_fire_at, zone)}"),
            ("active tasks", str(schedule.active_tasks)),
        ]
    )
    print_section("occurrences", schedule.occurrences, OCCURRENCE_COLUMNS)


def _when(occurrence: ScheduleOccurrence) -> str:
    when = utc(occurrence.scheduled_at)
    if occurrence.instants > 1:
        when += f" .. {utc(occurrence.through_at)} ({occurrence.instants})"
    return when


OCCURRENCE_COLUMNS = [
    Column("SCHEDULED", _when),
    Column.field("status"),
    Column.field("reason"),
    Column("TASK", lambda o: o.task_id),
    Column.field("task_state"),
    Column("DETAIL", lambda o: o.message),
]


@app.command()
def create(
    name: Name,
    cron: Annotated[str, typer.Option(help="Cron expression (5 fields, or @daily …).")],
    handler: Annotated[str, typer.Option(help="Handler the fired task runs.")],
    time_zone: Annotated[str, typer.Option("--time-zone", help="IANA zone.")] = "UTC",
    queue: Annotated[str, typer.Option(help="Queue of the fired tasks.")] = "default",
    params: Annotated[str, typer.Option(help="JSON parameters of the fired tasks.")] = "{}",
    concurrency_policy: Concurrency = None,
    starting_deadline_seconds: Deadline = None,
    misfire_policy: Misfire = None,
    catch_up_limit: CatchUp = None,
    start_at: Instant = None,
    end_at: Instant = None,
    suspend: Suspend = None,
    reason: Reason = "",
    namespace: Namespace = None,
    server: Server = None,
    token: Token = None,
    output: Output = OutputFormat.TABLE,
    local: LocalTime = False,
) -> None:
    """Create a schedule (audited). Check the expression first with `orbit schedule preview`."""
    spec = _changes(
        cron=cron,
        handler=handler,
        time_zone=time_zone,
        queue=queue,
        params=params,
        concurrency_policy=concurrency_policy,
        starting_deadline_seconds=starting_deadline_seconds,
        misfire_policy=misfire_policy,
        catch_up_limit=catch_up_limit,
        start_at=start_at,
        end_at=end_at,
        suspend=suspend,
    )
    with remote(server, token, namespace, OPTIONS) as r:
        created = r.client.create_schedule(r.namespace, name, reason=reason, **spec)
    _print(created, output)


@app.command()
def update(
    name: Name,
    cron: Cron = None,
    handler: Handler = None,
    time_zone: TimeZone = None,
    queue: Queue = None,
    params: Params = None,
    concurrency_policy: Concurrency = None,
    starting_deadline_seconds: Deadline = None,
    misfire_policy: Misfire = None,
    catch_up_limit: CatchUp = None,
    start_at: Instant = None,
    end_at: Instant = None,
    reason: Reason = "",
    namespace: Namespace = None,
    server: Server = None,
    token: Token = None,
    output: Output = OutputFormat.TABLE,
    local: LocalTime = False,
) -> None:
    """Change the given fields (a new version, starting from now; nothing fires twice; audited)."""
    changes = _changes(
        cron=cron,
        handler=handler,
        time_zone=time_zone,
        queue=queue,
        params=params,
        concurrency_policy=concurrency_policy,
        starting_deadline_seconds=starting_deadline_seconds,
        misfire_policy=misfire_policy,
        catch_up_limit=catch_up_limit,
        start_at=start_at,
        end_at=end_at,
    )

    with remote(server, token, namespace, OPTIONS) as r:
        current = r.client.get_schedule(r.namespace, name, occurrences=0)
        spec = {**_spec_of(current), **changes}
        updated = r.client.update_schedule(
            r.namespace, name, expected_version=current.version, reason=reason, **spec
        )
    _print(updated, output)


@app.command()
def get(
    name: Name,
    occurrences: Annotated[int, typer.Option(help="Show this many recent occurrences.")] = 10,
    namespace: Namespace = None,
    server: Server = None,
    token: Token = None,
    output: Output = OutputFormat.TABLE,
    local: LocalTime = False,
) -> None:
    """Show a schedule: last and next fire (UTC and local) and its recent occurrences."""
    with remote(server, token, namespace, OPTIONS) as r:
        schedule = r.client.get_schedule(r.namespace, name, occurrences)
    _print(schedule, output)


@app.command("list")
def list_(
    namespace: Namespace = None,
    server: Server = None,
    token: Token = None,
    output: Output = OutputFormat.TABLE,
    local: LocalTime = False,
) -> None:
    """List schedules by name."""
    with remote(server, token, namespace, OPTIONS) as r:
        page = r.client.list_schedules(r.namespace)
    print_list(page.items, SCHEDULE_COLUMNS, output, empty="no schedules")


@app.command()
def suspend(
    name: Name,
    reason: Reason = "",
    namespace: Namespace = None,
    server: Server = None,
    token: Token = None,
    output: Output = OutputFormat.TABLE,
    local: LocalTime = False,
) -> None:
    """Suspend: nothing fires until resumed (missed instants are not caught up; audited)."""
    with remote(server, token, namespace, OPTIONS) as r:
        suspended = r.client.suspend_schedule(r.namespace, name, reason)
    _print(suspended, output)


@app.command()
def resume(
    name: Name,
    reason: Reason = "",
    namespace: Namespace = None,
    server: Server = None,
    token: Token = None,
    output: Output = OutputFormat.TABLE,
    local: LocalTime = False,
) -> None:
    """Resume from now (audited)."""
    with remote(server, token, namespace, OPTIONS) as r:
        resumed = r.client.resume_schedule(r.namespace, name, reason)
    _print(resumed, output)


@app.command()
def delete(
    name: Name,
    reason: Reason = "",
    namespace: Namespace = None,
    server: Server = None,
    token: Token = None,
) -> None:
    """Delete a schedule (audited; its occurrences stay as history, its tasks are left alone)."""
    with remote(server, token, namespace, OPTIONS) as r:
        r.client.delete_schedule(r.namespace, name, reason)
    typer.echo(f"schedule {name} deleted")


@app.command()
def preview(
    cron: Annotated[str, typer.Option(help="Cron expression to check.")],
    time_zone: Annotated[str, typer.Option("--time-zone", help="IANA zone.")] = "UTC",
    from_: Annotated[
        str | None,
        typer.Option("--from", help=f"Start after this instant (default: now): {timeflags.HELP}."),
    ] = None,
    count: Annotated[int, typer.Option(min=1, max=1000, help="How many instants.")] = 10,
    output: Output = OutputFormat.TABLE,
) -> None:
    """Print the next fire instants in UTC and in the zone's local time (no server needed)."""
    refuse_id(output, "orbit schedule preview")
    after = parse_instant(from_, "--from") or dt.datetime.now(dt.UTC)
    try:
        expression = crons.parse(cron, time_zone)
    except InvalidSchedule as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(ExitCode.USAGE) from exc
    found = crons.preview(expression, after=crons.to_utc(after), count=count)
    if output.is_document:
        rows = [{"at": instant(p.at, precise=True), "local": p.local.isoformat()} for p in found]
        typer.echo(document({"items": rows}, output))
        return
    for p in found:
        typer.echo(f"{instant(p.at)}  {p.local:%Y-%m-%d %H:%M:%S %Z (%z)}")
