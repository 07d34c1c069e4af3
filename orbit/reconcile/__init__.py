"""Reconcile functions: a custom resource's spec + namespace → store changes + status.

Shared by the Kopf operator and by `orbit apply`; nothing here imports Kopf or Kubernetes.
Each function runs inside one transaction the caller opened (commit to apply, roll back for a
dry run), is level-based and idempotent, and raises :class:`InvalidSpec` before writing anything
when the spec cannot be applied.
"""
