"""The hot paths' INSERT statements, built once and shared: a fresh ``table.insert()`` costs
SQLAlchemy its construction and cache key on every call, on the hottest paths; a statement
object reused keeps its memoised cache key. The rows are bound per call."""

from __future__ import annotations

from orbit_store.schema import result_events, submission_keys, task_attempts, task_events, tasks

TASKS = tasks.insert()
TASK_EVENTS = task_events.insert()
TASK_ATTEMPTS = task_attempts.insert()
RESULT_EVENTS = result_events.insert()
SUBMISSION_KEYS = submission_keys.insert()
