"""`orbit apply`: manifests → store, without a cluster, through the operator's own reconcile
functions. Everything is admitted before anything is written; each object is one transaction
(rolled back on --dry-run)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import sqlalchemy as sa

from orbit_store.db import run_transaction

from .kinds import KINDS, Kind
from .manifests import ManifestSet, read
from .resource import Deletion, Resource


@dataclass(frozen=True)
class Line:
    ref: str
    action: str  # configured | unchanged | pruned | kept | skipped | not ready
    detail: str = ""


T = TypeVar("T")


def _once(engine: sa.Engine, work: Callable[[sa.Connection], T], dry_run: bool) -> T:
    if not dry_run:
        return run_transaction(engine, work)
    with engine.connect() as conn:
        trans = conn.begin()
        try:
            return work(conn)
        finally:
            trans.rollback()


def apply_manifests(
    engine: sa.Engine,
    paths: list[Path],
    *,
    default_namespace: str = "default",
    prune: bool = False,
    dry_run: bool = False,
) -> list[Line]:
    """Apply every Orbit resource under ``paths``; raises ManifestError before writing."""
    manifests = read(paths, default_namespace)
    lines = [Line(skip, "skipped") for skip in manifests.skipped]
    for resource in manifests.resources:
        lines.append(_apply_one(engine, resource, manifests, dry_run))
    if prune:
        lines += _prune(engine, manifests, dry_run)
    return lines


def _apply_one(
    engine: sa.Engine, resource: Resource, manifests: ManifestSet, dry_run: bool
) -> Line:
    kind = KINDS.get(resource.kind)
    if kind is None:
        return Line(resource.ref, "skipped", "needs the operator in a cluster (no pods here)")

    def lookup(namespace: str, name: str) -> dict[str, str] | None:
        return manifests.secrets.get((namespace, name))

    outcome = _once(engine, lambda conn: kind.reconcile(conn, resource, lookup), dry_run)
    if not outcome.ready:
        return Line(resource.ref, "not ready", f"{outcome.reason}: {outcome.message}")
    return Line(resource.ref, "configured" if outcome.changed else "unchanged", outcome.message)


def _prune(engine: sa.Engine, manifests: ManifestSet, dry_run: bool) -> list[Line]:
    """Delete what an earlier `orbit apply` created and the manifests no longer declare."""
    declared = {r.ref for r in manifests.resources}
    lines = []
    for kind in KINDS.values():
        with engine.connect() as conn:
            stored = kind.declared(conn)
        for namespace, name, source in stored:
            ref = f"{kind.name}/{namespace}/{name}"
            if source != "manifest" or ref in declared:
                continue

            def delete(
                conn: sa.Connection,
                kind: Kind = kind,
                namespace: str = namespace,
                name: str = name,
            ) -> Deletion:
                spec = kind.stored_spec(conn, namespace, name)
                return kind.delete(conn, Resource(kind.name, namespace, name, spec))

            deletion = _once(engine, delete, dry_run)
            lines.append(Line(ref, "pruned" if deletion.done else "kept", deletion.message))
    return lines
