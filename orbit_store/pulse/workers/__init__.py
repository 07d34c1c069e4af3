"""Worker sessions (seed §3, ORBIT.md §6): registering, renewing, draining and ending them
(``sessions``), the worker pods the operator registered that a session must match in cluster
mode (``pods``), and the sessions as people look at them (``worker_views``).

Ending a session never decides a task's fate: it makes its attempts' leases lapse now, and the
reaper (``leases.expiry``) applies the usual rules.
"""
