"""The workflow DSL: the WorkflowDefinition spec and its checks (``spec``) and the CEL
expressions of its conditions and templates (``cel``). Pure: no database."""
