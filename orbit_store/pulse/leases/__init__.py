"""The life of a granted lease (seed §3, §5): start it (``start``), renew it (``heartbeat``),
report its outcome (``complete``), reclaim it when it lapses (``expiry``), or hand it back when
the grant never reached its worker (``unreceived``).

Every call carries the attempt's token and is refused when the attempt was superseded or its
lease lapsed (invariant 3); an outcome commits with its task's state and events (invariant 4).
"""
