"""Integration runs saved and loaded through a real database (SQLite and PostgreSQL)."""

from __future__ import annotations

from sqlalchemy import Engine

from stackbot.db.engine import session_scope
from stackbot.db.integration_store import load_run, save_run
from stackbot.db.models import IntegrationRun, Repository
from stackbot.domain.types import PrNumber
from stackbot.services.integration import RunRequest, run_integration
from tests.integration.conftest import MirrorOf
from tests.integration.megatron import ALLOWLIST, DP, TP, allowlist, entry, module
from tests.integration.repo_builder import RepoBuilder

A = "megatron/core/a.py"


def test_a_run_round_trips_through_the_database(
    engine: Engine, builder: RepoBuilder, mirror_of: MirrorOf
) -> None:
    builder.commit(
        "base",
        {A: module({"f": [TP]}), "x.txt": "1\n", ALLOWLIST: allowlist({A: [entry("f", TP)]})},
    )
    builder.pr_branch(
        "p1",
        {
            A: module({"f": [TP], "g": [DP]}),
            ALLOWLIST: allowlist({A: [entry("f", TP), entry("g", DP)]}),
        },
    )
    builder.pr_branch("p2", {"x.txt": "2\n", ALLOWLIST: allowlist({A: [entry("f", TP)]}, total=7)})
    builder.pr_branch("p3", {"x.txt": "3\n"})
    mirror = mirror_of(builder)
    request = RunRequest(
        base_ref="main",
        prs=[(PrNumber(1), "p1"), (PrNumber(2), "p2"), (PrNumber(3), "p3")],
        name="db",
    )
    result = run_integration(mirror, request)
    assert [s.outcome.value for s in result.steps] == ["clean", "resolved", "conflict"]

    with session_scope(engine) as session:
        repo = Repository(full_name="acme/megatron", clone_url=str(builder.path))
        session.add(repo)
        session.flush()
        assert repo.id is not None
        run_id = save_run(session, repo.id, result, series_key="#6307").id
    assert run_id is not None
    with session_scope(engine) as session:
        row = session.get(IntegrationRun, run_id)
        assert row is not None and row.status == "conflict" and row.series_key == "#6307"
        loaded = load_run(session, run_id)
        assert load_run(session, run_id + 1000) is None
    assert loaded is not None
    assert loaded.to_json() == result.to_json()
