"""WorkflowDefinition: each spec change is published as a new immutable version in MySQL
(orbit_store.weave.definitions); status lists the latest versions with their digests and how
many workflows run on each. Deleting the resource withdraws the definition — no new starts — and
never disturbs running workflows, which keep their versions."""

from __future__ import annotations

import sqlalchemy as sa

from orbit_store.weave.definitions import get_definition, publish_definition, retire_definition
from orbit_store.weave.dsl.spec import InvalidDefinition, parse

from .resource import Deletion, InvalidSpec, Outcome, Resource

#: Versions shown in .status.versions (the newest ones).
STATUS_VERSIONS = 20


def spec_problems(spec: dict[str, object]) -> list[str]:
    """What the CRD schema cannot check (unknown steps, cycles, goto targets, CEL), as
    ``spec.<field>: <problem>`` lines; `orbit apply` checks them before writing anything."""
    try:
        parse(spec)
    except InvalidDefinition as exc:
        return [
            f"spec.{p.path}: {p.message}" if p.path else f"spec: {p.message}" for p in exc.problems
        ]
    return []


def reconcile(conn: sa.Connection, resource: Resource) -> Outcome:
    try:
        spec = parse(resource.spec)
    except InvalidDefinition as exc:
        first = exc.problems[0]
        rest = "; ".join(f"spec.{p}" for p in exc.problems[1:])
        message = first.message + (f"; also {rest}" if rest else "")
        raise InvalidSpec(f"spec.{first.path}" if first.path else "spec", message) from exc
    published = publish_definition(
        conn,
        namespace=resource.namespace,
        name=resource.name,
        spec=spec,
        source=resource.source,
        published_by=f"{resource.source} (generation {resource.generation})",
    )
    info = get_definition(conn, resource.namespace, resource.name)
    assert info is not None, "just published"
    running = sum(v.running_instances for v in info.versions)
    status = {
        "latestVersion": info.latest_version,
        "runningInstances": running,
        "versions": [
            {
                "version": v.version,
                "digest": v.digest,
                "publishedAt": v.published_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "runningInstances": v.running_instances,
            }
            for v in info.versions[-STATUS_VERSIONS:]
        ],
    }
    news = ", just published" if published.changed else ""
    message = (
        f"version {published.version} (sha256 {published.digest[:12]}) is the latest{news}; "
        f"{running} workflows running"
    )
    return Outcome(changed=published.changed, message=message, status=status)


def delete(conn: sa.Connection, resource: Resource) -> Deletion:
    running = retire_definition(conn, namespace=resource.namespace, name=resource.name)
    return Deletion(
        done=True,
        message=f"withdrawn: no new starts; {running} running workflows continue on their versions",
    )
