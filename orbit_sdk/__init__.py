"""Orbit's Python SDK: ``Client``/``AsyncClient`` to submit and watch tasks, ``Worker`` to run
them. It speaks only HTTP (httpx + pydantic), so applications install it without the platform.

    from orbit_sdk import Client, Worker

    client = Client("http://127.0.0.1:8080", token=TOKEN)
    task = client.submit("shop", handler="shop.echo", params={"x": 1}, idempotency_key="k1")
    done = client.wait("shop", task.id, timeout=30)
"""

from ._transport import RetryPolicy
from ._version import __version__
from .client import AsyncClient, Client
from .context import TaskContext
from .errors import (
    Cancelled,
    CancelRequested,
    Conflict,
    Forbidden,
    GateClosed,
    IdempotencyConflict,
    InvalidAttemptToken,
    LeaseLost,
    NotFound,
    OrbitError,
    OutcomeUnknown,
    QuotaExceeded,
    RetryableError,
    ServerUnreachable,
    StaleAttempt,
    TimeoutExpired,
    Unauthorized,
    Unavailable,
    ValidationFailed,
)
from .models import (
    SETTLED_STATES,
    TERMINAL_STATES,
    Attempt,
    CompletionResponse,
    HeartbeatResponse,
    HeartbeatResult,
    Lease,
    LeaseBatch,
    Problem,
    Session,
    StartResponse,
    Task,
    TaskDetail,
    TaskEvent,
    TaskPage,
    TaskState,
)
from .worker import Worker
from .workflow_models import (
    FINISHED_WORKFLOW_STATES,
    PendingSignal,
    Signal,
    Workflow,
    WorkflowActivation,
    WorkflowDefinition,
    WorkflowDefinitionVersion,
    WorkflowDetail,
    WorkflowEvent,
    WorkflowPage,
    WorkflowState,
    WorkflowStep,
)

__all__ = [
    "FINISHED_WORKFLOW_STATES",
    "SETTLED_STATES",
    "TERMINAL_STATES",
    "AsyncClient",
    "Attempt",
    "CancelRequested",
    "Cancelled",
    "Client",
    "CompletionResponse",
    "Conflict",
    "Forbidden",
    "GateClosed",
    "HeartbeatResponse",
    "HeartbeatResult",
    "IdempotencyConflict",
    "InvalidAttemptToken",
    "Lease",
    "LeaseBatch",
    "LeaseLost",
    "NotFound",
    "OrbitError",
    "OutcomeUnknown",
    "PendingSignal",
    "Problem",
    "QuotaExceeded",
    "RetryPolicy",
    "RetryableError",
    "ServerUnreachable",
    "Session",
    "Signal",
    "StaleAttempt",
    "StartResponse",
    "Task",
    "TaskContext",
    "TaskDetail",
    "TaskEvent",
    "TaskPage",
    "TaskState",
    "TimeoutExpired",
    "Unauthorized",
    "Unavailable",
    "ValidationFailed",
    "Worker",
    "Workflow",
    "WorkflowActivation",
    "WorkflowDefinition",
    "WorkflowDefinitionVersion",
    "WorkflowDetail",
    "WorkflowEvent",
    "WorkflowPage",
    "WorkflowState",
    "WorkflowStep",
    "__version__",
]
