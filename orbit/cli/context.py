"""`orbit context [show|list|use|set|delete]`: the CLI's contexts (contexts.py), like `kubectl
config` and `temporal env`.

Exit codes: 0 done; 2 no such context, or the config file cannot be used."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from orbit.cli import contexts
from orbit.cli.exits import ExitCode
from orbit.cli.output import NONE, Output, OutputFormat, document, print_fields, refuse_id, table
from orbit.cli.remote import fail

app = typer.Typer(
    help="Show and switch CLI contexts: the server, token file, namespace and database URL "
    "commands use when no flag or environment variable names them. `orbit dev` writes one.",
    invoke_without_command=True,
)

Name = Annotated[str, typer.Argument(help="Context name.", show_default=False)]


def _config(naming: str | None = None) -> contexts.Config:
    """The config file; exit 2 if it cannot be used, or if it has no context ``naming``."""
    try:
        config = contexts.load()
        if naming is not None:
            config.get(naming)
    except contexts.ContextError as exc:
        fail(str(exc), ExitCode.USAGE)
    return config


@app.callback()
def main(ctx: typer.Context, output: Output = OutputFormat.TABLE) -> None:
    """Without a command: show the context in use (as `orbit context show`)."""
    if ctx.invoked_subcommand is None:
        show(None, output)


@app.command()
def show(
    name: Annotated[
        str | None, typer.Argument(help="Context name (default: the one in use).")
    ] = None,
    output: Output = OutputFormat.TABLE,
) -> None:
    """Show a context: where commands go when no flag or environment variable says."""
    refuse_id(output, "orbit context show")
    config = _config()
    try:
        chosen = config.get(name) if name else contexts.active()
    except contexts.ContextError as exc:
        fail(str(exc), ExitCode.USAGE)
    if chosen is None:
        typer.echo(
            f"no context in use ({contexts.config_path()} has no current one); `orbit dev` "
            "writes one, `orbit context set NAME --server URL …` adds one",
            err=True,
        )
        return
    entry = {"name": chosen.name, **chosen.as_entry()}
    if output.is_document:
        typer.echo(document(entry, output))
        return
    print_fields([(key, entry.get(key)) for key in ("name", *contexts.KEYS)])
    typer.echo(f"(from {contexts.config_path()})", err=True)


@app.command("list")
def list_(output: Output = OutputFormat.TABLE) -> None:
    """List contexts; the current one is marked with *."""
    refuse_id(output, "orbit context list")
    config = _config()
    entries = [{"name": c.name, **c.as_entry()} for c in config.contexts.values()]
    if output.is_document:
        typer.echo(document({"current": config.current, "items": entries}, output))
        return
    if not entries:
        typer.echo(f"no contexts in {contexts.config_path()}", err=True)
        return
    rows = [
        [
            "*" if e["name"] == config.current else "",
            e["name"],
            *(str(e.get(key) or NONE) for key in ("server", "namespace", "database-url")),
        ]
        for e in entries
    ]
    typer.echo(table(["CURRENT", "NAME", "SERVER", "NAMESPACE", "DATABASE-URL"], rows))


@app.command()
def use(name: Name) -> None:
    """Make NAME the current context."""
    config = _config(naming=name)
    config.current = name
    contexts.save(config)
    typer.echo(f"context {name} is current")


@app.command("set")
def set_(
    name: Name,
    server: Annotated[str | None, typer.Option(help="Orbit server URL.")] = None,
    token_file: Annotated[
        Path | None, typer.Option(help="File holding the bearer token (kept as its full path).")
    ] = None,
    namespace: Annotated[str | None, typer.Option("--namespace", "-n", help="Namespace.")] = None,
    database_url: Annotated[
        str | None, typer.Option(help="Database URL for admin commands and `orbit apply`.")
    ] = None,
    current: Annotated[bool, typer.Option(help="Also make it the current context.")] = False,
) -> None:
    """Add a context, or change the settings given of an existing one."""
    config = _config()
    old = config.contexts.get(name, contexts.Context(name))
    config.contexts[name] = contexts.Context(
        name,
        server=server or old.server,
        token_file=str(token_file.resolve()) if token_file else old.token_file,
        namespace=namespace or old.namespace,
        database_url=database_url or old.database_url,
    )
    if current or config.current is None:
        config.current = name
    path = contexts.save(config)
    mark = " (current)" if config.current == name else ""
    typer.echo(f"context {name} saved in {path}{mark}")


@app.command()
def delete(name: Name) -> None:
    """Remove a context (if it was current, no context is current afterwards)."""
    config = _config(naming=name)
    del config.contexts[name]
    if config.current == name:
        config.current = None
    contexts.save(config)
    typer.echo(f"context {name} deleted")
