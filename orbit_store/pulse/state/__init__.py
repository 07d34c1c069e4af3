"""How a task and its attempts change state: the one guarded transition (``transitions``) and
its set form (``batch_moves``, with the reads and locks of ``batch_read``), the attempt rows
(``attempts``), what a heartbeat reports (``progress``), the shared INSERTs (``inserts``) and
the outage grace that keeps a server's downtime from being charged to its workers (``outages``).

Invariants 2, 3 and 4 live here: every state change is a conditional UPDATE on
(state, state_version), an attempt ends exactly once, and an outcome commits with its events.
"""
