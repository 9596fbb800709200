"""The reply limits' store (``command_replies``) on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from stackbot.db import migrate
from stackbot.db.engine import make_engine, session_scope
from stackbot.db.replies_store import reserve_reply

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
REPO = "NVIDIA/Megatron-LM"


def test_reply_limits(database_url: str) -> None:
    migrate.upgrade(database_url)
    engine = make_engine(database_url)

    def reserve(login: str, comment_id: int, *, pr: int = 1, vetter: bool, at: datetime) -> bool:
        with session_scope(engine) as session:
            return reserve_reply(
                session,
                repo=REPO,
                pr_number=pr,
                login=login,
                comment_id=comment_id,
                vetter=vetter,
                per_hour=2,
                now=at,
            )

    try:
        # A non-vetter: once per PR, whatever the case of the login; a redo of the same
        # comment's task may post what it reserved.
        assert reserve("Carol", 2**40, vetter=False, at=NOW)
        assert reserve("Carol", 2**40, vetter=False, at=NOW)
        assert not reserve("carol", 11, vetter=False, at=NOW)
        assert not reserve("carol", 12, vetter=False, at=NOW + timedelta(days=2))
        assert reserve("carol", 13, pr=2, vetter=False, at=NOW)
        # Two an hour per user, vetter or not; the hour slides.
        assert not reserve("carol", 14, pr=3, vetter=False, at=NOW + timedelta(minutes=59))
        assert reserve("carol", 15, pr=3, vetter=False, at=NOW + timedelta(minutes=61))
        assert reserve("bob", 20, vetter=True, at=NOW)
        assert reserve("bob", 21, vetter=True, at=NOW)
        assert not reserve("bob", 22, vetter=True, at=NOW + timedelta(minutes=30))
        assert reserve("dave", 30, vetter=True, at=NOW)  # per user
    finally:
        engine.dispose()
