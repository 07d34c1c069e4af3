"""A worker's report whose result or error the database cannot store (NaN, nesting deeper than
``MAX_JSON_DEPTH``, text that is not Unicode: ``orbit_sdk.json_values``).

Refusing it would leave the attempt RUNNING while the worker resends the same report until its
lease or its patience ends, and then a safe task would run again and an unsafe one wait for
review although its handler finished. Instead the report is applied with what can be stored: a
success whose result cannot be stored is a failure (not retryable: the handler would return the
same again) saying where and why; an error that cannot be stored is replaced by one that says
so, the outcome and ``retryable`` kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orbit_sdk.json_values import storable_problem


@dataclass(frozen=True)
class Report:
    outcome: str
    result: Any
    error: Any
    retryable: bool


def storable_report(report: Report) -> Report:
    """``report`` as it can be stored (itself when it can be stored as it is)."""
    result_problem = storable_problem(report.result, "result")
    if result_problem is not None:
        error = {
            "type": "ResultNotStorable",
            "message": f"the handler's result cannot be stored: {result_problem}",
        }
        if report.outcome == "succeeded":
            return Report("failed", None, error, retryable=False)
        report = Report(report.outcome, None, report.error, report.retryable)
    error_problem = storable_problem(report.error, "error")
    if error_problem is not None:
        error = {
            "type": "ErrorNotStorable",
            "message": f"the reported error cannot be stored: {error_problem}",
        }
        report = Report(report.outcome, report.result, error, report.retryable)
    return report
