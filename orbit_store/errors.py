"""Typed errors raised by store transactions. Each says what went wrong and what to do."""

from __future__ import annotations

from dataclasses import dataclass


class StoreError(Exception):
    """Base class of every error raised by ``orbit_store``."""


class NotFound(StoreError):
    """The named row does not exist in this namespace (or is not visible to the caller)."""


class Conflict(StoreError):
    """The request contradicts what is stored (e.g. same idempotency key, different request)."""


class IdempotencyConflict(Conflict):
    """The idempotency key was already used for a different request in this namespace."""


class AlreadyRetried(Conflict):
    """A manual retry was asked for a task that already has its one direct successor."""

    def __init__(self, task_id: str, successor_id: str) -> None:
        super().__init__(f"task {task_id} already has its retry: task {successor_id}")
        self.successor_id = successor_id


class StaleControlVersion(Conflict):
    """An execution gate was changed by someone else since its control version was read."""

    def __init__(self, gate_id: str, expected: int, actual: int) -> None:
        super().__init__(
            f"execution gate {gate_id} is at control_version {actual}, not {expected}: it "
            "changed since you read it; read it again and decide again"
        )
        self.gate_id, self.expected, self.actual = gate_id, expected, actual


class InvalidRequest(StoreError):
    """The input is well-formed but not acceptable (bad policy values, unknown queue, …)."""


class DataRefused(InvalidRequest):
    """The database refused a value of the request (a JSON column's check, text too long for its
    column, a number out of its column's range, text that is not Unicode): nothing was written.
    The request's fault, never an outage; the same request fails the same way again."""


@dataclass(frozen=True)
class FieldProblem:
    """One problem with one value: where (``("input", "lines", 1)``) and what."""

    loc: tuple[str | int, ...]
    message: str

    @property
    def path(self) -> str:
        """``input.lines[1]``"""
        text = ""
        for part in self.loc:
            text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
        return text


class InvalidInput(InvalidRequest):
    """A value fails its schema; ``errors`` lists every problem (not only the first), each with
    its JSON path, as kubectl lists every field of a refused object."""

    def __init__(self, message: str, errors: list[FieldProblem]) -> None:
        super().__init__(message)
        self.errors = errors


class QuotaExceeded(StoreError):
    """A quota refused the operation; nothing was written. Retry later or raise the quota."""


class TransientStoreError(StoreError):
    """Deadlock or lock-wait timeout that persisted through the bounded retries; safe to retry."""


class CommitOutcomeUnknown(StoreError):
    """The connection was lost while COMMIT was in flight: the transaction may or may not have
    committed. Resolve by looking the operation up by its stable identity (idempotency key,
    attempt id) before retrying; never retry under a new identity (seed §5)."""


class SchemaOutOfDate(StoreError):
    """The database schema is older than this code (run ``orbit admin migrate``), or newer and
    outside its compatibility window (upgrade Orbit)."""


class DispatchClosed(StoreError):
    """A restore fence closed dispatch: no task is leased until an operator reconciles and runs
    ``orbit admin restore-fence --reopen`` (docs/operations/recovery.md). Retry later."""

    def __init__(self, epoch: int, reason: str | None) -> None:
        super().__init__(
            f"dispatch is closed by a restore fence (epoch {epoch}"
            + (f": {reason}" if reason else "")
            + "); nothing is leased until an operator reopens it with "
            "`orbit admin restore-fence --reopen`"
        )
        self.epoch, self.reason = epoch, reason
