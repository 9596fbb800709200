"""The read clock (stackbot/db/read_clock.py) moves with every committed change to a table the
dashboard reads, only then, and atomically with the change, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine, inspect, text
from sqlmodel import Session, select

from stackbot.db import read_clock
from stackbot.db.models import Job, PullRequest, Task, WebhookDelivery
from tests.support.dashboard_data import seed_series


def _ticks(engine: Engine) -> int:
    with Session(engine) as session:
        value = read_clock.ticks(session)
    assert value is not None
    return value


def test_every_watched_table_has_its_triggers_at_the_head_revision(engine: Engine) -> None:
    with engine.connect() as conn:
        installed = read_clock.installed_on(conn)
    assert installed == {table: True for table in read_clock.WATCHED}
    # and the watched tables are every table but the queue's, the delivery log's and the
    # command bookkeeping's (no page shows them)
    tables = set(inspect(engine).get_table_names()) - {"alembic_version", "read_clock"}
    assert tables - set(read_clock.WATCHED) == {
        "tasks",
        "webhook_deliveries",
        "acted_commands",
        "comment_cursors",
    }


def test_an_update_insert_or_delete_on_any_watched_table_moves_the_clock(engine: Engine) -> None:
    seed_series(engine, prs=3)
    moved = []
    with engine.connect() as conn:
        filled = [
            t
            for t in read_clock.WATCHED
            if conn.execute(text(f'SELECT count(*) FROM "{t}"')).scalar()
        ]
    assert {"pull_requests", "jobs", "test_results", "integration_steps"} <= set(filled)
    for table in filled:
        before = _ticks(engine)
        with engine.begin() as conn:  # a row written back unchanged still counts
            conn.execute(
                text(f'UPDATE "{table}" SET id = id WHERE id = (SELECT min(id) FROM "{table}")')
            )
        moved.append(_ticks(engine) > before)
    assert all(moved), dict(zip(filled, moved, strict=True))
    with Session(engine) as session:
        template = session.exec(select(Job)).first()
        assert template is not None
        job = Job(**template.model_dump(exclude={"id", "external_id"}))
        before = _ticks(engine)
        session.add(job)
        session.commit()
        after_insert = _ticks(engine)
        session.delete(job)
        session.commit()
    assert before < after_insert < _ticks(engine)


def test_the_queue_and_the_delivery_log_do_not_move_it(engine: Engine) -> None:
    before = _ticks(engine)
    with Session(engine) as session:
        session.add(Task(kind="noop", payload={}, dedupe_key="k"))
        session.add(
            WebhookDelivery(
                delivery_id="d-1", event="ping", body=b"{}", received_at=datetime.now(UTC)
            )
        )
        session.commit()
    assert _ticks(engine) == before


def test_a_rolled_back_change_does_not_move_it(engine: Engine) -> None:
    seed_series(engine, prs=2)
    before = _ticks(engine)
    with Session(engine) as session:
        pull = session.exec(select(PullRequest)).first()
        assert pull is not None
        pull.title = "never committed"
        session.add(pull)
        session.flush()
        session.rollback()
    assert _ticks(engine) == before


@pytest.mark.postgres
def test_postgresql_moves_it_once_per_transaction_and_only_at_commit(
    postgres_engine: Engine,
) -> None:
    seed_series(postgres_engine, prs=5, extra_jobs=40)
    before = _ticks(postgres_engine)
    with postgres_engine.connect() as writer:
        writer.begin()
        changed = writer.execute(text("UPDATE jobs SET status = status")).rowcount
        assert changed > 50
        assert _ticks(postgres_engine) == before  # not visible to others before the commit
        writer.commit()
    assert _ticks(postgres_engine) == before + 1


@pytest.mark.postgres
def test_postgresql_writers_in_opposite_orders_do_not_deadlock_on_the_clock(
    postgres_engine: Engine,
) -> None:
    """A moves job 1 then job 2, B moves job 2: B holds job 2 while A waits for it. Had the clock
    been moved at statement time, B would also wait for A's clock lock: a deadlock. Moved at
    commit, B commits and then A does."""
    seed_series(postgres_engine, prs=2)
    with Session(postgres_engine) as session:
        first, second = [j.id for j in session.exec(select(Job).order_by(Job.id)).all()[:2]]
    before = _ticks(postgres_engine)
    errors: list[BaseException] = []
    a_holds_first = threading.Event()
    b_holds_second = threading.Event()

    def a() -> None:
        try:
            with postgres_engine.begin() as conn:
                conn.execute(text("UPDATE jobs SET status = status WHERE id = :i"), {"i": first})
                a_holds_first.set()
                b_holds_second.wait(10)
                conn.execute(text("UPDATE jobs SET status = status WHERE id = :i"), {"i": second})
        except BaseException as error:
            errors.append(error)

    def b() -> None:
        try:
            with postgres_engine.begin() as conn:
                a_holds_first.wait(10)
                conn.execute(text("UPDATE jobs SET status = status WHERE id = :i"), {"i": second})
                conn.execute(text("UPDATE repositories SET id = id"))
                b_holds_second.set()
                threading.Event().wait(0.5)  # A is now waiting for job 2
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert _ticks(postgres_engine) == before + 2


def _table_ticks(engine: Engine) -> dict[str, int]:
    with Session(engine) as session:
        found = read_clock.table_ticks(session, read_clock.WATCHED)
    assert found is not None, "every watched table has a clock of its own"
    return dict(zip(read_clock.WATCHED, found, strict=True))


def test_each_watched_table_has_a_clock_of_its_own(engine: Engine) -> None:
    """A write moves its table's clock (and the global one), no other table's."""
    assert len({read_clock.table_id(t) for t in read_clock.WATCHED} | {1}) == 1 + len(
        read_clock.WATCHED
    )
    seed_series(engine, prs=3)
    for table in ("pull_requests", "jobs", "test_results", "approvals"):
        before, global_before = _table_ticks(engine), _ticks(engine)
        with engine.begin() as conn:
            conn.execute(
                text(f'UPDATE "{table}" SET id = id WHERE id = (SELECT min(id) FROM "{table}")')
            )
        after = _table_ticks(engine)
        moved = {t for t in read_clock.WATCHED if after[t] != before[t]}
        assert moved == {table}, (table, moved)
        assert after[table] > before[table] and _ticks(engine) > global_before


@pytest.mark.postgres
def test_postgresql_moves_a_tables_clock_once_per_transaction(postgres_engine: Engine) -> None:
    seed_series(postgres_engine, prs=5, extra_jobs=40)
    before = _table_ticks(postgres_engine)
    with postgres_engine.begin() as conn:
        assert conn.execute(text("UPDATE jobs SET status = status")).rowcount > 50
        conn.execute(text("UPDATE test_results SET outcome = outcome"))
    after = _table_ticks(postgres_engine)
    assert after["jobs"] == before["jobs"] + 1
    assert after["test_results"] == before["test_results"] + 1
    assert after["pull_requests"] == before["pull_requests"]
