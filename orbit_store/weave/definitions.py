"""Publishing workflow definitions (seed §4 "流程定义"; invariant 10).

A published version is immutable: its spec and digest are never updated. Publishing a spec
whose canonical digest equals the latest version's is a no-op; any other spec becomes version
N + 1. Instances bind to a version at start and keep it whatever is published later. Retiring
a definition (its resource deleted) refuses new starts and leaves running instances alone.

A publish through the API is audited in its transaction (invariant 8, seed §4 "记录定义摘要及发布
审计"): ``workflowdefinition.publish`` with the actor, the reason and the new version's digest,
under ``resource_kind`` ``WorkflowDefinition`` like the resource's own changes
(orbit/reconcile/audited.py). Publishing an identical spec changes nothing and is not audited.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from orbit_store.audit import declared_fields, record_change
from orbit_store.clock import db_now
from orbit_store.declared import require_own
from orbit_store.errors import NotFound
from orbit_store.ids import new_id
from orbit_store.namespaces import ensure_namespace
from orbit_store.schema import (
    workflow_definition_versions,
    workflow_definitions,
    workflow_instances,
)

from .dsl.spec import Definition, WorkflowSpec, canonical, digest_of, load
from .model import PublishResult

_versions: dict[str, Definition] = {}
RESOURCE_KIND = "WorkflowDefinition"


def publish_definition(
    conn: sa.Connection,
    *,
    namespace: str,
    name: str,
    spec: WorkflowSpec,
    source: str,
    published_by: str | None = None,
) -> PublishResult:
    """Publish ``spec`` (already validated by :func:`orbit_store.weave.dsl.spec.parse`) as the next
    version of ``name`` unless it equals the latest; un-retires a retired definition. A
    definition a resource declares (and has not withdrawn) is the resource's: the API and CLI
    get Conflict, as for schedules, so a resync never has another spec to publish over."""
    document = canonical(spec)
    digest = digest_of(document)
    now = db_now(conn)
    ensure_namespace(conn, namespace, now)
    row = _lock(conn, namespace, name)
    if row is not None and row.retired_at is None:
        require_own("workflow definition", RESOURCE_KIND, name, row.source, source)
    if row is None:
        definition_id = new_id()
        conn.execute(
            workflow_definitions.insert().values(
                id=definition_id,
                namespace=namespace,
                name=name,
                latest_version=0,
                source=source,
                created_at=now,
                updated_at=now,
            )
        )
        latest, latest_digest, retired = 0, None, False
    else:
        definition_id, latest, retired = row.id, row.latest_version, row.retired_at is not None
        latest_digest = conn.execute(
            sa.select(workflow_definition_versions.c.digest).where(
                workflow_definition_versions.c.definition_id == definition_id,
                workflow_definition_versions.c.version == latest,
            )
        ).scalar_one_or_none()
    if latest_digest == digest:
        if retired:
            _set_retired(conn, definition_id, None, now)
        return PublishResult(definition_id, name, latest, digest, changed=retired)
    version = latest + 1
    conn.execute(
        workflow_definition_versions.insert().values(
            id=new_id(),
            definition_id=definition_id,
            namespace=namespace,
            version=version,
            digest=digest,
            spec=document,
            published_at=now,
            published_by=published_by,
        )
    )
    updated = conn.execute(
        workflow_definitions.update()
        .where(
            workflow_definitions.c.id == definition_id,
            workflow_definitions.c.latest_version == latest,
        )
        .values(latest_version=version, source=source, retired_at=None, updated_at=now)
    )
    assert updated.rowcount == 1, "the definition row is locked"
    return PublishResult(definition_id, name, version, digest, changed=True)


def publish_audited(
    conn: sa.Connection,
    *,
    namespace: str,
    name: str,
    spec: WorkflowSpec,
    actor: str,
    reason: str = "",
    source: str = "api",
) -> PublishResult:
    """:func:`publish_definition` by a person (the API), with its audit row when it changed."""
    _lock(conn, namespace, name)  # so that ``before`` is what this publish replaces
    before = declared_fields(conn, workflow_definitions, namespace, name)
    result = publish_definition(
        conn, namespace=namespace, name=name, spec=spec, source=source, published_by=actor
    )
    if result.changed:
        after = declared_fields(conn, workflow_definitions, namespace, name)
        assert after is not None, "just published"
        record_change(
            conn,
            namespace=namespace,
            actor=actor,
            action="workflowdefinition.publish",
            resource_kind=RESOURCE_KIND,
            resource_id=name,
            resource_version=result.version,
            reason=reason or f"version {result.version} published through the API",
            before=before,
            after={**after, "digest": result.digest},
        )
    return result


def _lock(conn: sa.Connection, namespace: str, name: str) -> sa.Row[Any] | None:
    return conn.execute(
        sa.select(workflow_definitions)
        .where(workflow_definitions.c.namespace == namespace, workflow_definitions.c.name == name)
        .with_for_update()
    ).one_or_none()


def _set_retired(
    conn: sa.Connection, definition_id: str, when: dt.datetime | None, now: dt.datetime
) -> None:
    conn.execute(
        workflow_definitions.update()
        .where(workflow_definitions.c.id == definition_id)
        .values(retired_at=when, updated_at=now)
    )


def retire_definition(conn: sa.Connection, *, namespace: str, name: str) -> int:
    """Refuse new starts of ``name``; return how many of its instances are still running
    (they go on, bound to their versions). Retiring what does not exist is a no-op (0)."""
    row = _lock(conn, namespace, name)
    if row is None:
        return 0
    now = db_now(conn)
    if row.retired_at is None:
        _set_retired(conn, row.id, now, now)
    return int(
        conn.execute(
            sa.select(sa.func.count()).where(
                workflow_instances.c.definition_id == row.id,
                workflow_instances.c.state == "RUNNING",
            )
        ).scalar_one()
    )


@dataclass(frozen=True)
class VersionInfo:
    version: int
    digest: str
    published_at: dt.datetime
    published_by: str | None
    running_instances: int


@dataclass(frozen=True)
class DefinitionInfo:
    id: str
    namespace: str
    name: str
    latest_version: int
    source: str
    retired: bool
    versions: list[VersionInfo]


def get_definition(conn: sa.Connection, namespace: str, name: str) -> DefinitionInfo | None:
    """The definition with every version and how many instances run on each."""
    row = conn.execute(
        sa.select(workflow_definitions).where(
            workflow_definitions.c.namespace == namespace, workflow_definitions.c.name == name
        )
    ).one_or_none()
    if row is None:
        return None
    running: dict[int, int] = dict(
        conn.execute(
            sa.select(workflow_instances.c.version, sa.func.count())
            .where(
                workflow_instances.c.definition_id == row.id,
                workflow_instances.c.state == "RUNNING",
            )
            .group_by(workflow_instances.c.version)
        ).all()
    )
    versions = [
        VersionInfo(v.version, v.digest, v.published_at, v.published_by, running.get(v.version, 0))
        for v in conn.execute(
            sa.select(workflow_definition_versions)
            .where(workflow_definition_versions.c.definition_id == row.id)
            .order_by(workflow_definition_versions.c.version)
        )
    ]
    return DefinitionInfo(
        row.id,
        row.namespace,
        row.name,
        row.latest_version,
        row.source,
        row.retired_at is not None,
        versions,
    )


def list_definitions(conn: sa.Connection, namespace: str) -> list[tuple[str, str, str]]:
    """(namespace, name, source) of the namespace's definitions that are not retired
    (`orbit apply --prune`)."""
    rows = conn.execute(
        sa.select(
            workflow_definitions.c.namespace,
            workflow_definitions.c.name,
            workflow_definitions.c.source,
        )
        .where(
            workflow_definitions.c.namespace == namespace,
            workflow_definitions.c.retired_at.is_(None),
        )
        .order_by(workflow_definitions.c.name)
    )
    return [(ns, name, source) for ns, name, source in rows]


def load_version(conn: sa.Connection, version_id: str) -> Definition:
    """The runnable definition of a published version (immutable, so cached by id)."""
    cached = _versions.get(version_id)
    if cached is not None:
        return cached
    document = conn.execute(
        sa.select(workflow_definition_versions.c.spec).where(
            workflow_definition_versions.c.id == version_id
        )
    ).scalar_one_or_none()
    if document is None:
        raise NotFound(f"workflow definition version {version_id} not found")
    definition = load(document)
    if len(_versions) > 1000:
        _versions.clear()
    _versions[version_id] = definition
    return definition
