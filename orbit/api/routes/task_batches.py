"""Bulk submission: ``POST /v1/namespaces/{ns}/tasks:batch``, up to 1,000 tasks per request.

Each item is answered on its own, in request order: ``created``, ``replayed`` (its key names an
identical earlier request — or an earlier item of the same batch), ``conflict`` (its key names a
different request) or ``refused`` (a quota, an undeclared queue, an invalid item, params over the
size limit or that the database cannot store) with the problem the single submission would have
answered. The store accepts the items in transactions of 100 (``orbit_store.pulse.submit.bulk``);
an item answered created or replayed is durable when the response is sent (invariants 1, 6)."""

from __future__ import annotations

import anyio
from fastapi import APIRouter

from orbit.api.context import AppContext, Ctx
from orbit.api.routes.tasks import PROBLEMS, Namespace, submission_request
from orbit.api.schemas import batches as schemas_batches
from orbit.api.transport import limits
from orbit.api.transport.auth import CurrentCredential, authorize
from orbit.api.transport.problems import not_storable_extra, problem_body, store_status
from orbit_store.access.credentials import Role
from orbit_store.pulse import service
from orbit_store.pulse.model import WaitPath
from orbit_store.pulse.submit.accept import SubmitRequest
from orbit_store.pulse.submit.bulk import BatchItemResult
from orbit_store.pulse.views import queries

router = APIRouter(prefix="/v1/namespaces/{namespace}/tasks", tags=["tasks"])


@router.post(
    ":batch",
    response_model=schemas_batches.SubmissionBatchResponse,
    responses=PROBLEMS,
    summary="Submit up to 1,000 tasks, each answered on its own",
)
async def submit_batch(
    namespace: Namespace,
    body: schemas_batches.SubmissionBatch,
    credential: CurrentCredential,
    ctx: Ctx,
) -> schemas_batches.SubmissionBatchResponse:
    """200 with one result per item (``index`` is its position in ``items``). The call fails as
    a whole only for what concerns all items (authentication, a malformed body, more than 1,000
    items, the database unavailable — then retry the whole batch: the keys make it safe).
    With ``with_tasks`` each created or replayed item carries its task."""
    authorize(credential, namespace, Role.SUBMIT)
    ctx.metrics.batch_items.labels("submit").observe(len(body.items))
    return await anyio.to_thread.run_sync(_submit, ctx, namespace, body, credential.name)


def _submit(
    ctx: AppContext, namespace: str, body: schemas_batches.SubmissionBatch, submitter: str
) -> schemas_batches.SubmissionBatchResponse:
    """In a thread: the items' checks, their transactions and the answer."""
    instance = f"/v1/namespaces/{namespace}/tasks"
    answers: dict[int, schemas_batches.SubmissionItemResult] = {}
    accepted: list[tuple[int, SubmitRequest]] = []
    for index, item in enumerate(body.items):
        try:
            limits.check_payload(ctx.settings.max_payload_bytes, params=item.params)
        except limits.PayloadTooLarge as exc:
            problem = problem_body(413, "payload-too-large", exc.detail, instance)
            answers[index] = _answer(index, item.idempotency_key, "refused", problem=problem)
            continue
        except limits.NotStorable as exc:
            problem = problem_body(422, "validation", exc.detail, instance)
            problem.update(not_storable_extra(exc))
            answers[index] = _answer(index, item.idempotency_key, "refused", problem=problem)
            continue
        accepted.append((index, submission_request(namespace, item, submitter)))
    results = service.submit_many(ctx.engine, namespace, [request for _, request in accepted])
    views = _views(ctx, namespace, results) if body.with_tasks else {}
    for (index, request), result in zip(accepted, results, strict=True):
        answers[index] = _item_answer(index, request, result, instance, views)
    _account(ctx, namespace, accepted, results)
    out = [answers[index] for index in range(len(body.items))]
    counts = {status: sum(a.status == status for a in out) for status in ("created", "replayed")}
    return schemas_batches.SubmissionBatchResponse(
        results=out,
        created=counts["created"],
        replayed=counts["replayed"],
        failed=len(out) - counts["created"] - counts["replayed"],
    )


def _views(
    ctx: AppContext, namespace: str, results: list[BatchItemResult]
) -> dict[str, queries.TaskView]:
    """The task of each created item as written, and of each replayed one as read now."""
    views = {
        r.result.task_id: queries.task_view_from_row(r.result.row)
        for r in results
        if r.result is not None and r.result.row is not None
    }
    replayed = [r.result.task_id for r in results if r.result is not None and r.result.replayed]
    if replayed:
        with ctx.engine.connect() as conn:
            views |= queries.get_task_views(conn, namespace, replayed)
    return views


def _answer(
    index: int, key: str | None, status: str, **fields: object
) -> schemas_batches.SubmissionItemResult:
    return schemas_batches.SubmissionItemResult.model_validate(
        {"index": index, "status": status, "idempotency_key": key, **fields}
    )


def _item_answer(
    index: int,
    request: SubmitRequest,
    result: BatchItemResult,
    instance: str,
    views: dict[str, queries.TaskView],
) -> schemas_batches.SubmissionItemResult:
    key = request.idempotency_key
    if result.result is not None:
        replayed = result.result.replayed
        task: dict[str, object] = {"task_id": result.result.task_id}
        task["state"] = result.result.state.value
        view = views.get(result.result.task_id)
        if view is not None:
            task["task"] = {**view.__dict__, "replayed": replayed}
        return _answer(index, key, "replayed" if replayed else "created", **task)
    assert result.error is not None
    code, slug = store_status(result.error)
    problem = problem_body(code, slug, str(result.error), instance)
    return _answer(index, key, "conflict" if code == 409 else "refused", problem=problem)


def _account(
    ctx: AppContext,
    namespace: str,
    accepted: list[tuple[int, SubmitRequest]],
    results: list[BatchItemResult],
) -> None:
    """Metrics per item, and one wake-up per (queue, handler) for the tasks made ready."""
    ready: dict[tuple[str, str], int] = {}
    for (_, request), result in zip(accepted, results, strict=True):
        if result.result is None:
            continue
        outcome = "replayed" if result.result.replayed else "new"
        ctx.metrics.submissions.labels(namespace, request.queue, outcome).inc()
        if result.result.wait_path is WaitPath.READY:
            lane = (request.queue, request.handler)
            ready[lane] = ready.get(lane, 0) + 1
    for (queue, handler), count in ready.items():
        ctx.wakeups.notify(namespace, queue, handler, count=count)
