"""A relay that dies after Orbit accepted a submission but before marking the row (run as a
separate process by test_outbox.py): lease one batch, submit the first row, print the task id,
and exit at once — no mark, no cleanup."""

from __future__ import annotations

import os
import sys

import sqlalchemy as sa

from orbit_sdk import Client
from orbit_sdk.outbox import Relay, RelayPolicy, outbox_table


def main(database_url: str, server: str, token: str) -> None:
    engine = sa.create_engine(database_url)
    relay = Relay(
        engine,
        outbox_table(sa.MetaData()),
        Client(server, token=token),
        RelayPolicy(batch=1, lease_seconds=1),
    )
    (row,) = relay.lease()
    outcome = relay.submit(row)
    assert isinstance(outcome, tuple), outcome
    print(outcome[0], flush=True)
    os._exit(1)  # the crash: between submit and mark


if __name__ == "__main__":
    main(*sys.argv[1:4])
