"""Pulse: the task engine's transactions (seed §2, §3, §5).

One sub-package per transaction family; each public function is one short transaction over a
connection the caller opened (``orbit_store.db.run_transaction`` adds deadlock retries) and
returns a typed result. Every transaction touches one namespace. From the top down (each layer
imports only those below it; ``pyproject.toml``'s import-linter contract keeps it so):

    submit_group, cycle,             entry points: open transactions, retry, resolve ambiguity
    service, batches
    batch/      the set path of an attempt batch (grouped starts and completions)
    manual/     cancel, review, manual retry (audited; invariant 8)
    claim/      READY rows to grants: promotion, lanes, grants, the long-poll's probes
    leases/     start, heartbeat, complete, expiry, hand-back of unreceived grants
    submit/     accepting one task (accept) or many (bulk)
    views/      read-only: task detail, waiting causes, routing, backlog, bookkeeping checks
    workers/    worker sessions and registered pods
    state/      the one guarded transition, attempt rows, their set forms, outage grace
    limits/     wait paths, execution gates, concurrency keys, quotas, queue policies
    model       states, policies and typed results

The lock order, kept by every transaction so two of them never wait on each other in a cycle
(``tests/store/pulse/test_lock_order.py`` runs them all at once and counts deadlocks: zero):

    1. namespace row, queue row         shared by submissions; exclusive when a quota adopts
                                        its scope or a queue is deleted
    2. worker pod, then worker session  shared by registration / by claims, starts, renewals;
                                        exclusive when a session ends
    3. execution gates (by id)          shared where a task is placed or started (read before
                                        the task: a task's gate_id never changes); exclusive
                                        in gates.set_gate and on a gate's first creation
    4. task rows (by id)                claims take theirs with SKIP LOCKED
    5. attempt rows (by id)
    6. concurrency key rows (by key)
    7. other tasks a key releases       SKIP LOCKED
    8. permit rows                      only ever touched under their task's row lock
    9. quota rows (by id)               claims lock theirs before their SKIP LOCKED task scan
    10. inserts: attempts, events, result events, audit, submission keys

Two rules make this hold in practice, beyond the order itself:

- A lock taken with SKIP LOCKED never waits, so it cannot close a cycle: claims take quota
  rows and then skip-lock tasks, and keys hand permits to skip-locked blocked tasks.
- Rows are locked, and changed, through their primary key (``db.by_primary_key``): a waiting
  locking read or an UPDATE through a secondary index locks that index's entries first — the
  entry after its range too, another row's — and deadlocks with transactions that hold that
  row and change the index. The optimizer may pick such an index even for ``id = ?`` when the
  other conditions name its columns (a single start's UPDATE did, through the lease reaper's
  index); ``tests/store/pulse/test_primary_key_locking.py`` checks every statement of a lifecycle.
  Sets of rows are found by a plain read, then locked by id in id order and checked again.
  Foreign keys whose index includes a column that changes would take a hidden shared lock on
  the parent row at every change; their indexes hold the key column alone (``ix_tasks_gate``,
  ``ix_task_attempts_by_session``).

The restore fence's row (``dispatch_fence``, ``orbit_store/fencing.py``) is read plainly by
claims, starts, renewals and completions, never locked by them; only a fence or a reopen locks it,
in a transaction that takes no other lock. A fence's per-namespace pass follows the order above:
the sessions exclusively, then the attempts (``orbit_store/recovery/restore_fence.py``).

A transaction that changes several tasks (a queue cancelled on deletion) locks, before the
first change, everything the changes will need, kind by kind in this order
(``cancel.cancel_tasks``). So does a batch of starts or completions on its set path
(``batch_read``): the sessions, the gates, then the task rows of the whole batch, each kind in
id order, before its grouped updates and the single-item bodies of its rare items.
"""
