"""Result delivery (seed §6.2, invariant 6): subscriptions, deliveries, pull and push.

**Fan-out happens in the outcome transaction.** ``transitions.transition()`` in Pulse writes the
result event and calls :func:`fanout.fan_out` in the same transaction, which inserts one
``event_deliveries`` row per matching subscription (UNIQUE event + subscription). The seed's
transaction table lists "必要结果通知" as part of the completion transaction, and this way no
separate loop has to find new events: there is no cursor at all, so an event whose transaction
commits late can never be skipped (seed §6.2 forbids "max auto-increment id" cursors).
``docs/concepts/results.md`` explains the choice.

Each public function is one short transaction over a connection the caller opened and touches one
namespace. Lock order inside the outcome transaction: after Pulse's own locks, the namespace's
subscription rows in share mode (so a subscription cannot be deleted under a delivery being
inserted for it) → delivery inserts. Every other delivery transaction locks subscription (share)
→ delivery rows (by primary key, ``FOR UPDATE [SKIP LOCKED]``) → audit inserts, and never
touches tasks.

A delivery moves only through :func:`transitions.move`: PENDING → PENDING (handed out / retried),
PENDING → DELIVERED (acknowledged / 2xx), PENDING → PARKED (attempts exhausted), PARKED →
DELIVERED (a late ack), PARKED → PENDING (redrive, audited).
"""
