"""The Orbit operator (Kopf): Queue, Quota, Schedule, Credential and WorkflowDefinition resources →
MySQL, WorkerPools → Deployments sized from the backlog, worker pods → registrations (ORBIT.md §10).

Importing the package declares the handlers, so both ``orbit operator`` and
``kopf run -m orbit_operator`` run it. Configuration comes from the environment
(:mod:`orbit_operator.settings`); the handlers are thin adapters around ``orbit.reconcile``.
"""

from . import (
    credentials,
    lifecycle,
    pods,
    queues,
    quotas,
    schedules,
    workerpools,
    workflowdefinitions,
)

__all__ = [
    "credentials",
    "lifecycle",
    "pods",
    "queues",
    "quotas",
    "schedules",
    "workerpools",
    "workflowdefinitions",
]
