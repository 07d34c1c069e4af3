"""Quota → its `quotas` row in MySQL (orbit.reconcile.quota), for one queue or the namespace.
Deleting the Quota removes the row (the limits stop applying)."""

from __future__ import annotations

from . import declared

declared.register("Quota", "quotas")
