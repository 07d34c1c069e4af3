"""What a person does to a task (seed §2, §5): cancel it (``cancel``), settle a NEEDS_REVIEW task
or retry a finished one (``review``).

Each appends an audit row (who, why) in the same transaction as the change; none rewrites a
task's history or a confirmed outcome (invariant 8).
"""
