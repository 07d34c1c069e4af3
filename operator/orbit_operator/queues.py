"""Queue → its `queues` row in MySQL (orbit.reconcile.queue); status shows the live backlog.

Deletion follows spec.deletionPolicy: while tasks are unfinished the finalizer stays and Ready
says HasUnfinishedTasks (Block waits for you, Drain for the backlog, Cancel cancels it)."""

from __future__ import annotations

from . import declared

declared.register("Queue", "queues")
