"""Schedule → its `schedules` row in MySQL (orbit.reconcile.schedule); the server's scheduler
fires it. The resync timer refreshes status (last/next fire, recent occurrences) from MySQL.
Deleting the Schedule deletes the row; occurrences stay as history."""

from __future__ import annotations

from . import declared

declared.register("Schedule", "schedules")
