"""The series page shows the series' landing: its order, what it waits for or why it stopped,
and each PR's outcome; a change to the landing shows at once (the landings table moves the read
clock the page cache watches)."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlmodel import Session, select

from stackbot.db.models import Landing, Repository
from stackbot.domain.landing import LandingEntry
from tests.support.dashboard_data import seed_series, sha


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", "", html).split())


def test_the_series_page_shows_its_landing(client: TestClient, engine: Engine) -> None:
    seed_series(engine, prs=3)
    assert 'id="landing"' not in client.get("/series/6307").text  # never asked: no section
    with Session(engine) as session:
        repo = session.exec(select(Repository)).one()
        assert repo.id is not None
        row = Landing(
            repo_id=repo.id,
            series_key="#6307",
            requested_on=8036,
            requested_by="bob",
            comment_id=7,
            merge_method="squash",
            waiting_for="the tree to land to be tested on `main` at `abc1234567`",
            entries=[LandingEntry(n, sha(f"h{n}")).to_json() for n in (8034, 8035, 8036)],
        )
        session.add(row)
        session.commit()
        landing_id = row.id
    text = _text(client.get("/series/6307").text)
    assert "Landing (asked by @bob; merge method squash)" in text
    assert "queued waiting for the tree to land to be tested on main at abc1234567" in text
    assert f"#8035 at {sha('h8035')[:7]}: to merge" in text
    with Session(engine) as session:
        stored = session.get(Landing, landing_id)
        assert stored is not None
        entries = [LandingEntry.from_json(e) for e in stored.entries]
        stored.entries = [
            LandingEntry(8034, entries[0].head_sha, "merged", sha("m")).to_json(),
            LandingEntry(8035, entries[1].head_sha, "not merged", None, "a new push").to_json(),
            LandingEntry(8036, entries[2].head_sha, "not merged").to_json(),
        ]
        stored.state, stored.reason = "stopped", "#8035 did not merge: a new push"
        session.add(stored)
        session.commit()
    text = _text(client.get("/series/6307").text)
    assert "stopped #8035 did not merge: a new push" in text
    assert f"#8034 at {sha('h8034')[:7]}: merged as {sha('m')[:7]}" in text
    assert "#8035 at" in text and "not merged (a new push)" in text
