"""Pulse: the task engine's transactions (seed §2, §3, §5).

One module per transaction family; each public function is one short transaction over a
connection the caller opened (``orbit_store.db.run_transaction`` adds deadlock retries) and
returns a typed result.

Lock order, kept by every transaction so two of them never wait on each other in a cycle:

    worker session (shared) → quota rows → task rows (by id) → execution gate (shared)
    → concurrency key rows (sorted) → attempt rows → permits → events / audit (inserts only)

Heartbeats lock only the attempt row; because every path that supersedes an attempt updates
that same row first under the task lock, a renewal and a takeover serialise on it.
"""
