"""How concurrent requests of one process share work: long-polling workers woken when work
arrives (``wakeups``, with the process's shared probe ``ready_watch`` and what each session
claims for, ``claimants``), and concurrent single submissions committed together
(``submit_groups``).
"""
