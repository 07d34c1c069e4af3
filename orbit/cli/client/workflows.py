"""`orbit workflow publish|start|get|list|signal|pause|resume|cancel|history`: workflows on an
Orbit server, through the SDK."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from orbit.cli.exits import ExitCode, for_state
from orbit.cli.inputs import read_json
from orbit.cli.output import (
    Column,
    LocalTime,
    Output,
    OutputFormat,
    cell,
    print_fields,
    print_item,
    print_list,
    print_section,
)
from orbit.cli.remote import Namespace, Reason, Server, Token, remote
from orbit_sdk import (
    Signal,
    TimeoutExpired,
    Workflow,
    WorkflowDefinition,
    WorkflowDetail,
    WorkflowStep,
)

app = typer.Typer(
    help="Publish workflow definitions; start, signal, pause, resume, cancel and inspect "
    "workflows on an Orbit server.",
    no_args_is_help=True,
)

#: The API's field names → this module's options, so errors name what to change.
OPTIONS = {
    "input": "--input",
    "start_key": "--key",
    "version": "--version",
    "payload": "--payload",
    "signal_id": "--signal-id",
    "reason": "--reason",
    "state": "--state",
    "definition": "--definition",
    "page_size": "--limit",
    "spec": "--file",
    "name": "--name",
}

WorkflowId = Annotated[str, typer.Argument(help="Workflow id.")]
ControlReason = Annotated[str, typer.Option(help="Why (recorded in the history and audit log).")]


def _json_option(text: str | None, option: str) -> Any:
    return None if text is None else read_json(text, option)


def _text(value: Any) -> str:
    return cell(value) if isinstance(value, dict | list | dt.datetime) else str(value)


WORKFLOW_COLUMNS = [
    Column.field("id"),
    Column.field("definition"),
    Column.field("version"),
    Column.field("state"),
    Column.field("paused"),
    Column.field("created_at"),
    Column.field("start_key", wide=True),
    Column.field("finished_at", wide=True),
]
EVENT_COLUMNS = [
    Column.field("seq"),
    Column.field("at"),
    Column("EVENT", lambda e: e.kind),
    Column(
        "STEP",
        lambda e: f"{e.step_name}#{e.activation_seq}" if e.activation_seq else e.step_name,
    ),
    Column("DETAILS", lambda e: _text(e.details) if e.details else None),
]


def _print_workflow(workflow: Workflow, output: OutputFormat) -> None:
    print_item(workflow, output, _describe_workflow)


def _describe_workflow(workflow: Workflow, wide: bool) -> None:
    names = ["id", "definition", "version", "start_key", "state", "paused", "created_at"]
    names += [n for n in ("finished_at", "output", "error") if getattr(workflow, n) is not None]
    print_fields([(name, _text(getattr(workflow, name))) for name in names])
    if isinstance(workflow, WorkflowDetail):
        _print_steps(workflow)


def _current(step: WorkflowStep, field: str) -> Any:
    """A field of the step's latest activation (its task), if it has one."""
    return getattr(step.activations[-1], field) if step.activations else None


STEP_COLUMNS = [
    Column("STEP", lambda s: s.name),
    Column.field("kind"),
    Column.field("state"),
    Column("ACT", lambda s: s.activation_count),
    Column("TASK", lambda s: _current(s, "task_id")),
    Column("TASK_STATE", lambda s: _current(s, "task_state")),
    Column("WHERE_IT_IS", lambda s: s.detail),
]


def _print_steps(detail: WorkflowDetail) -> None:
    print_section("steps", detail.steps, STEP_COLUMNS)
    if detail.inbox_pending:
        age = detail.inbox_oldest_age_seconds or 0.0
        typer.echo(f"inbox: {detail.inbox_pending} outcome(s) not yet applied (oldest {age:.1f}s)")
    if detail.pending_signals:
        names = ", ".join(f"{s.name} ({s.signal_id})" for s in detail.pending_signals)
        typer.echo(f"pending signals: {names}")
    if detail.pending_continuations:
        typer.echo(f"{detail.pending_continuations} continuation(s) wait for resume")
    if detail.orchestration_error:
        when = detail.orchestration_retry_at
        retry = f"; retried at {when:%Y-%m-%dT%H:%M:%SZ}" if when else ""
        typer.echo(f"not advancing: {detail.orchestration_error}{retry}")


