"""What bounds a task before it runs: wait paths, execution gates, concurrency keys, quotas and
queue policies, and the permits a transition takes or gives back (seed §3, invariant 12).

The bottom of pulse above ``model``: these modules import nothing else of pulse, so every
transaction family (submit, claim, leases, batches) can ask them whether a task may move on.
"""
