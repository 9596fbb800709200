"""The intake's PostgreSQL pool has no liveness ping, so a connection the server dropped must
cost one retry, not a lost delivery."""

from __future__ import annotations

import psycopg
import pytest
from sqlalchemy.engine import make_url

from stackbot.db import deliveries_store, migrate
from stackbot.db.engine import make_engine
from stackbot.taskqueue import inbox
from tests.support import postgres


def _record(engine: object, delivery_id: str) -> inbox.RecordedDelivery:
    return inbox.record_delivery(
        engine,  # type: ignore[arg-type]
        delivery_id=delivery_id,
        event="ping",
        action=None,
        repo=None,
        body=b"{}",
        ignored_because=None,
    )


@pytest.mark.postgres
def test_a_dropped_connection_is_retried_once() -> None:
    with postgres.fresh_database() as url:
        migrate.upgrade(url)
        app_engine = make_engine(url)
        intake = inbox.make_intake_engine(app_engine)
        try:
            assert intake is not app_engine and not intake.pool._pre_ping  # type: ignore[attr-defined]
            assert _record(intake, "before").task_id is not None
            with psycopg.connect(postgres.ADMIN_URL, autocommit=True) as admin:
                killed = admin.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = %s AND pid <> pg_backend_pid()",
                    (make_url(url).database,),
                ).fetchone()
            assert killed is not None and killed[0] >= 1  # the pooled intake connection
            after = _record(intake, "after")
            assert after.task_id is not None and not after.duplicate
            assert deliveries_store.count_deliveries(app_engine) == 2
        finally:
            intake.dispose()
            app_engine.dispose()
