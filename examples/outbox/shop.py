"""A tiny shop whose orders and their Orbit tasks can never part ways (the transactional outbox).

Placing an order writes the order row and a pending "send the receipt" submission in ONE
transaction of the shop's own database. `orbit outbox relay` (or ``relay_now``) sends it later
under the stored idempotency key. If the order rolls back, nothing is ever sent.

    python examples/outbox/shop.py --db sqlite:///shop.db place alice@example.com 42.00
    orbit outbox relay --database-url sqlite:///shop.db --until-idle
"""

from __future__ import annotations

import argparse
import datetime as dt
import uuid

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from orbit_sdk import Client
from orbit_sdk.outbox import OutboxSubmission, Relay, RelayReport, enqueue, outbox_table

NAMESPACE = "dev"


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"

    id: Mapped[str] = mapped_column(sa.String(36), primary_key=True)
    email: Mapped[str] = mapped_column(sa.String(255))
    total: Mapped[str] = mapped_column(sa.String(32))
    created_at: Mapped[dt.datetime] = mapped_column(sa.DateTime())


#: The outbox lives in the shop's schema, next to its own tables.
outbox = outbox_table(Base.metadata)


def place_order(session: Session, email: str, total: str, namespace: str = NAMESPACE) -> Order:
    """Write the order and its receipt task in the caller's transaction."""
    order = Order(id=str(uuid.uuid4()), email=email, total=total, created_at=dt.datetime.now())
    session.add(order)
    session.flush()
    enqueue(
        session,
        outbox,
        OutboxSubmission(
            namespace=namespace,
            handler="shop.send_receipt",
            params={"order_id": order.id, "email": email, "total": total},
            idempotency_key=f"receipt-{order.id}",
        ),
    )
    return order


def relay_now(engine: sa.Engine, client: Client) -> RelayReport:
    """Send everything that is due, then return (the library call behind the CLI)."""
    return Relay(engine, outbox, client).run(until_idle=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", default="sqlite:///shop.db")
    sub = parser.add_subparsers(dest="command", required=True)
    place = sub.add_parser("place", help="place an order (and queue its receipt)")
    place.add_argument("email")
    place.add_argument("total")
    args = parser.parse_args()
    engine = sa.create_engine(args.db)
    Base.metadata.create_all(engine)
    with Session(engine) as session, session.begin():
        order_id = place_order(session, args.email, args.total).id
    print(f"order {order_id} placed; its receipt is in the outbox")


if __name__ == "__main__":
    main()
