"""Quota: mirrors spec into the `quotas` row (whole namespace when spec.queue is absent)."""

from __future__ import annotations

import sqlalchemy as sa

from orbit_store.pulse.limits.quota import WHOLE_NAMESPACE
from orbit_store.pulse.limits.quota_declarations import QuotaSpec, delete_quota, put_quota

from .queue import require_declared_queues
from .resource import Deletion, Outcome, Resource


def spec_of(resource: Resource) -> QuotaSpec:
    spec = resource.spec
    rate = spec.get("submitRate") or {}
    return QuotaSpec(
        name=resource.name,
        queue=spec.get("queue") or WHOLE_NAMESPACE,
        max_waiting=spec.get("maxWaiting"),
        max_running=spec.get("maxRunning"),
        submit_rate_per_second=rate.get("perSecond"),
        submit_burst=rate.get("burst"),
    )


def reconcile(conn: sa.Connection, resource: Resource) -> Outcome:
    quota = spec_of(resource)
    if quota.queue != WHOLE_NAMESPACE:
        require_declared_queues(conn, resource, "spec.queue", [quota.queue])
    changed = put_quota(
        conn, resource.namespace, quota, source=resource.source, spec_generation=resource.generation
    )
    scope = "the namespace" if quota.queue == WHOLE_NAMESPACE else f"queue {quota.queue}"
    return Outcome(changed=changed, message=f"enforced for {scope}")


def delete(conn: sa.Connection, resource: Resource) -> Deletion:
    delete_quota(conn, resource.namespace, resource.name)
    return Deletion(done=True, message="quota removed")
