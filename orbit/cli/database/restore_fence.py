"""`orbit admin restore-fence`: after restoring the database from a backup, fence it — close
dispatch and invalidate every grant issued before — then reopen once reconciled
(docs/operations/recovery.md#restoring-from-a-backup). Runs straight on the database, so it
works before any server is started (which is when it should run)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from typing import TYPE_CHECKING, Annotated, Any

import typer

from orbit.cli.database.options import Actor, DatabaseUrl, default_actor, store_engine
from orbit.cli.exits import ExitCode
from orbit.cli.output import LocalTime, Output, OutputFormat, document, instant, refuse_id, table

if TYPE_CHECKING:  # the store is imported inside the command: `orbit admin --help` stays light
    from orbit_store.fencing import FenceState, RestoreFence
    from orbit_store.recovery.restore_fence import FenceReport


def restore_fence(
    database_url: DatabaseUrl,
    reason: Annotated[
        str | None,
        typer.Option(
            help="Why: the restore, the backup it came from, the ticket (kept in the audit). "
            "Required to fence and to reopen."
        ),
    ] = None,
    reopen: Annotated[
        bool,
        typer.Option("--reopen", help="Open dispatch again, after you have reconciled."),
    ] = False,
    status: Annotated[
        bool, typer.Option("--status", help="Only show the fence: epoch, dispatch, history.")
    ] = False,
    actor: Actor = None,
    output: Output = OutputFormat.TABLE,
    local: LocalTime = False,
) -> None:
    """Fence the database after a restore: a new restore epoch, dispatch closed, every worker
    session ended, every lease granted before cut and settled by the lease rules (never started
    or safe → WAITING, unsafe and running → NEEDS_REVIEW). Attempts granted before can no longer
    start, renew or complete. Dispatch stays closed until --reopen. Both are audited."""
    from orbit_store.db import run_transaction
    from orbit_store.errors import StoreError
    from orbit_store.fencing import fence_history, fence_state, reopen_dispatch
    from orbit_store.recovery.restore_fence import restore_fence as run_fence

    refuse_id(output, "orbit admin restore-fence")
    if status and reopen:
        _usage("--status and --reopen exclude each other")
    if not status and not (reason or "").strip():
        _usage("--reason is required: say why (the restore, its backup, the ticket)")
    engine = store_engine(database_url)
    try:
        if status:
            with engine.connect() as conn:
                _print_status(fence_state(conn), fence_history(conn, limit=10), output)
            return
        who = actor or default_actor()
        assert reason is not None
        try:
            if reopen:
                fence = run_transaction(
                    engine, functools.partial(reopen_dispatch, reason=reason, actor=who)
                )
                _print_reopened(fence, output)
            else:
                _print_report(run_fence(engine, reason=reason, actor=who), output)
        except StoreError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(ExitCode.FAILED) from exc
    finally:
        engine.dispose()


def _usage(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(ExitCode.USAGE)


def _plain(value: Any) -> Any:
    """A dataclass as the API's JSON (instants in ISO 8601 UTC)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, dt.datetime):
        return instant(value, precise=True)
    return value


def _print_status(state: FenceState, history: list[RestoreFence], output: OutputFormat) -> None:
    if output.is_document:
        data = {**_plain(state), "history": _plain(history)}
        typer.echo(document(data, output))
        return
    typer.echo(f"restore epoch: {state.epoch}")
    typer.echo(f"dispatch:      {'open' if state.dispatch_open else 'CLOSED (fenced)'}")
    if not history:
        typer.echo("no restore fence so far")
        return
    headers = ["EPOCH", "FENCED AT", "BY", "REASON", "REOPENED AT", "REOPENED BY"]
    cells = [
        [
            str(f.epoch),
            instant(f.fenced_at),
            f.fenced_by,
            f.reason,
            instant(f.reopened_at) if f.reopened_at else "-",
            f.reopened_by or "-",
        ]
        for f in history
    ]
    typer.echo(table(headers, cells))


def _print_report(report: FenceReport, output: OutputFormat) -> None:
    if output.is_document:
        typer.echo(document(_plain(report), output))
        return
    fence = report.fence
    typer.echo(f"fenced: restore epoch {fence.previous_epoch} → {fence.epoch}; dispatch CLOSED")
    cells = [[n.namespace, str(n.sessions_ended), str(n.leases_cut)] for n in report.namespaces]
    if cells:
        typer.echo(table(["NAMESPACE", "SESSIONS ENDED", "LEASES CUT"], cells))
    settled = ", ".join(f"{state} {n}" for state, n in sorted(report.settled.items()))
    typer.echo(f"tasks settled by the lease rules: {settled or 'none'}")
    if report.errors:
        typer.echo(
            f"warning: {report.errors} tasks could not be settled now (logged); the server's "
            "reaper settles them",
            err=True,
        )
    typer.echo(
        "Reconcile (tasks in NEEDS_REVIEW, work done after the backup), then run "
        "`orbit admin restore-fence --reopen --reason …`."
    )


def _print_reopened(fence: RestoreFence, output: OutputFormat) -> None:
    if output.is_document:
        typer.echo(document(_plain(fence), output))
        return
    typer.echo(f"dispatch reopened under restore epoch {fence.epoch} (fence {fence.id})")
