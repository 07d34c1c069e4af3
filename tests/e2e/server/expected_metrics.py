"""The metrics a running `orbit server` must expose, with the labels each carries: the one list
the scrape test (test_monitoring.py) checks and docs/operations/monitoring.md must document.

Extend it when a component adds metrics.
"""

from __future__ import annotations

SERVER_METRICS: dict[str, tuple[str, ...]] = {
    # counters (prometheus-client exposes them with the _total suffix)
    "orbit_tasks_submitted_total": ("namespace", "queue", "result"),
    "orbit_task_outcomes_total": ("namespace", "queue", "state"),
    "orbit_task_reviews_total": ("namespace", "queue", "decision"),
    "orbit_lease_expiries_total": (),
    "orbit_engine_errors_total": ("loop",),
    "orbit_engine_item_errors_total": ("loop",),
    "orbit_schedule_fires_total": ("namespace", "outcome", "reason"),
    "orbit_workflow_step_advances_total": ("namespace",),
    "orbit_workflow_poll_rounds_total": ("namespace", "outcome"),
    "orbit_workflows_finished_total": ("namespace", "state"),
    "orbit_delivery_attempts_total": ("namespace", "subscription", "result"),
    # histograms
    "orbit_dispatch_latency_seconds": ("namespace", "queue"),
    "orbit_schedule_fire_lateness_seconds": ("namespace",),
    "orbit_batch_items": ("call",),
    "orbit_workflow_orchestration_lag_seconds": ("namespace",),
    # gauges from MySQL, computed by the gauge loop (orbit/metrics/gauges.py)
    "orbit_queue_tasks": ("namespace", "queue", "state"),
    "orbit_queue_oldest_waiting_seconds": ("namespace", "queue"),
    "orbit_worker_sessions": ("namespace", "state"),
    "orbit_tasks_unrunnable": ("namespace", "queue"),
    "orbit_workflow_instances": ("namespace", "state"),
    "orbit_workflow_inbox_backlog": ("namespace",),
    "orbit_workflow_inbox_oldest_age_seconds": ("namespace",),
    "orbit_workflow_signal_backlog": ("namespace",),
    "orbit_workflow_timers_backing_off": ("namespace",),
    "orbit_delivery_backlog": ("namespace", "subscription"),
    "orbit_delivery_oldest_age_seconds": ("namespace", "subscription"),
    "orbit_deliveries_parked": ("namespace", "subscription"),
    "orbit_dispatch_fenced": (),
    "orbit_restore_epoch": (),
    "orbit_gauges_refreshed_timestamp_seconds": (),
}

# The operator's own /metrics (tests/operator/test_operator_runtime.py scrapes them).
OPERATOR_METRICS: dict[str, tuple[str, ...]] = {
    "orbit_operator_reconciles_total": ("kind", "reason"),
    "orbit_operator_reconcile_errors_total": ("kind", "reason"),
    "orbit_operator_reconcile_duration_seconds": ("kind",),
    "orbit_operator_worker_pods_total": ("action",),
}
