"""A realistic landing gate for the landing page's tests and screenshots: on the seeded
repository, landing 1 (#8034 → #8035 → #8036) merging with #8034 merged, landing 2
(#8100 → #8101) tested speculatively on top of it and passed, landing 3 (#8120) being tested
speculatively on top of both; finished: #7990 → #7991 landed in 23 minutes, #8050 stopped by a
new push after 41 minutes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine
from sqlmodel import Session, select

from stackbot.db.models import Landing, Repository
from stackbot.domain.landing import LandingEntry
from tests.support.dashboard_data import sha

NOW = datetime(2026, 12, 5, 9, 30, tzinfo=UTC)
STOPPED_REASON = (
    "#8051 did not merge: a new push: its head is no longer the tested one; land again once it "
    "is tested"
)


def _entries(*numbers: int, merged: int = 0) -> list[dict[str, object]]:
    return [
        LandingEntry(
            n,
            sha(f"h{n}"),
            "merged" if i < merged else "pending",
            sha(f"m{n}") if i < merged else None,
        ).to_json()
        for i, n in enumerate(numbers)
    ]


def seed_landings(engine: Engine) -> dict[str, int]:
    """The gate above (the repository must exist: ``seed_series`` first); its landings' ids."""
    with Session(engine) as session:
        repo = session.exec(select(Repository)).first()
        assert repo is not None and repo.id is not None
        main = sha("main")[:10]
        rows = {
            "merging": Landing(
                repo_id=repo.id,
                series_key="#6307",
                requested_on=8036,
                requested_by="bob",
                comment_id=101,
                merge_method="squash",
                state="merging",
                entries=_entries(8034, 8035, 8036, merged=1),
                main_sha=sha("main"),
                tested_tree=sha("tree-1"),
                created_at=NOW - timedelta(minutes=31),
            ),
            "passed": Landing(
                repo_id=repo.id,
                series_key="#8100",
                requested_on=8101,
                requested_by="alice",
                comment_id=102,
                merge_method="squash",
                entries=_entries(8100, 8101),
                waiting_for="the landings ahead of it to land (#8035 → #8036); its tree on top "
                "of them passed",
                tested_tree=sha("tree-2"),
                created_at=NOW - timedelta(minutes=24),
            ),
            "testing": Landing(
                repo_id=repo.id,
                series_key="#8120",
                requested_on=8120,
                requested_by="alice",
                comment_id=103,
                merge_method="squash",
                entries=_entries(8120),
                waiting_for=f"the tree to land to be tested on `main` at `{main}` with the "
                "landings ahead of it (#8035 → #8036; #8100 → #8101): 2 of 3 test jobs running",
                created_at=NOW - timedelta(minutes=12),
            ),
            "landed": Landing(
                repo_id=repo.id,
                series_key="#7990",
                requested_on=7991,
                requested_by="bob",
                comment_id=90,
                merge_method="squash",
                state="landed",
                entries=_entries(7990, 7991, merged=2),
                created_at=NOW - timedelta(hours=3),
                finished_at=NOW - timedelta(hours=3) + timedelta(minutes=23),
            ),
            "stopped": Landing(
                repo_id=repo.id,
                series_key="#8050",
                requested_on=8051,
                requested_by="bob",
                comment_id=91,
                merge_method="squash",
                state="stopped",
                reason=STOPPED_REASON,
                entries=[
                    *_entries(8050, merged=1),
                    LandingEntry(8051, sha("h8051"), "not merged", None, "a new push").to_json(),
                ],
                created_at=NOW - timedelta(hours=2),
                finished_at=NOW - timedelta(hours=2) + timedelta(minutes=41),
            ),
        }
        for row in rows.values():  # oldest first: the gate's order is the landings' ids
            session.add(row)
            session.flush()
        session.commit()
        return {name: row.id for name, row in rows.items() if row.id is not None}
