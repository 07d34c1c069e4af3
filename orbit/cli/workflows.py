"""`orbit workflow publish|start|get|list|signal|pause|resume|cancel|history`: workflows on an
Orbit server, through the SDK."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.table import Table

from orbit_sdk import Workflow, WorkflowDetail

from .remote import DEFAULT_SERVER, Namespace, Output, Server, Token, console
from .tasks import _call

app = typer.Typer(
    help="Publish workflow definitions; start, signal, pause, resume, cancel and inspect "
    "workflows on an Orbit server.",
    no_args_is_help=True,
)
out = console()

WorkflowId = Annotated[str, typer.Argument(help="Workflow id.")]
Reason = Annotated[str, typer.Option(help="Why (recorded in the history and audit log).")]


def _json_option(text: str | None, option: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        typer.echo(f"error: {option} is not valid JSON: {exc}", err=True)
        raise typer.Exit(2) from exc


def _text(value: Any) -> str:
    return json.dumps(value, default=str) if isinstance(value, dict | list) else str(value)


def _print_workflow(workflow: Workflow, output: str) -> None:
    if output == "json":
        typer.echo(workflow.model_dump_json(indent=2))
        return
    table = Table("FIELD", "VALUE", show_header=False)
    for name in ("id", "definition", "version", "start_key", "state", "paused", "created_at"):
        table.add_row(name, _text(getattr(workflow, name)))
    for name in ("finished_at", "output", "error"):
        if getattr(workflow, name) is not None:
            table.add_row(name, _text(getattr(workflow, name)))
    out.print(table)
    if isinstance(workflow, WorkflowDetail):
        _print_steps(workflow)


def _print_steps(detail: WorkflowDetail) -> None:
    steps = Table("STEP", "KIND", "STATE", "ACT", "TASK", "TASK STATE", "WHERE IT IS")
    for step in detail.steps:
        current = step.activations[-1] if step.activations else None
        steps.add_row(
            step.name,
            step.kind,
            step.state,
            str(step.activation_count),
            (current.task_id or "") if current else "",
            (current.task_state or "") if current else "",
            step.detail,
        )
    out.print(steps)
    if detail.inbox_pending:
        age = detail.inbox_oldest_age_seconds or 0.0
        out.print(f"inbox: {detail.inbox_pending} outcome(s) not yet applied (oldest {age:.1f}s)")
    if detail.pending_signals:
        names = ", ".join(f"{s.name} ({s.signal_id})" for s in detail.pending_signals)
        out.print(f"pending signals: {names}")
    if detail.pending_continuations:
        out.print(f"{detail.pending_continuations} continuation(s) wait for resume")


def _load_spec(path: Path) -> tuple[str | None, dict[str, Any]]:
    """A bare spec, or a WorkflowDefinition manifest (its name and spec)."""
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        typer.echo(f"error: cannot read {path}: {exc}", err=True)
        raise typer.Exit(2) from exc
    if not isinstance(doc, dict):
        typer.echo(f"error: {path} is not a YAML/JSON object", err=True)
        raise typer.Exit(2)
    if doc.get("kind") == "WorkflowDefinition":
        return (doc.get("metadata") or {}).get("name"), doc.get("spec") or {}
    return None, doc


@app.command()
def publish(
    file: Annotated[
        Path, typer.Option("--file", "-f", help="The spec, or a WorkflowDefinition manifest.")
    ],
    name: Annotated[
        str | None, typer.Option(help="Definition name (default: the manifest's name).")
    ] = None,
    namespace: Namespace = "default",
    server: Server = DEFAULT_SERVER,
    token: Token = "",
    output: Output = "table",
) -> None:
    """Publish a definition: a new immutable version when the spec changed, else nothing."""
    manifest_name, spec = _load_spec(file)
    chosen = name or manifest_name
    if not chosen:
        typer.echo("error: give --name (the file is a bare spec without a name)", err=True)
        raise typer.Exit(2)
    result = _call(server, token, lambda c: c.publish_workflow(namespace, chosen, spec))
    if output == "json":
        typer.echo(result.model_dump_json(indent=2))
        return
    what = "published" if result.changed else "unchanged:"
    digest = next(v.digest for v in result.versions if v.version == result.published_version)
    out.print(f"{what} {result.name} version {result.published_version} (sha256 {digest[:12]})")


@app.command()
def start(
    definition: Annotated[str, typer.Argument(help="Definition name.")],
    input: Annotated[str, typer.Option("--input", help="JSON input.")] = "{}",
    key: Annotated[
        str | None, typer.Option("--key", help="Start key: the same key starts one workflow.")
    ] = None,
    version: Annotated[int | None, typer.Option(help="Version (default: latest).")] = None,
    wait: Annotated[
        float | None, typer.Option(help="Wait up to this many seconds for it to finish.")
    ] = None,
    namespace: Namespace = "default",
    server: Server = DEFAULT_SERVER,
    token: Token = "",
    output: Output = "table",
) -> None:
    """Start a workflow. Re-running with the same --key returns the same workflow."""
    parsed = _json_option(input, "--input")
    workflow: Workflow = _call(
        server,
        token,
        lambda c: c.start_workflow(
            namespace, definition, input=parsed, start_key=key, version=version
        ),
    )
    if wait is not None:
        typer.echo(f"started {workflow.id}; waiting up to {wait:g}s for it to finish …", err=True)
        workflow = _call(server, token, lambda c: c.wait_workflow(namespace, workflow.id, wait))
    _print_workflow(workflow, output)


@app.command()
def get(
    workflow_id: WorkflowId,
    namespace: Namespace = "default",
    server: Server = DEFAULT_SERVER,
    token: Token = "",
    output: Output = "table",
) -> None:
    """Show a workflow: each step's state, activations, task and where it is."""
    _print_workflow(_call(server, token, lambda c: c.get_workflow(namespace, workflow_id)), output)


