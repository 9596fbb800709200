"""The maintenance page: disk use per area as the last maintenance round measured it.

Pages never walk the disks: the ``maintenance`` task measures and stores the figures
(``maintenance_runs``), and this shows the newest ones with their time. Error texts stay in the
worker's log (they name server paths); the page names only the areas that failed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from sqlmodel import Session

from stackbot.config import MaintenanceSettings
from stackbot.db import maintenance_store
from stackbot.db.models import MaintenanceRun

AREA_LABELS = {
    "mirrors": "git mirrors",
    "run_refs": "integration run refs",
    "job_output": "job output",
    "runner_cache": "runner repository cache",
    "database": "database",
}


REMOVED_LABELS = {
    "run_refs_removed": "run refs",
    "job_dirs_removed": "job output directories",
    "runner_cache_removed": "runner cache entries",
}


@dataclass(frozen=True)
class AreaUse:
    area: str
    label: str
    bytes: int | None
    count: int | None
    freed_bytes: int | None  # by the round; None where the area frees no bytes itself


@dataclass(frozen=True)
class RoundRow:
    id: int
    trigger: str
    finished_at: str
    freed_bytes: int
    removed: dict[str, int]
    failed_areas: list[str]
    # Where the freed bytes came from, in words ("git mirrors": a repack frees bytes while
    # removing nothing), largest first.
    freed_in: list[tuple[str, int]] = field(default_factory=list)


@dataclass(frozen=True)
class MaintenanceView:
    measured_at: str | None
    areas: list[AreaUse] = field(default_factory=list)
    rounds: list[RoundRow] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def maintenance_view(session: Session, settings: MaintenanceSettings) -> MaintenanceView:
    rounds = maintenance_store.recent(session, limit=10)
    latest = rounds[0] if rounds else None
    return MaintenanceView(
        measured_at=_iso(latest.finished_at) if latest else None,
        areas=_areas(latest) if latest else [],
        rounds=[_round(row) for row in rounds],
        settings=settings.model_dump(),
    )


def _areas(row: MaintenanceRun) -> list[AreaUse]:
    found = []
    for area, label in AREA_LABELS.items():
        use = row.usage.get(area) or {}
        found.append(
            AreaUse(
                area,
                label,
                _int(use.get("bytes")),
                _int(use.get("count")),
                _int(row.freed.get(area)),
            )
        )
    return found


def _round(row: MaintenanceRun) -> RoundRow:
    removed = {
        label: int(row.summary.get(key) or 0)
        for key, label in REMOVED_LABELS.items()
        if isinstance(row.summary.get(key), int)
    }
    failed = sorted(
        {part.split(":", 1)[0].strip() for part in (row.error or "").split(";") if ":" in part}
    )
    return RoundRow(
        id=row.id or 0,
        trigger=row.trigger,
        finished_at=_iso(row.finished_at),
        freed_bytes=sum(int(v) for v in row.freed.values()),
        removed=removed,
        freed_in=sorted(
            (
                (AREA_LABELS.get(area, area.replace("_", " ")), int(value))
                for area, value in row.freed.items()
                if isinstance(value, int | float) and value > 0
            ),
            key=lambda item: -item[1],
        ),
        failed_areas=[a for a in failed if a in AREA_LABELS or a == "round"],
    )


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) else None


def _iso(value: datetime | None) -> str:
    return value.isoformat(timespec="seconds") if value else ""
