"""Accepting tasks (seed §5 "受理"): one task with its submission key and accepted event in one
transaction (``accept``), or many in one transaction (``bulk``).

A task is acknowledged only once its row, its key and its event are committed (invariant 1);
a key names one submission in its namespace, so a replay is answered as the original
(invariant 6). Group commit of concurrent single submissions is ``pulse.submit_group``.
"""
