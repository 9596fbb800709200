"""The webhook inbox: deliveries as GitHub sent them, and the task that processes each one.

The intake calls :func:`record_delivery` once per delivery: one short transaction inserts the
row (raw body kept, so it can be reprocessed) and, for deliveries worth acting on, enqueues a
``process_delivery`` task. A repeated ``X-GitHub-Delivery`` inserts nothing and is reported as a
duplicate, so GitHub's redeliveries are processed once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, OperationalError

from stackbot.db import deliveries_store
from stackbot.db.deliveries_store import IGNORED, RECORDED
from stackbot.db.engine import make_engine, sqlite_writer
from stackbot.domain.tasks import ProcessDelivery, TaskKind
from stackbot.errors import RetryLater
from stackbot.taskqueue import queue

PROCESS_DELIVERY = TaskKind.PROCESS_DELIVERY


@dataclass(frozen=True)
class RecordedDelivery:
    row_id: int | None  # None: a duplicate, nothing was written
    task_id: int | None  # None: recorded as ignored, or a duplicate

    @property
    def duplicate(self) -> bool:
        return self.row_id is None


def record_delivery(
    engine: Engine,
    *,
    delivery_id: str,
    event: str,
    action: str | None,
    repo: str | None,
    body: bytes,
    ignored_because: str | None,
) -> RecordedDelivery:
    """Durably record one delivery and, unless it is ignored, queue its processing.

    Raises :class:`RetryLater` when the database cannot be written (the sender should redeliver).
    """
    for attempt in (1, 2):
        try:
            return _record(engine, delivery_id, event, action, repo, body, ignored_because)
        except DBAPIError as error:
            # A pooled connection the server dropped (restart): SQLAlchemy has now discarded
            # the pool, so one more try gets a fresh connection. Anything else is for the sender.
            if attempt == 1 and error.connection_invalidated:
                continue
            if isinstance(error, OperationalError) or error.connection_invalidated:
                raise RetryLater(
                    f"the database cannot record the delivery now: {error.orig}"
                ) from error
            raise
    raise AssertionError("unreachable")


def _record(
    engine: Engine,
    delivery_id: str,
    event: str,
    action: str | None,
    repo: str | None,
    body: bytes,
    ignored_because: str | None,
) -> RecordedDelivery:
    now = datetime.now(UTC)
    values = {
        "delivery_id": delivery_id,
        "event": event,
        "action": action,
        "repo_full_name": repo,
        "body": body,
        "status": RECORDED if ignored_because is None else IGNORED,
        "error": ignored_because,
        "received_at": now,
        "processed_at": None if ignored_because is None else now,
    }
    if engine.dialect.name == "postgresql":
        return _record_in_one_statement(engine, values, enqueue=ignored_because is None)
    with sqlite_writer(engine), queue.write_connection(engine) as conn, conn.begin():
        row_id = deliveries_store.insert_new_delivery(conn, values=values)
        if row_id is None or ignored_because is not None:
            return RecordedDelivery(row_id, None)
        task_id = queue.enqueue_row(conn, PROCESS_DELIVERY, ProcessDelivery(row_id).to_payload())
    return RecordedDelivery(row_id, task_id)


def _record_in_one_statement(
    engine: Engine, values: dict[str, Any], *, enqueue: bool
) -> RecordedDelivery:
    parameters = values | {
        "kind": PROCESS_DELIVERY.value,
        "max_attempts": queue.DEFAULT_MAX_ATTEMPTS,
        "enqueue": enqueue,
    }
    # One statement is atomic on its own: autocommit spares the BEGIN and COMMIT round trips.
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        row_id, task_id = deliveries_store.insert_delivery_and_task(conn, parameters=parameters)
    return RecordedDelivery(row_id, task_id)


def make_intake_engine(engine: Engine) -> Engine:
    """The intake's own PostgreSQL pool, beside the app's ``engine``, without the liveness ping
    per checkout: that round trip was a third of an acknowledgement's time under load
    (benchmarks/bench_webhooks.py); :func:`record_delivery` retries once on a dropped
    connection instead. SQLite needs no ping: the app's engine is used as it is.

    (Moving SQLite's WAL checkpoints to a background thread was tried and dropped: under a
    steady stream of deliveries a background checkpoint never completes, so the log never
    restarts and grows without bound.)
    """
    if engine.dialect.name != "postgresql":
        return engine
    return make_engine(engine.url.render_as_string(hide_password=False), pool_pre_ping=False)
