"""Restore fencing over HTTP (``/v1/admin/restore-fence``; docs/operations/recovery.md).

The fence is database-wide — it closes dispatch for every namespace — so changing it needs the
admin role in the system namespace (``orbit-system``); any namespace's admin may read it. The
same procedure runs from ``orbit admin restore-fence`` straight on the database, which is the
way right after a restore, before any server is started.
"""

from __future__ import annotations

import functools

from fastapi import APIRouter

from orbit.api.context import Ctx
from orbit.api.routes.tasks import PROBLEMS
from orbit.api.schemas import fencing as schemas
from orbit.api.transport.auth import CurrentCredential, authorize
from orbit_store.access.credentials import Credential, Role
from orbit_store.db import run_transaction
from orbit_store.fencing import SYSTEM_NAMESPACE, fence_history, fence_state, reopen_dispatch
from orbit_store.recovery.restore_fence import restore_fence

router = APIRouter(prefix="/v1/admin/restore-fence", tags=["admin"])


def _system_admin(credential: Credential) -> str:
    authorize(credential, SYSTEM_NAMESPACE, Role.ADMIN)
    return credential.name


@router.get(
    "", response_model=schemas.FenceStatus, responses=PROBLEMS, summary="Restore fence status"
)
def status(credential: CurrentCredential, ctx: Ctx) -> schemas.FenceStatus:
    """The current restore epoch, whether dispatch is open, and the latest fences."""
    authorize(credential, credential.namespace, Role.ADMIN)
    with ctx.engine.connect() as conn:
        state = fence_state(conn)
        history = fence_history(conn, limit=10)
    return schemas.FenceStatus(
        epoch=state.epoch,
        dispatch_open=state.dispatch_open,
        fence=schemas.Fence.model_validate(state.fence) if state.fence else None,
        history=[schemas.Fence.model_validate(f) for f in history],
    )


@router.post(
    "",
    response_model=schemas.FenceReport,
    responses=PROBLEMS,
    summary="Fence after a restore: close dispatch, invalidate every earlier grant",
)
def fence(
    body: schemas.FenceRequest, credential: CurrentCredential, ctx: Ctx
) -> schemas.FenceReport:
    """Bumps the restore epoch and closes dispatch; ends every worker session and cuts every
    lease granted before; the reaper's rules settle those tasks (never started or safe →
    WAITING, unsafe and running → NEEDS_REVIEW). Audited. Dispatch stays closed until reopened."""
    actor = _system_admin(credential)
    report = restore_fence(ctx.engine, reason=body.reason, actor=actor)
    ctx.metrics.gauges.refresh()  # the fenced gauge shows it at the next scrape
    return schemas.FenceReport.model_validate(report)


@router.post(
    "/reopen",
    response_model=schemas.Fence,
    responses=PROBLEMS,
    summary="Reopen dispatch after reconciliation",
)
def reopen(body: schemas.FenceRequest, credential: CurrentCredential, ctx: Ctx) -> schemas.Fence:
    """Opens dispatch under the current epoch; recorded on the fence and audited. 409 when
    dispatch is already open."""
    actor = _system_admin(credential)
    reopened = run_transaction(
        ctx.engine, functools.partial(reopen_dispatch, reason=body.reason, actor=actor)
    )
    ctx.metrics.gauges.refresh()
    return schemas.Fence.model_validate(reopened)
