"""Claiming (seed §5 "领取"): which READY tasks a worker gets, and everything on the way to a grant.

``claim`` is the transaction: it promotes what fell due (``promote``), picks tasks per queue
without head-of-line blocking (``lanes``) and writes the grants (``grant``: attempt, lease and
fencing token — invariant 2, at most one live grant per state version). ``probe`` and
``readiness`` answer the long-poll's "anything for me?" without writing.
"""
