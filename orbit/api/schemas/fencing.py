"""Request and response bodies of ``/v1/admin/restore-fence``."""

from __future__ import annotations

import datetime as dt

from pydantic import Field

from orbit.api.schemas import Out, Strict


class FenceRequest(Strict):
    reason: str = Field(
        ...,
        min_length=1,
        max_length=1024,
        description="Why (the restore, the backup it came from, the ticket); kept in the audit.",
    )


class Fence(Out):
    id: str
    epoch: int = Field(..., description="The restore epoch this fence set.")
    previous_epoch: int
    reason: str
    fenced_by: str
    fenced_at: dt.datetime
    reopened_at: dt.datetime | None
    reopened_by: str | None
    reopen_reason: str | None


class FenceStatus(Out):
    epoch: int = Field(..., description="Current restore epoch; every grant records it.")
    dispatch_open: bool
    fence: Fence | None = Field(..., description="The fence that set the current epoch.")
    history: list[Fence]


class NamespaceFenced(Out):
    namespace: str
    sessions_ended: int
    leases_cut: int


class FenceReport(Out):
    fence: Fence
    namespaces: list[NamespaceFenced]
    settled: dict[str, int] = Field(
        ..., description="What the lease rules made of the cut leases: task state → count."
    )
    errors: int
