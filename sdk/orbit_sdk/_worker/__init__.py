"""The runtime behind ``Worker``: the set of live attempts, the lease asks that fill it, the
attempt threads that run handlers, heartbeats, and the batched starts and reports."""
