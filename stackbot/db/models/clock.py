"""The read clock: one row whose counter moves with every committed change to what the
dashboard shows (see :mod:`stackbot.db.read_clock`)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column
from sqlmodel import Field, SQLModel


class ReadClock(SQLModel, table=True):
    """Row 1 is the clock of every watched table; each watched table also has a row of its own
    (id :func:`stackbot.db.read_clock.table_id`). ``ticks`` is moved by database triggers, in
    the writing transaction; ``txid`` (PostgreSQL) is the last transaction that moved it, so a
    transaction moves it once."""

    __tablename__ = "read_clock"

    id: int | None = Field(default=None, primary_key=True)
    ticks: int = Field(default=0, sa_column=Column(BigInteger, nullable=False, server_default="0"))
    txid: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
