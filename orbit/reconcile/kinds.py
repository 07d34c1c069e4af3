"""The kinds Orbit reconciles, and what reconciling and deleting each means. Adding a kind is a
CRD, a module with ``reconcile``/``delete`` and one entry here (plus a thin Kopf handler)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import sqlalchemy as sa

from orbit_store.credentials import list_credentials
from orbit_store.pulse.queues import list_queues
from orbit_store.pulse.quota_declarations import list_quotas
from orbit_store.schema import queues
from orbit_store.weave.definitions import list_definitions

from . import credential, queue, quota, workflow_definition
from .resource import Deletion, Outcome, Resource

SecretLookup = Callable[[str, str], dict[str, str] | None]


@dataclass(frozen=True)
class Kind:
    name: str
    plural: str
    reconcile: Callable[[sa.Connection, Resource, SecretLookup], Outcome]
    delete: Callable[[sa.Connection, Resource], Deletion]
    # (namespace, name, source) of what the store holds, for `orbit apply --prune`.
    declared: Callable[[sa.Connection], list[tuple[str, str, str]]]
    # The spec deletion needs, rebuilt from the store when pruning.
    stored_spec: Callable[[sa.Connection, str, str], dict[str, object]]


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
        declared=lambda conn: list_queues(conn),
        stored_spec=_queue_spec,
    ),
    "Quota": Kind(
        "Quota",
        "quotas",
        reconcile=lambda conn, r, _secrets: quota.reconcile(conn, r),
        delete=quota.delete,
        declared=lambda conn: list_quotas(conn),
        stored_spec=lambda conn, ns, name: {},
    ),
    "Credential": Kind(
        "Credential",
        "credentials",
        reconcile=lambda conn, r, secrets: credential.reconcile(
            conn, r, secrets(r.namespace, r.spec["secretRef"]["name"])
        ),
        delete=credential.delete,
        declared=lambda conn: [(c.namespace, c.name, c.source) for c in list_credentials(conn)],
        stored_spec=lambda conn, ns, name: {},
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
