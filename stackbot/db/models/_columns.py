"""Column helpers shared by the model modules."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Column, DateTime, LargeBinary, Text


def utcnow() -> datetime:
    return datetime.now(UTC)


def json_column(*, nullable: bool = False) -> Any:
    return Column(JSON, nullable=nullable)


def text_column(*, nullable: bool = True) -> Any:
    return Column(Text, nullable=nullable)


def blob_column(*, nullable: bool = False) -> Any:
    return Column(LargeBinary, nullable=nullable)


def time_column(*, nullable: bool = False, index: bool = False) -> Any:
    return Column(DateTime(timezone=True), nullable=nullable, index=index)
