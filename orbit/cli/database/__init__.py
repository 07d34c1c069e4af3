"""The commands that open the database themselves rather than call a server: ``orbit admin``
(migrations, grants, verify, tokens, the audit trail, retention, restore fencing) and the
database options they share with ``orbit server``, ``orbit dev`` and ``orbit apply``.
"""
