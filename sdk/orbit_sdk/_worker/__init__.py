"""The runtime behind ``Worker``: its session, the lease thread and the lease asks that fill the
set of live attempts, the attempt threads that run handlers, heartbeats, the batched starts and
reports, and the drain."""
