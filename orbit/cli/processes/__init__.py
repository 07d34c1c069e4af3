"""The commands that run Orbit's own processes: ``orbit server`` (with its HTTP processes and
CPU count), ``orbit dev`` (everything in one process on SQLite), ``orbit operator`` and
``orbit worker``, and the port they bind before anything else (``listen``).
"""