def _load_spec(path: Path) -> tuple[str | None, str | None, dict[str, Any]]:
    """A bare spec, or a WorkflowDefinition manifest (its name, namespace and spec)."""
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        typer.echo(f"error: cannot read {path}: {exc}", err=True)
        raise typer.Exit(ExitCode.USAGE) from exc
    if not isinstance(doc, dict):
        typer.echo(f"error: {path} is not a YAML/JSON object", err=True)
        raise typer.Exit(ExitCode.USAGE)
    if doc.get("kind") == "WorkflowDefinition":
        metadata = doc.get("metadata") or {}
        return metadata.get("name"), metadata.get("namespace"), doc.get("spec") or {}
    return None, None, doc


@app.command()
def publish(
    file: Annotated[
        Path, typer.Option("--file", "-f", help="The spec, or a WorkflowDefinition manifest.")
    ],
    name: Annotated[
        str | None, typer.Option(help="Definition name (default: the manifest's name).")
    ] = None,
    reason: Reason = "",
    namespace: Namespace = None,
    server: Server = None,
    token: Token = None,
    output: Output = OutputFormat.TABLE,
    local: LocalTime = False,
) -> None:
    """Publish a definition: a new immutable version when the spec changed (audited), else
    nothing. A manifest's metadata.namespace is where it goes (as with kubectl apply); a
    --namespace that contradicts it is an error."""
    manifest_name, manifest_namespace, spec = _load_spec(file)
    chosen = name or manifest_name
    if not chosen:
        typer.echo("error: give --name (the file is a bare spec without a name)", err=True)
        raise typer.Exit(ExitCode.USAGE)
    if manifest_namespace and namespace and manifest_namespace != namespace:
        typer.echo(
            f"error: {file} declares namespace {manifest_namespace!r} but --namespace (or "
            f"ORBIT_NAMESPACE) says {namespace!r}: remove one of them",
            err=True,
        )
        raise typer.Exit(ExitCode.USAGE)
    with remote(server, token, manifest_namespace or namespace, OPTIONS) as r:
        result = r.client.publish_workflow(r.namespace, chosen, spec, reason)
    print_item(result, output, _describe_published)


def _describe_published(result: WorkflowDefinition, wide: bool) -> None:
    what = "published" if result.changed else "unchanged:"
    digest = next(v.digest for v in result.versions if v.version == result.published_version)
    typer.echo(f"{what} {result.name} version {result.published_version} (sha256 {digest[:12]})")


@app.command()
def start(
    definition: Annotated[str, typer.Argument(help="Definition name.")],
    input: Annotated[str, typer.Option("--input", help="JSON input (JSON, @FILE or -).")] = "{}",
    key: Annotated[
        str | None, typer.Option("--key", help="Start key: the same key starts one workflow.")
    ] = None,
    version: Annotated[int | None, typer.Option(help="Version (default: latest).")] = None,
    wait: Annotated[
        float | None, typer.Option(help="Wait up to this many seconds for it to finish.")
    ] = None,
    namespace: Namespace = None,
    server: Server = None,
    token: Token = None,
    output: Output = OutputFormat.TABLE,
    local: LocalTime = False,
) -> None:
    """Start a workflow. Re-running with the same --key returns the same workflow."""
    parsed = _json_option(input, "--input")
    with remote(server, token, namespace, OPTIONS) as r:
        workflow: Workflow = r.client.start_workflow(
            r.namespace, definition, input=parsed, start_key=key, version=version
        )
        if wait is not None:
            typer.echo(
                f"started {workflow.id}; waiting up to {wait:g}s for it to finish …", err=True
            )
            workflow = r.client.wait_workflow(r.namespace, workflow.id, wait)
    _print_workflow(workflow, output)


@app.command()
def get(
    workflow_id: WorkflowId,
    namespace: Namespace = None,
    server: Server = None,
    token: Token = None,
    output: Output = OutputFormat.TABLE,
    local: LocalTime = False,
) -> None:
    """Show a workflow: each step's state, activations, task and where it is."""
    with remote(server, token, namespace, OPTIONS) as r:
        workflow = r.client.get_workflow(r.namespace, workflow_id)
    _print_workflow(workflow, output)


