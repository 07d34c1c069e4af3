"""What reconcile functions receive and return."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

GROUP = "orbit.dev"
API_VERSION = f"{GROUP}/v1alpha1"

# Ready condition reasons (docs/reference/crds.md).
RECONCILED = "Reconciled"
INVALID_SPEC = "InvalidSpec"
DATABASE_UNAVAILABLE = "DatabaseUnavailable"
HAS_UNFINISHED_TASKS = "HasUnfinishedTasks"
SECRET_NOT_FOUND = "SecretNotFound"
QUEUE_NOT_FOUND = "QueueNotFound"


@dataclass(frozen=True)
class Resource:
    """One admitted custom resource (defaults applied, schema and CEL rules passed)."""

    kind: str
    namespace: str
    name: str
    spec: dict[str, Any]
    generation: int = 1
    source: str = "manifest"  # 'operator' or 'manifest' (orbit apply)

    @property
    def ref(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Outcome:
    """The result of reconciling a resource: did MySQL change, and its status."""

    changed: bool
    ready: bool = True
    reason: str = RECONCILED
    message: str = ""
    status: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Deletion:
    """The result of deleting: ``done`` lets the finalizer go; otherwise it says why not."""

    done: bool
    reason: str = RECONCILED
    message: str = ""


class InvalidSpec(Exception):
    """The spec cannot be applied; nothing was written. Names the field and what to do."""

    def __init__(self, field_path: str, message: str) -> None:
        super().__init__(f"{field_path}: {message}")
        self.field_path, self.message = field_path, message


class NotDeclaredYet(InvalidSpec):
    """The spec names something that is not declared yet (a Queue); nothing was written.
    Resources applied together reach the operator in any order, so for it this is temporary:
    ``reason`` is the Ready reason that says what it waits for, and it retries soon."""

    def __init__(self, field_path: str, message: str, *, reason: str) -> None:
        super().__init__(field_path, message)
        self.reason = reason


class Superseded(Exception):
    """The resource's body is older than the generation already in effect (a resync timer that
    ran with the body it had before an edit): nothing is written, and no status either."""
