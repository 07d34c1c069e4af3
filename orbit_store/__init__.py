"""Orbit's authoritative state: schema, transactions and the invariant checker.

Nothing here imports HTTP, Kopf or Kubernetes code. Every public transaction function takes a
SQLAlchemy connection (or engine) and explicit inputs, returns a typed result and raises typed
errors (see :mod:`orbit_store.errors`).
"""
