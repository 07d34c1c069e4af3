"""WorkflowDefinition → an immutable published version in MySQL per spec change
(orbit.reconcile.workflow_definition); status lists the versions and running workflows.
Deleting it withdraws the definition (no new starts); running workflows are left alone."""

from __future__ import annotations

from . import declared

declared.register("WorkflowDefinition", "workflowdefinitions")