@app.command("list")
def list_(
    namespace: Namespace = "default",
    state: Annotated[str | None, typer.Option(help="Only this state.")] = None,
    definition: Annotated[str | None, typer.Option(help="Only this definition.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many (newest first).")] = 50,
    server: Server = DEFAULT_SERVER,
    token: Token = "",
    output: Output = "table",
) -> None:
    """List workflows, newest first."""
    page = _call(
        server,
        token,
        lambda c: c.list_workflows(namespace, state=state, definition=definition, page_size=limit),
    )
    if output == "json":
        typer.echo(json.dumps([w.model_dump(mode="json") for w in page.items], indent=2))
        return
    table = Table("ID", "DEFINITION", "VERSION", "STATE", "PAUSED", "CREATED")
    for w in page.items:
        table.add_row(w.id, w.definition, str(w.version), w.state, str(w.paused), str(w.created_at))
    out.print(table)


@app.command()
def signal(
    workflow_id: WorkflowId,
    name: Annotated[str, typer.Argument(help="Signal name (as the wait step says).")],
    payload: Annotated[str | None, typer.Option(help="JSON payload.")] = None,
    signal_id: Annotated[
        str | None, typer.Option("--signal-id", help="Your id: sending it again is a replay.")
    ] = None,
    namespace: Namespace = "default",
    server: Server = DEFAULT_SERVER,
    token: Token = "",
    output: Output = "table",
) -> None:
    """Send a signal; it advances only a wait of that name that is active now (else pending)."""
    parsed = _json_option(payload, "--payload")
    result = _call(
        server,
        token,
        lambda c: c.signal_workflow(namespace, workflow_id, name, parsed, signal_id=signal_id),
    )
    if output == "json":
        typer.echo(result.model_dump_json(indent=2))
        return
    taken = f" by step {result.consumed_by_step}" if result.consumed_by_step else ""
    replay = " (replay)" if result.replayed else ""
    out.print(f"signal {result.name} {result.signal_id}: {result.state}{taken}{replay}")


def _control_command(action: str, help_text: str) -> None:
    def command(
        workflow_id: WorkflowId,
        reason: Reason = "",
        namespace: Namespace = "default",
        server: Server = DEFAULT_SERVER,
        token: Token = "",
        output: Output = "table",
    ) -> None:
        workflow = _call(
            server,
            token,
            lambda c: getattr(c, f"{action}_workflow")(namespace, workflow_id, reason),
        )
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
    namespace: Namespace = "default",
    server: Server = DEFAULT_SERVER,
    token: Token = "",
    output: Output = "table",
) -> None:
    """Every event of the workflow, in order."""
    events = _call(server, token, lambda c: c.workflow_history(namespace, workflow_id))
    if output == "json":
        typer.echo(json.dumps([e.model_dump(mode="json") for e in events], indent=2))
        return
    table = Table("SEQ", "AT", "EVENT", "STEP", "DETAILS")
    for e in events:
        step = f"{e.step_name}#{e.activation_seq}" if e.activation_seq else (e.step_name or "")
        table.add_row(str(e.seq), str(e.at), e.kind, step, _text(e.details) if e.details else "")
    out.print(table)
