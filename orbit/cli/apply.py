"""`orbit apply -f FILE|DIR`: apply Queue, Quota, Credential and WorkflowDefinition manifests
straight to a database."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from orbit.reconcile.apply import apply_manifests
from orbit.reconcile.manifests import ManifestError
from orbit_store.errors import StoreError

from .options import DatabaseUrl, store_engine


def apply(
    database_url: DatabaseUrl,
    filename: Annotated[
        list[Path], typer.Option("--filename", "-f", help="A manifest file or folder (repeat).")
    ],
    namespace: Annotated[
        str, typer.Option("--namespace", "-n", help="Namespace for objects that name none.")
    ] = "default",
    prune: Annotated[
        bool, typer.Option(help="Delete what earlier applies created and these no longer declare.")
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would change.")] = False,
) -> None:
    """Apply custom-resource manifests without a cluster, through the operator's reconcilers.

    Every manifest is validated against the CRDs (defaults, schema, CEL rules) before anything
    is written; an invalid one stops the whole apply. Secrets in the same files provide
    Credential tokens (only their hash is stored)."""
    engine = store_engine(database_url)
    try:
        lines = apply_manifests(
            engine, filename, default_namespace=namespace, prune=prune, dry_run=dry_run
        )
    except ManifestError as exc:
        typer.echo(f"error: nothing was applied:\n{exc}", err=True)
        raise typer.Exit(1) from exc
    except StoreError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    finally:
        engine.dispose()
    suffix = " (dry run)" if dry_run else ""
    for line in lines:
        detail = f": {line.detail}" if line.detail else ""
        typer.echo(f"{line.ref} {line.action}{suffix}{detail}")
    if any(line.action in ("not ready", "kept") for line in lines):
        raise typer.Exit(3)
