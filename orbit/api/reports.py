"""Outcome reports of finished attempts, many per request, each answered on its own: the body of
``POST /v1/attempts:complete`` and of the reports a worker sends with its next lease request.

Every item keeps its own token and the store's fencing (invariants 3, 4, 7): an item refused
answers with the problem document ``POST /v1/attempts/{id}/complete`` would have answered
(``stale-attempt`` — the report is kept as evidence —, ``invalid-attempt-token``,
``not-found``, ``validation``, ``payload-too-large``); its neighbours apply. A result the
database cannot store fails its attempt saying why (``unstorable_reports``). The items go
through ``orbit_store.pulse.batches`` in one transaction.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from orbit.api.context import AppContext
from orbit.api.schemas.workers import CompletionItem, CompletionItemResult
from orbit.api.transport import limits
from orbit.api.transport.problems import problem_body
from orbit.api.unstorable_reports import Report, storable_report
from orbit_store.pulse import batches
from orbit_store.pulse.batch import items as batch_items
from orbit_store.pulse.model import OUTCOME_TASK_STATES, CompletionResult, CompletionStatus, Outcome


def completion_refusal(attempt_id: str, result: CompletionResult) -> tuple[int, str, str] | None:
    """The problem (status, slug, detail) a completion that was not applied answers, or None.
    One mapping for the single call and each item of a batch of reports."""
    if result.status is CompletionStatus.NOT_FOUND:
        return 404, "not-found", f"attempt {attempt_id} not found"
    if result.status is CompletionStatus.REFUSED:
        return 403, "invalid-attempt-token", result.reason or "the attempt token does not match"
    if result.status is CompletionStatus.FENCED:
        return (
            409,
            "restore-fenced",
            f"attempt {attempt_id} was granted before a restore fence; the report is kept as "
            "evidence for the reconciliation, not applied",
        )
    if result.status is CompletionStatus.SUPERSEDED:
        return (
            409,
            "stale-attempt",
            f"attempt {attempt_id}: {result.reason}; the report is kept as evidence, not applied",
        )
    return None


#: ``orbit_batch_items{call}`` of reports sent by their own call, and riding a lease request.
BY_CALL, ON_LEASE = "complete", "lease_reports"

Results = dict[str, CompletionResult | batches.ItemRefused]


@dataclass
class Checked:
    """Reports checked before the store: those it is to apply, and those refused here."""

    accepted: list[batch_items.CompletionItem] = field(default_factory=list)
    refused: dict[str, dict[str, Any]] = field(default_factory=dict)


def apply_reports(
    ctx: AppContext, namespace: str, items: Sequence[CompletionItem], call: str = BY_CALL
) -> list[CompletionItemResult]:
    """In a thread: the reports applied in one transaction; one answer per item, in order."""
    checked = check_reports(ctx, items, call)
    results: Results = {}
    if checked.accepted:
        apply = functools.partial(batches.run_batch, namespace=namespace, items=checked.accepted)
        results = apply(ctx.engine, batches.complete_attempts)
    return answer_reports(ctx, namespace, items, checked, results)


def check_reports(ctx: AppContext, items: Sequence[CompletionItem], call: str) -> Checked:
    """Each report made storable (``unstorable_reports``) and its size checked: a report too
    large is refused here, its neighbours go on to the store."""
    ctx.metrics.batch_items.labels(call).observe(len(items))
    checked = Checked()
    for item in items:
        report = storable_report(Report(item.outcome, item.result, item.error, item.retryable))
        try:
            limits.check_payload(
                ctx.settings.max_payload_bytes, result=report.result, error=report.error
            )
        except limits.PayloadTooLarge as exc:
            instance = f"/v1/attempts/{item.attempt_id}/complete"
            problem = problem_body(413, "payload-too-large", exc.detail, instance)
            checked.refused[item.attempt_id] = problem
            continue
        checked.accepted.append(
            batch_items.CompletionItem(
                item.attempt_id,
                item.token,
                Outcome(report.outcome),
                report.result,
                report.error,
                report.retryable,
            )
        )
    return checked


def answer_reports(
    ctx: AppContext,
    namespace: str,
    items: Sequence[CompletionItem],
    checked: Checked,
    results: Results,
) -> list[CompletionItemResult]:
    """One answer per item, in order: its refusal here or the store's result."""
    answers = []
    for item in items:
        if item.attempt_id in checked.refused:
            answers.append(_refused(item.attempt_id, checked.refused[item.attempt_id]))
        else:
            answers.append(_answer(ctx, namespace, item.attempt_id, results[item.attempt_id]))
    return answers


def _answer(
    ctx: AppContext,
    namespace: str,
    attempt_id: str,
    result: CompletionResult | batches.ItemRefused,
) -> CompletionItemResult:
    ok = (CompletionStatus.APPLIED, CompletionStatus.DUPLICATE)
    if isinstance(result, CompletionResult) and result.status in ok:
        state = result.task_state
        if result.status is CompletionStatus.APPLIED and state in OUTCOME_TASK_STATES:
            ctx.metrics.outcomes.labels(namespace, result.queue or "", state).inc()
            if result.workflow:  # its workflow waits on it: apply it now, not at the next poll
                ctx.wake_weave()
        return CompletionItemResult(
            attempt_id=attempt_id,
            status="ok",
            outcome_status=result.status.value,
            task_state=state,
            reason=result.reason,
        )
    instance = f"/v1/attempts/{attempt_id}/complete"
    if isinstance(result, batches.ItemRefused):
        return _refused(attempt_id, problem_body(422, "validation", result.detail, instance))
    refusal = completion_refusal(attempt_id, result)
    assert refusal is not None, "only a completion that was not applied is refused"
    status, slug, detail = refusal
    return _refused(attempt_id, problem_body(status, slug, detail, instance))


def _refused(attempt_id: str, problem: dict[str, Any]) -> CompletionItemResult:
    return CompletionItemResult.model_validate(
        {"attempt_id": attempt_id, "status": "refused", "problem": problem}
    )
