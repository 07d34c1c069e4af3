"""Read-only views of tasks for the API, CLI, console and gauges: one task with its attempts and
events (``queries``), why a WAITING task has not started (``waiting``), which tasks a live
worker can run (``routing``), the backlog per queue (``backlog``) and the checks that the
engine's bookkeeping agrees with its tasks (``bookkeeping``, run by ``orbit verify``).

Nothing here writes or takes a lock.
"""
