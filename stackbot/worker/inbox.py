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

from sqlalchemy import Engine, text
from sqlalchemy.dialects import sqlite
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlmodel import col

from stackbot.db.deliveries_store import IGNORED, RECORDED
from stackbot.db.engine import make_engine, sqlite_writer
from stackbot.db.models import WebhookDelivery
from stackbot.domain.tasks import ProcessDelivery, TaskKind
from stackbot.errors import RetryLater
from stackbot.worker import queue

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
        statement = (
            sqlite.insert(WebhookDelivery)
            .values(values)
            .on_conflict_do_nothing(index_elements=[col(WebhookDelivery.delivery_id)])
            .returning(col(WebhookDelivery.id))
        )
        row_id = conn.execute(statement).scalar_one_or_none()
        if row_id is None or ignored_because is not None:
            return RecordedDelivery(row_id, None)
        task_id = queue.enqueue_row(conn, PROCESS_DELIVERY, ProcessDelivery(row_id).to_payload())
    return RecordedDelivery(row_id, task_id)


# PostgreSQL records a delivery and queues its task in one statement: one round trip, one
# statement to execute, where the intake's latency is mostly waiting on the database.
_RECORD_AND_ENQUEUE = text(
    """
    WITH delivery AS (
        INSERT INTO webhook_deliveries (delivery_id, event, action, repo_full_name, body, status,
                                        error, received_at, processed_at)
        VALUES (:delivery_id, :event, :action, :repo_full_name, :body, :status, :error,
                :received_at, :processed_at)
        ON CONFLICT (delivery_id) DO NOTHING
        RETURNING id
    ), task AS (
        INSERT INTO tasks (kind, payload, state, status, attempts, max_attempts, run_after,
                           created_at, updated_at)
        SELECT :kind, json_build_object('delivery', delivery.id), '{}'::json, 'pending', 0,
               :max_attempts, :received_at, :received_at, :received_at
        FROM delivery WHERE :enqueue
        RETURNING id
    )
    SELECT (SELECT id FROM delivery), (SELECT id FROM task)
    """
)


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
        row_id, task_id = conn.execute(_RECORD_AND_ENQUEUE, parameters).one()
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
