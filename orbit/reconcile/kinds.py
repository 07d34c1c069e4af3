"""The kinds Orbit reconciles, and what reconciling and deleting each means. Adding a kind is a
CRD, a module with ``reconcile``/``delete`` and one entry here (plus a thin Kopf handler)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import sqlalchemy as sa

from orbit_store.access.credentials import list_credentials
from orbit_store.pulse.limits.queues import list_queues
from orbit_store.pulse.limits.quota_declarations import list_quotas
from orbit_store.schedules.queries import declared_schedules
from orbit_store.schema import queues
from orbit_store.weave.definitions import list_definitions

from . import credential, queue, quota, schedule, workflow_definition
from .resource import Deletion, Outcome, Resource

SecretLookup = Callable[[str, str], dict[str, str] | None]


@dataclass(frozen=True)
class Kind:
    name: str
    plural: str
    reconcile: Callable[[sa.Connection, Resource, SecretLookup], Outcome]
    delete: Callable[[sa.Connection, Resource], Deletion]
    # (namespace, name, source) of what the store holds in one namespace, for `orbit apply --prune`.
    declared: Callable[[sa.Connection, str], list[tuple[str, str, str]]]
    # The spec deletion needs, rebuilt from the store when pruning.
    stored_spec: Callable[[sa.Connection, str, str], dict[str, object]]
    # Checks beyond the CRD schema, run by `orbit apply` before anything is written.
    validate: Callable[[Resource], None] = lambda _resource: None


def _queue_spec(conn: sa.Connection, namespace: str, name: str) -> dict[str, object]:
    policy = conn.execute(
        sa.select(queues.c.deletion_policy).where(
            queues.c.namespace == namespace, queues.c.name == name
        )
    ).scalar_one_or_none()
    return {"deletionPolicy": policy or "Block"}


KINDS: dict[str, Kind] = {
    "Queue": Kind(
        "Queue",
        "queues",
        reconcile=lambda conn, r, _secrets: queue.reconcile(conn, r),
        delete=queue.delete,
        declared=lambda conn, ns: list_queues(conn, ns),
        stored_spec=_queue_spec,
    ),
    "Quota": Kind(
        "Quota",
        "quotas",
        reconcile=lambda conn, r, _secrets: quota.reconcile(conn, r),
        delete=quota.delete,
        declared=lambda conn, ns: list_quotas(conn, ns),
        stored_spec=lambda conn, ns, name: {},
    ),
    "Credential": Kind(
        "Credential",
        "credentials",
        reconcile=lambda conn, r, secrets: credential.reconcile(
            conn, r, secrets(r.namespace, r.spec["secretRef"]["name"])
        ),
        delete=credential.delete,
        declared=lambda conn, ns: [
            (c.namespace, c.name, c.source) for c in list_credentials(conn, ns)
        ],
        stored_spec=lambda conn, ns, name: {},
    ),
    "Schedule": Kind(
        "Schedule",
        "schedules",
        reconcile=lambda conn, r, _secrets: schedule.reconcile(conn, r),
        delete=schedule.delete,
        declared=declared_schedules,
        stored_spec=lambda conn, ns, name: {},
        validate=schedule.validate,
    ),
    "WorkflowDefinition": Kind(
        "WorkflowDefinition",
        "workflowdefinitions",
        reconcile=lambda conn, r, _secrets: workflow_definition.reconcile(conn, r),
        delete=workflow_definition.delete,
        declared=list_definitions,
        stored_spec=lambda conn, ns, name: {},
    ),
}
