"""Orbit's complete schema as SQLAlchemy Core tables on one MetaData.

Tables are created only by Alembic migrations (``migrations/``); this metadata is what those
migrations must match (a test compares them). ``docs/reference/data-model.md`` explains each table.
"""

from .access import credentials, execution_gates, namespaces, queues, quotas
from .audit import audit_log
from .base import metadata
from .compatibility import schema_compatibility
from .delivery import event_deliveries, result_events, subscriptions
from .fencing import dispatch_fence, restore_fences
from .pulse import (
    concurrency_keys,
    concurrency_permits,
    submission_keys,
    task_attempts,
    task_events,
    tasks,
)
from .replicas import server_replicas
from .schedules import schedule_occurrences, schedules
from .weave import (
    workflow_activations,
    workflow_continuations,
    workflow_definition_versions,
    workflow_definitions,
    workflow_events,
    workflow_inbox,
    workflow_instances,
    workflow_poll_rounds,
    workflow_signals,
    workflow_steps,
    workflow_waits,
)
from .workers import worker_pods, worker_sessions

__all__ = [
    "audit_log",
    "concurrency_keys",
    "concurrency_permits",
    "credentials",
    "dispatch_fence",
    "event_deliveries",
    "execution_gates",
    "metadata",
    "namespaces",
    "queues",
    "quotas",
    "restore_fences",
    "result_events",
    "schedule_occurrences",
    "schedules",
    "schema_compatibility",
    "server_replicas",
    "submission_keys",
    "subscriptions",
    "task_attempts",
    "task_events",
    "tasks",
    "worker_pods",
    "worker_sessions",
    "workflow_activations",
    "workflow_continuations",
    "workflow_definition_versions",
    "workflow_definitions",
    "workflow_events",
    "workflow_inbox",
    "workflow_instances",
    "workflow_poll_rounds",
    "workflow_signals",
    "workflow_steps",
    "workflow_waits",
]
