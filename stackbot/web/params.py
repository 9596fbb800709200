"""Path parameters shared by the JSON API and the dashboard.

Row ids and pull request numbers live in INTEGER columns (32-bit on PostgreSQL), so a path id
outside 1 .. 2**31 - 1 names nothing any row can hold: it is refused as malformed (422, like
``/api/jobs/abc``) before the database sees it, and the OpenAPI schema documents the range.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Path

MAX_ROW_ID = 2**31 - 1  # PostgreSQL's INTEGER; SQLite is wider, the same rule holds on both

RowId = Annotated[int, Path(ge=1, le=MAX_ROW_ID, description=f"1 .. {MAX_ROW_ID}")]
PullNumber = Annotated[
    int, Path(ge=1, le=MAX_ROW_ID, description=f"a pull request number, 1 .. {MAX_ROW_ID}")
]
