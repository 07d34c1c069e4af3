"""Weave: workflow definitions and instances over Pulse tasks (seed §5, §6.3; ORBIT.md §8).

One module per transaction family — ``definitions`` (publish, retire), ``start``, ``inbox``
(Pulse outcomes in, consumed by the server's inbox loop), ``signals``, ``control`` (pause,
resume, cancel), ``timers`` (the timer loop) — over one core, ``advance``, which fires due timers
(``firing``), decides whatever the DAG allows and finishes the instance; ``activate`` creates a
step's Pulse task, wait or poll round in the same transaction (invariant 9), ``waits`` gives
pending signals to active waits. ``transitions`` holds the legal moves of instances, steps and
activations; ``context`` the locked instance a transaction works on; ``dsl`` (``spec``, ``cel``) the
DSL; ``queries`` the views; ``invariants`` the checks of ``orbit admin verify``; ``service`` the
entry points with retries and per-item isolation; ``outcomes`` Pulse's one hook. The inbox and
timer loops decide many instances per transaction (``sets``: ``inbox_set``, ``timer_set``, run by
``set_pass``): each instance's writes held back (``buffered``) and written for the set at once
(``set_writes``).

Lock order, kept by every Weave transaction (and compatible with Pulse's,
``orbit_store/pulse/__init__.py``):

    workflow instance row (FOR UPDATE, always first) → inbox row → quota rows (submit)
    → task rows (cancel) → execution gate → activations, steps, waits, signals, rounds
    → events / audit (inserts only)

Pulse never locks a workflow instance: its outcome transaction only INSERTs an inbox row, which
has no foreign key to the instance for exactly this reason.
"""
