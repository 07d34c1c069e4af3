"""`orbit apply`: manifests → store, without a cluster, through the operator's own reconcile
functions. Everything is admitted before anything is written; each object is one transaction
(rolled back on --dry-run)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa

from orbit_store.db import run_transaction
from orbit_store.pulse.queues import undeclared_queues

from .kinds import KINDS, Kind
from .manifests import ManifestError, ManifestSet, read
from .resource import Deletion, InvalidSpec, Resource


@dataclass(frozen=True)
class Line:
    ref: str
    action: str  # configured | unchanged | pruned | kept | skipped | not ready
    detail: str = ""


T = TypeVar("T")
Run = Callable[[Callable[[sa.Connection], T]], T]


def apply_manifests(
    engine: sa.Engine,
    paths: list[Path],
    *,
    default_namespace: str = "default",
    prune: bool = False,
    dry_run: bool = False,
) -> list[Line]:
    """Apply every Orbit resource under ``paths``; raises ManifestError before writing.

    Each object is one transaction; a dry run does everything in one transaction (so later
    objects see earlier ones, as they would for real) and rolls it back."""
    manifests = read(paths, default_namespace)
    _check_specs(manifests)
    _check_queue_references(engine, manifests)
    if not dry_run:
        return _apply_all(lambda work: run_transaction(engine, work), manifests, prune)
    with engine.connect() as conn:
        trans = conn.begin()
        try:
            return _apply_all(lambda work: work(conn), manifests, prune)
        finally:
            trans.rollback()


def _apply_all(run: Run[Any], manifests: ManifestSet, prune: bool) -> list[Line]:
    lines = [Line(skip, "skipped") for skip in manifests.skipped]
    for resource in manifests.resources:
        lines.append(_apply_one(run, resource, manifests))
    if prune:
        lines += _prune(run, manifests)
    return lines


def _check_specs(manifests: ManifestSet) -> None:
    """What the CRD schema cannot check (a Schedule's expression and zone), before writing."""
    problems = []
    for r in manifests.resources:
        kind = KINDS.get(r.kind)
        try:
            if kind is not None:
                kind.validate(r)
        except InvalidSpec as exc:
            problems.append(f"{r.ref}: {exc}")
    if problems:
        raise ManifestError("\n".join(problems))


def _queues_named(r: Resource) -> list[str]:
    if r.kind == "Quota":
        return [r.spec["queue"]] if r.spec.get("queue") else []
    if r.kind == "Schedule":
        return [r.spec["taskTemplate"]["queue"]]
    return list(r.spec.get("queues", [])) if r.kind == "WorkerPool" else []


def _check_queue_references(engine: sa.Engine, manifests: ManifestSet) -> None:
    """Quotas, Schedules and WorkerPools may only name queues declared here or already in the
    store; checked before anything is written, so a dangling reference applies nothing."""
    declared = {(r.namespace, r.name) for r in manifests.resources if r.kind == "Queue"}
    problems = []
    with engine.connect() as conn:
        for r in manifests.resources:
            unknown = [q for q in _queues_named(r) if (r.namespace, q) not in declared]
            for queue in undeclared_queues(conn, r.namespace, unknown):
                problems.append(
                    f"{r.ref}: queue {queue!r} is not declared in namespace "
                    f"{r.namespace!r} (add a Queue manifest)"
                )
    if problems:
        raise ManifestError("\n".join(problems))


def _apply_one(run: Run[Any], resource: Resource, manifests: ManifestSet) -> Line:
    kind = KINDS.get(resource.kind)
    if kind is None:
        return Line(resource.ref, "skipped", "needs the operator in a cluster (no pods here)")

    def lookup(namespace: str, name: str) -> dict[str, str] | None:
        return manifests.secrets.get((namespace, name))

    outcome = run(lambda conn: kind.reconcile(conn, resource, lookup))
    if not outcome.ready:
        return Line(resource.ref, "not ready", f"{outcome.reason}: {outcome.message}")
    return Line(resource.ref, "configured" if outcome.changed else "unchanged", outcome.message)


def _prune(run: Run[Any], manifests: ManifestSet) -> list[Line]:
    """Delete what an earlier `orbit apply` created and the manifests no longer declare."""
    declared = {r.ref for r in manifests.resources}
    lines = []
    for kind in KINDS.values():
        stored = run(kind.declared)
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

            deletion = run(delete)
            lines.append(Line(ref, "pruned" if deletion.done else "kept", deletion.message))
    return lines
