"""`orbit apply -f FILE|DIR`: apply Queue, Quota, Credential and WorkflowDefinition manifests
straight to a database."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from orbit.cli.database.options import (
    Actor,
    DatabaseUrl,
    context_namespace,
    default_actor,
    store_engine,
)
from orbit.cli.exits import ExitCode


def apply(
    database_url: DatabaseUrl,
    filename: Annotated[
        list[Path], typer.Option("--filename", "-f", help="A manifest file or folder (repeat).")
    ],
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace",
            "-n",
            envvar="ORBIT_NAMESPACE",
            help="Namespace for objects that name none (default: the context's, else default).",
            show_default=False,
        ),
    ] = None,
    prune: Annotated[
        bool,
        typer.Option(
            help="Delete what earlier applies created and these files no longer declare, in the "
            "namespaces the files declare objects in (or --prune-namespace)."
        ),
    ] = False,
    prune_namespace: Annotated[
        list[str] | None,
        typer.Option(
            "--prune-namespace",
            help="With --prune: prune exactly these namespaces (repeat), e.g. one whose last "
            "manifest you removed.",
        ),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would change.")] = False,
    actor: Actor = None,
    allow_system_namespace: Annotated[
        bool,
        typer.Option(
            "--allow-system-namespace",
            help="Also apply (and prune) objects in orbit-system, the reserved namespace whose "
            "admins fence the whole database; refused without it.",
        ),
    ] = False,
) -> None:
    """Apply custom-resource manifests without a cluster, through the operator's reconcilers.

    Every manifest is validated against the CRDs (defaults, schema, CEL rules, queue references)
    before anything is written; any problem stops the whole apply, and all of them are listed.
    Secrets in the same files provide Credential tokens (only their hash is stored). Every
    change is audited as --actor.
    Exit codes: 0 applied; 2 invalid manifests or options (nothing applied); 3 applied, but
    something is not ready or kept; 5 database unreachable or its schema not current."""
    from orbit.reconcile.apply import apply_manifests
    from orbit.reconcile.manifests import ManifestError
    from orbit_store.errors import StoreError

    if prune_namespace and not prune:
        typer.echo("error: --prune-namespace needs --prune", err=True)
        raise typer.Exit(ExitCode.USAGE)
    engine = store_engine(database_url)
    try:
        lines = apply_manifests(
            engine,
            filename,
            default_namespace=namespace or context_namespace() or "default",
            prune=prune,
            prune_namespaces=prune_namespace,
            dry_run=dry_run,
            actor=f"orbit-apply:{actor or default_actor()}",
            allow_system_namespace=allow_system_namespace,
        )
    except ManifestError as exc:
        typer.echo(f"error: nothing was applied:\n{exc}", err=True)
        raise typer.Exit(ExitCode.USAGE) from exc
    except StoreError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(ExitCode.FAILED) from exc
    finally:
        engine.dispose()
    suffix = " (dry run)" if dry_run else ""
    for line in lines:
        detail = f": {line.detail}" if line.detail else ""
        typer.echo(f"{line.ref} {line.action}{suffix}{detail}")
    if any(line.action in ("not ready", "kept") for line in lines):
        raise typer.Exit(ExitCode.INCOMPLETE)
