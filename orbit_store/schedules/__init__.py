"""Schedules (seed §5 "调度触发", invariant 5): cron definitions and their occurrences.

- ``cron``: expressions in an IANA time zone → UTC instants (cronsim; Debian cron's DST rules)
- ``plan``: which due instant to decide next, and how (misfire policy, starting deadline)
- ``fire``: the firing transaction — occurrence + task + progress in one commit
- ``declare``: create, update, suspend/resume, delete (an edit bumps the version)
- ``progress``: the one guarded UPDATE of a schedule row, and the occurrence insert
- ``queries``: reads, and the scheduler's scan for due schedules

Lock order: a schedule row first, then Pulse's order (orbit_store/pulse/__init__.py) for the tasks
a fire submits or replaces. One transaction touches one namespace.
"""