@app.command()
def wait(
    workflow_id: WorkflowId,
    timeout: Annotated[float, typer.Option(help="Give up after this many seconds (exit 13).")] = 60,
    namespace: Namespace = None,
    server: Server = None,
    token: Token = None,
    output: Output = OutputFormat.TABLE,
    local: LocalTime = False,
) -> None:
    """Wait until a workflow ends, then show it; the exit code says how it ended (0 SUCCEEDED,
    10 FAILED, 11 CANCELLED, 13 still running when the time ran out)."""
    with remote(server, token, namespace, OPTIONS) as r:
        try:
            workflow = r.client.wait_workflow(r.namespace, workflow_id, timeout)
        except TimeoutExpired as exc:
            typer.echo(
                f"error: workflow {workflow_id} is still running after {timeout:g}s; it keeps "
                f"going (look again with: orbit workflow get {workflow_id})",
                err=True,
            )
            raise typer.Exit(ExitCode.STILL_RUNNING) from exc
    _print_workflow(workflow, output)
    raise typer.Exit(for_state(workflow.state))


@app.command("list")
def list_(
    namespace: Namespace = None,
    state: Annotated[str | None, typer.Option(help="Only this state.")] = None,
    definition: Annotated[str | None, typer.Option(help="Only this definition.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many (newest first).")] = 50,
    server: Server = None,
    token: Token = None,
    output: Output = OutputFormat.TABLE,
    local: LocalTime = False,
) -> None:
    """List workflows, newest first."""
    with remote(server, token, namespace, OPTIONS) as r:
        page = r.client.list_workflows(
            r.namespace, state=state, definition=definition, page_size=limit
        )
    print_list(
        page.items,
        WORKFLOW_COLUMNS,
        output,
        next_page_token=page.next_page_token,
        empty="no workflows found",
    )


@app.command()
def signal(
    workflow_id: WorkflowId,
    name: Annotated[str, typer.Argument(help="Signal name (as the wait step says).")],
    payload: Annotated[str | None, typer.Option(help="JSON payload (JSON, @FILE or -).")] = None,
    signal_id: Annotated[
        str | None, typer.Option("--signal-id", help="Your id: sending it again is a replay.")
    ] = None,
    namespace: Namespace = None,
    server: Server = None,
    token: Token = None,
    output: Output = OutputFormat.TABLE,
    local: LocalTime = False,
) -> None:
    """Send a signal; it advances only a wait of that name that is active now (else pending)."""
    parsed = _json_option(payload, "--payload")
    with remote(server, token, namespace, OPTIONS) as r:
        result = r.client.signal_workflow(
            r.namespace, workflow_id, name, parsed, signal_id=signal_id
        )
    print_item(result, output, _describe_signal, ident=lambda signal: signal.signal_id)


def _describe_signal(result: Signal, wide: bool) -> None:
    taken = f" by step {result.consumed_by_step}" if result.consumed_by_step else ""
    replay = " (replay)" if result.replayed else ""
    typer.echo(f"signal {result.name} {result.signal_id}: {result.state}{taken}{replay}")


def _control_command(action: str, help_text: str) -> None:
    def command(
        workflow_id: WorkflowId,
        reason: ControlReason = "",
        namespace: Namespace = None,
        server: Server = None,
        token: Token = None,
        output: Output = OutputFormat.TABLE,
        local: LocalTime = False,
    ) -> None:
        with remote(server, token, namespace, OPTIONS) as r:
            workflow = getattr(r.client, f"{action}_workflow")(r.namespace, workflow_id, reason)
        _print_workflow(workflow, output)

    command.__doc__ = help_text
    app.command(action)(command)


_control_command(
    "pause", "Pause: no new tasks are granted; running ones finish and their results are kept."
)
_control_command("resume", "Resume: reopen the gate and apply what finished while paused.")
_control_command(
    "cancel", "Cancel: open steps end; waiting tasks are cancelled, running ones asked to stop."
)


@app.command()
def history(
    workflow_id: WorkflowId,
    namespace: Namespace = None,
    server: Server = None,
    token: Token = None,
    output: Output = OutputFormat.TABLE,
    local: LocalTime = False,
) -> None:
    """Every event of the workflow, in order."""
    with remote(server, token, namespace, OPTIONS) as r:
        events = r.client.workflow_history(r.namespace, workflow_id)
    print_list(events, EVENT_COLUMNS, output, empty="no events")
