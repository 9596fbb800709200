"""The read clock: a counter that moves, in the same transaction, with every change to a table
the dashboard reads, so a page computed after reading tick ``t`` stays true while the clock
reads ``t``.

Database triggers move it, not application code, so no write path can forget it: a worker, the
web process, ``stackbot db`` or a person with ``psql`` all move it alike. The queue's own tables
(``tasks``) and the delivery log are not watched: a worker's heartbeat or a webhook delivery
changes nothing a page shows (the task counts on the index are read fresh each time).

Why it is exact. The clock's row is updated by the writing transaction itself, so it commits
atomically with the data. A reader reads the clock (tick ``t``), then computes the page in a
later transaction. A change missing from that page committed after the page's snapshot, hence
after the clock was read, so it moved the clock past ``t``: the next reader rebuilds. Only
extra rebuilds are possible, never a stale page.

On PostgreSQL the update is a deferred constraint trigger, so it runs at commit, after the
transaction's other statements: the clock's row lock is always the last lock a writer takes
(no lock-order deadlock with a transaction touching the same rows in another order) and is held
only while committing. A transaction moves the clock once (``txid`` guard), whatever the number
of rows it writes. SQLite serialises writers anyway; its triggers run per row in the writing
transaction.

Each watched table also has a clock of its own (a row of ``read_clock`` with the id
:func:`table_id` gives it), moved by the same triggers in the same way (once per transaction on
PostgreSQL). What is derived from a few tables only (a series' test rows are derived from its
runs, steps, jobs and results, never from its PRs' titles) is kept while those tables' clocks
stand still (:func:`table_ticks`), with the same argument as above, table by table: a change
that such a value misses moved its table's clock. The global clock (row 1) is always moved
first, so a transaction takes the per-table rows' locks only while it holds row 1's: two
writers cannot wait for each other's per-table rows.

A migration that recreates a watched table (SQLite's ``batch_alter_table`` does) drops its
triggers: call :func:`install` again at its end. ``tests/db/test_read_clock.py`` checks that
every watched table has its triggers at the head revision.
"""

from __future__ import annotations

import zlib

from sqlalchemy import Connection, text
from sqlmodel import Session

WATCHED = (
    "repositories",
    "pull_requests",
    "dependency_edges",
    "dependency_overrides",
    "series",
    "series_members",
    "approvals",
    "reports",
    "command_replies",
    "integration_runs",
    "integration_steps",
    "jobs",
    "test_results",
    "test_findings",
    "maintenance_runs",
    "quarantines",
    "landings",
    "node_exclusions",
)

_EVENTS = ("insert", "update", "delete")
_PG_FUNCTION = "stackbot_read_clock_tick"


def table_id(table: str) -> int:
    """The id of ``table``'s own row in ``read_clock`` (a stable hash of its name, never 1)."""
    return 1000 + zlib.crc32(table.encode()) % 1_000_000_000


def trigger_names(table: str) -> list[str]:
    """The triggers that move the clock for ``table`` (SQLite: one per event; PostgreSQL: one)."""
    return [f"read_clock_{table}_{event}" for event in _EVENTS]


def install(conn: Connection, tables: tuple[str, ...] = WATCHED) -> None:
    """Create the clock's row and each table's own row (if missing) and the triggers on
    ``tables`` (again: existing ones are replaced). A migration passes the tables of its own
    revision."""
    for row_id in (1, *(table_id(table) for table in tables)):
        conn.execute(
            text(
                "INSERT INTO read_clock (id, ticks) "
                "SELECT :id, 0 WHERE NOT EXISTS (SELECT 1 FROM read_clock WHERE id = :id)"
            ),
            {"id": row_id},
        )
    if conn.dialect.name == "postgresql":
        conn.execute(
            text(
                f"""
                CREATE OR REPLACE FUNCTION {_PG_FUNCTION}() RETURNS trigger
                LANGUAGE plpgsql AS $$
                BEGIN
                    UPDATE read_clock SET ticks = ticks + 1, txid = txid_current()
                     WHERE id = 1 AND txid IS DISTINCT FROM txid_current();
                    IF TG_NARGS > 0 THEN
                        UPDATE read_clock SET ticks = ticks + 1, txid = txid_current()
                         WHERE id = TG_ARGV[0]::bigint AND txid IS DISTINCT FROM txid_current();
                    END IF;
                    RETURN NULL;
                END
                $$
                """
            )
        )
        for table in tables:
            name = f"read_clock_{table}"
            conn.execute(text(f'DROP TRIGGER IF EXISTS {name} ON "{table}"'))
            conn.execute(
                text(
                    f'CREATE CONSTRAINT TRIGGER {name} AFTER INSERT OR UPDATE OR DELETE ON "{table}" '
                    "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW "
                    f"EXECUTE FUNCTION {_PG_FUNCTION}('{table_id(table)}')"
                )
            )
        return
    for table in tables:
        for event, name in zip(_EVENTS, trigger_names(table), strict=True):
            conn.execute(text(f"DROP TRIGGER IF EXISTS {name}"))
            conn.execute(
                text(
                    f'CREATE TRIGGER {name} AFTER {event.upper()} ON "{table}" '
                    "BEGIN UPDATE read_clock SET ticks = ticks + 1 "
                    f"WHERE id IN (1, {table_id(table)}); END"
                )
            )


def uninstall(conn: Connection, tables: tuple[str, ...] = WATCHED) -> None:
    """Drop the triggers :func:`install` made on ``tables`` (and, on PostgreSQL, its function)."""
    if conn.dialect.name == "postgresql":
        for table in tables:
            conn.execute(text(f'DROP TRIGGER IF EXISTS read_clock_{table} ON "{table}"'))
        conn.execute(text(f"DROP FUNCTION IF EXISTS {_PG_FUNCTION}()"))
        return
    for table in tables:
        for name in trigger_names(table):
            conn.execute(text(f"DROP TRIGGER IF EXISTS {name}"))


def installed_on(conn: Connection) -> dict[str, bool]:
    """For each watched table, whether all of its clock triggers exist."""
    if conn.dialect.name == "postgresql":
        rows = conn.execute(
            text(
                "SELECT c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
                "WHERE t.tgname = 'read_clock_' || c.relname AND NOT t.tgisinternal"
            )
        ).all()
        present = {row[0] for row in rows}
        return {table: table in present for table in WATCHED}
    names = {
        row[0]
        for row in conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'trigger'"))
    }
    return {table: set(trigger_names(table)) <= names for table in WATCHED}


def ticks(session: Session) -> int | None:
    """The clock now (None: its row is gone, so nothing can be trusted to be unchanged)."""
    row = session.connection().execute(text("SELECT ticks FROM read_clock WHERE id = 1")).first()
    return None if row is None else int(row[0])


def table_ticks(session: Session, tables: tuple[str, ...]) -> tuple[int, ...] | None:
    """The own clocks of ``tables``, in that order (None: a row is missing, as before
    migration 0018, so nothing derived from them can be known unchanged)."""
    ids = [table_id(table) for table in tables]
    rows = session.connection().execute(
        text("SELECT id, ticks FROM read_clock WHERE id IN ({})".format(",".join(map(str, ids))))
    )
    found = {int(row_id): int(value) for row_id, value in rows}
    if len(found) < len(set(ids)):
        return None
    return tuple(found[row_id] for row_id in ids)
