"""How the schema moves from one revision to the next: the Alembic migrations run to head, and
the compatibility window that tells whether this code may run on a database's revision (what
lets old and new servers serve side by side during a rolling upgrade)."""
