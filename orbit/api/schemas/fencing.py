"""Request and response bodies of ``/v1/admin/restore-fence``."""

from __future__ import annotations

from pydantic import Field

from orbit.api.schemas.base import Out, Strict
from orbit.api.schemas.mirror import mirrors
from orbit_store import fencing
from orbit_store.recovery import restore_fence


class FenceRequest(Strict):
    reason: str = Field(
        ...,
        min_length=1,
        max_length=1024,
        description="Why (the restore, the backup it came from, the ticket); kept in the audit.",
    )


@mirrors(fencing.RestoreFence, said={"epoch": "The restore epoch this fence set."})
class Fence(Out):
    pass


@mirrors(
    fencing.FenceState,
    nested=[Fence],
    said={
        "epoch": "Current restore epoch; every grant records it.",
        "fence": "The fence that set the current epoch.",
    },
)
class FenceStatus(Out):
    history: list[Fence]


@mirrors(restore_fence.NamespaceFenced, omit=["attempts_cut"])
class NamespaceFenced(Out):
    pass


@mirrors(
    restore_fence.FenceReport,
    nested=[Fence],
    types={"namespaces": list[NamespaceFenced]},
    said={"settled": "What the lease rules made of the cut leases: task state → count."},
)
class FenceReport(Out):
    pass
