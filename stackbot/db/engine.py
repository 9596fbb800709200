"""Engines and sessions for SQLite (the embedded default) and PostgreSQL (production).

SQLite runs in WAL mode with a busy timeout, so the web process and a worker can share one
file. pysqlite's own transaction handling is switched off and transactions are begun here
explicitly: that makes ``BEGIN IMMEDIATE`` available to code that must take the write lock up
front (pass ``execution_options={"sqlite_begin": "IMMEDIATE"}`` to the connection or session),
instead of failing with SQLITE_BUSY when a read transaction is later upgraded to a write.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlmodel import Session

SQLITE_BUSY_TIMEOUT_MS = 30_000


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def normalise_url(url: str) -> str:
    """``postgresql://`` means psycopg 3 here (the only PostgreSQL driver installed)."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def make_engine(url: str, **kwargs: Any) -> Engine:
    url = normalise_url(url)
    if is_sqlite(url):
        database = make_url(url).database
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
            **kwargs,
        )
        _configure_sqlite(engine)
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    kwargs.setdefault("pool_size", 10)
    kwargs.setdefault("max_overflow", 20)
    return create_engine(url, **kwargs)


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves (see module doc)
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")


# One lock per SQLite file for the whole process, deliberately not per worker: it stands for the
# file's own write lock, which every engine and thread of the process on that file contends
# for (the intake and the embedded worker of `stackbot serve --worker` use separate sessions,
# and tests open a second engine on the same file). Per-worker locks would let two writers of
# one process meet in SQLite's busy handler again. PostgreSQL never takes it.
_SQLITE_WRITERS: dict[str, threading.RLock] = {}


def sqlite_writer(engine: Engine) -> AbstractContextManager[Any]:
    """Serialise this process's writes to one SQLite file (no-op on PostgreSQL).

    Threads that collide on SQLite's own lock wait in its busy handler, which sleeps up to
    100 ms between tries; threads queued on a Python lock are woken the moment the previous
    write ends. That difference set the webhook intake's p99 (benchmarks/bench_webhooks.py).
    Re-entrant, so a write made inside another (a completion's follow-ups) cannot deadlock.
    """
    if engine.dialect.name != "sqlite":
        return nullcontext()
    return _SQLITE_WRITERS.setdefault(str(engine.url), threading.RLock())


@contextmanager
def session_scope(engine: Engine, *, immediate: bool = True) -> Iterator[Session]:
    """A session committed on success and rolled back on error: a write transaction.

    On SQLite it takes the write lock when the transaction begins (``BEGIN IMMEDIATE``, and
    this process's writer lock first). A deferred transaction that reads and then writes fails
    at once with "database is locked" when another connection wrote in between (WAL mode does
    not wait there), which the worker saw as retried tasks. ``immediate=False`` is for
    read-mostly transactions that can afford that. No effect on PostgreSQL, where row locks do
    the job.
    """
    if immediate and engine.dialect.name == "sqlite":
        with sqlite_writer(engine), engine.connect() as conn:
            conn = conn.execution_options(sqlite_begin="IMMEDIATE")
            with Session(bind=conn) as session:
                try:
                    yield session
                    session.commit()
                except BaseException:
                    session.rollback()
                    raise
                conn.commit()
        return
    with Session(engine) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
