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
from orbit_store.pulse.limits.queues import undeclared_queues

from . import reserved
from .audited import delete_audited, reconcile_audited
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
    prune_namespaces: list[str] | None = None,
    dry_run: bool = False,
    actor: str = "orbit-apply",
    allow_system_namespace: bool = False,
) -> list[Line]:
    """Apply every Orbit resource under ``paths``; raises ManifestError before writing.

    Each object is one transaction; a dry run does everything in one transaction (so later
    objects see earlier ones, as they would for real) and rolls it back. Pruning touches only
    the namespaces the manifests declare objects in, or exactly ``prune_namespaces`` when given
    (as kubectl's --prune needs a selector): applying one team's folder never prunes another's.
    The reserved system namespace is neither applied nor pruned unless ``allow_system_namespace``
    (orbit/reconcile/reserved.py)."""
    manifests = read(paths, default_namespace)
    problems = (
        manifests.problems
        + _reserved_problems(manifests, prune_namespaces or [], allow_system_namespace)
        + _spec_problems(manifests)
        + _queue_reference_problems(engine, manifests)
    )
    if problems:  # every problem of every kind in one report, and nothing written
        raise ManifestError("\n".join(problems))
    scope = sorted(set(prune_namespaces or [r.namespace for r in manifests.resources]))
    prune_scope = scope if prune else []
    if not dry_run:
        return _apply_all(lambda work: run_transaction(engine, work), manifests, prune_scope, actor)
    with engine.connect() as conn:
        trans = conn.begin()
        try:
            return _apply_all(lambda work: work(conn), manifests, prune_scope, actor)
        finally:
            trans.rollback()


def _apply_all(
    run: Run[Any], manifests: ManifestSet, prune_scope: list[str], actor: str
) -> list[Line]:
    lines = [Line(skip, "skipped") for skip in manifests.skipped]
    for resource in manifests.resources:
        lines.append(_apply_one(run, resource, manifests, actor))
    for namespace in prune_scope:
        lines += _prune(run, manifests, namespace, actor)
    return lines


def _reserved_problems(
    manifests: ManifestSet, prune_namespaces: list[str], allowed: bool
) -> list[str]:
    problems = []
    for r in manifests.resources:
        refused = reserved.refusal(r.namespace, trusted=allowed, how=reserved.APPLY_HOW)
        if refused is not None:
            problems.append(f"{r.ref}: {refused}")
    for namespace in prune_namespaces:
        refused = reserved.refusal(namespace, trusted=allowed, how=reserved.APPLY_HOW)
        if refused is not None:
            problems.append(f"--prune-namespace {namespace}: {refused.message}")
    return problems


def _spec_problems(manifests: ManifestSet) -> list[str]:
    """What the CRD schema cannot check (a Schedule's expression and zone), before writing."""
    problems = []
    for r in manifests.resources:
        kind = KINDS.get(r.kind)
        try:
            if kind is not None:
                kind.validate(r)
        except InvalidSpec as exc:
            problems.append(f"{r.ref}: {exc}")
    return problems


def _queues_named(r: Resource) -> list[str]:
    if r.kind == "Quota":
        return [r.spec["queue"]] if r.spec.get("queue") else []
    if r.kind == "Schedule":
        return [r.spec["taskTemplate"]["queue"]]
    return list(r.spec.get("queues", [])) if r.kind == "WorkerPool" else []


def _queue_reference_problems(engine: sa.Engine, manifests: ManifestSet) -> list[str]:
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
    return problems


def _apply_one(run: Run[Any], resource: Resource, manifests: ManifestSet, actor: str) -> Line:
    kind = KINDS.get(resource.kind)
    if kind is None:
        return Line(resource.ref, "skipped", "needs the operator in a cluster (no pods here)")

    def lookup(namespace: str, name: str) -> dict[str, str] | None:
        return manifests.secrets.get((namespace, name))

    outcome = run(lambda conn: reconcile_audited(conn, kind, resource, lookup, actor=actor))
    if not outcome.ready:
        return Line(resource.ref, "not ready", f"{outcome.reason}: {outcome.message}")
    return Line(resource.ref, "configured" if outcome.changed else "unchanged", outcome.message)


def _prune(run: Run[Any], manifests: ManifestSet, namespace: str, actor: str) -> list[Line]:
    """Delete what an earlier `orbit apply` created in ``namespace`` and the manifests no longer
    declare (one namespace per transaction)."""
    declared = {r.ref for r in manifests.resources}
    lines = []
    for kind in KINDS.values():

        def stored_rows(conn: sa.Connection, kind: Kind = kind) -> list[tuple[str, str, str]]:
            return kind.declared(conn, namespace)

        stored = run(stored_rows)
        for _namespace, name, source in stored:
            ref = f"{kind.name}/{namespace}/{name}"
            if source != "manifest" or ref in declared:
                continue

            def delete(conn: sa.Connection, kind: Kind = kind, name: str = name) -> Deletion:
                spec = kind.stored_spec(conn, namespace, name)
                resource = Resource(kind.name, namespace, name, spec)
                reason = "orbit apply --prune: no longer in the manifests"
                return delete_audited(conn, kind, resource, actor=actor, reason=reason)

            deletion = run(delete)
            lines.append(Line(ref, "pruned" if deletion.done else "kept", deletion.message))
    return lines
