"""What a ``stackbot db downgrade`` would undo and drop, worked out before anything is dropped.

The target may be spelled any way Alembic accepts (``base``, ``-8``, ``0001-1``, ``0008@base``,
a revision id). Rather than parse that, or guess tables from the scripts' text, the same
downgrade is replayed on a scratch SQLite database brought to the database's own revision: the
tables it has before and not after are the ones the downgrade drops, whatever the revision is
called. Their rows are then counted in the real database, which is only read.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import func, inspect, select, table
from sqlalchemy.engine import Connection

from stackbot.db.engine import make_engine
from stackbot.db.migrate import alembic_config

_ALEMBIC_TABLE = "alembic_version"


@dataclass(frozen=True)
class DowngradePlan:
    current: tuple[str, ...]  # the database's revision(s) now (empty: never migrated)
    after: tuple[str, ...]  # its revision(s) after the downgrade (empty: base)
    undone: tuple[str, ...]  # the revisions whose downgrade runs, newest first
    dropped: dict[str, int]  # table -> rows it holds now, for each table the downgrade drops
    drops_every_table: bool

    @property
    def rows_lost(self) -> int:
        return sum(self.dropped.values())

    @property
    def needs_consent(self) -> bool:
        """Data would be lost, or the whole schema would go."""
        return self.rows_lost > 0 or (self.drops_every_table and bool(self.dropped))


def plan_downgrade(database_url: str, target: str) -> DowngradePlan:
    """What ``alembic downgrade target`` would do to the database at ``database_url``.

    Raises what Alembic raises for a target it cannot resolve (``CommandError``), and what
    SQLAlchemy raises for a database it cannot open.
    """
    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            current = tuple(MigrationContext.configure(conn).get_current_heads())
            present = _tables(conn)
            plan_tables = _replay(current, target)
            before, after_tables, after = plan_tables
            dropped_names = sorted((before - after_tables) & present)
            dropped = {name: _rows(conn, name) for name in dropped_names}
            left = (present - {_ALEMBIC_TABLE}) - set(dropped_names)
    finally:
        engine.dispose()
    script = ScriptDirectory.from_config(alembic_config(database_url))
    undone = _undone(script, current, after)
    return DowngradePlan(
        current=current,
        after=after,
        undone=undone,
        dropped=dropped,
        drops_every_table=not left,
    )


def _replay(current: tuple[str, ...], target: str) -> tuple[set[str], set[str], tuple[str, ...]]:
    """Tables before and after ``downgrade target`` on a scratch database at ``current``."""
    quiet = _Quiet(logging.getLogger("alembic"))  # the replay is not the operator's migration
    with quiet, tempfile.TemporaryDirectory(prefix="stackbot-downgrade-plan-") as scratch_dir:
        url = f"sqlite:///{Path(scratch_dir) / 'scratch.db'}"
        config = alembic_config(url)
        for head in current:
            command.upgrade(config, head)
        scratch = make_engine(url)
        try:
            with scratch.connect() as conn:
                before = _tables(conn)
            command.downgrade(config, target)
            with scratch.connect() as conn:
                after = _tables(conn)
                heads = tuple(MigrationContext.configure(conn).get_current_heads())
        finally:
            scratch.dispose()
    return before, after, heads


class _Quiet:
    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger
        self.level = logger.level

    def __enter__(self) -> None:
        self.logger.setLevel(logging.WARNING)

    def __exit__(self, *exc: object) -> None:
        self.logger.setLevel(self.level)


def _undone(
    script: ScriptDirectory, current: tuple[str, ...], after: tuple[str, ...]
) -> tuple[str, ...]:
    kept = {rev.revision for rev in script.iterate_revisions(after, "base")} if after else set()
    undone = [rev.revision for rev in script.iterate_revisions(current, "base")] if current else []
    return tuple(revision for revision in undone if revision not in kept)


def _tables(conn: Connection) -> set[str]:
    return set(inspect(conn).get_table_names()) - {_ALEMBIC_TABLE}


def _rows(conn: Connection, name: str) -> int:
    return int(conn.execute(select(func.count()).select_from(table(name))).scalar_one())


def describe(plan: DowngradePlan) -> list[str]:
    """The lines shown before the downgrade runs (or before asking for ``--yes``)."""
    undone = ", ".join(plan.undone) or "nothing"
    after = ", ".join(plan.after) or "base (no schema)"
    lines = [f"this downgrade undoes {undone} and leaves the database at {after}"]
    if not plan.dropped:
        lines.append("it drops no table")
        return lines
    count = len(plan.dropped)
    lines.append(
        f"it drops {count} table{'s' if count != 1 else ''} holding {plan.rows_lost:,} "
        f"row{'s' if plan.rows_lost != 1 else ''}:"
    )
    width = max(len(name) for name in plan.dropped)
    for name, rows in sorted(plan.dropped.items(), key=lambda item: (-item[1], item[0])):
        lines.append(f"  {name:<{width}}  {rows:>9,} row{'s' if rows != 1 else ''}")
    return lines
