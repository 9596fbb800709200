"""The GitHub store: PR rows and their head history, the graph, approvals, reports (SQLite and
PostgreSQL)."""

from __future__ import annotations

from sqlalchemy import Engine
from sqlmodel import select

from stackbot.db import github_store as store
from stackbot.db.engine import session_scope
from stackbot.db.models import Series
from stackbot.domain.records import CommentRecord, CommitRecord, NativeStack, PrRecord
from stackbot.domain.types import PrNumber

REPO = "NVIDIA/Megatron-LM"


def record(number: int, head: str, **fields: object) -> PrRecord:
    return PrRecord(number=PrNumber(number), head_sha=head, head_ref=f"b{number}", **fields)  # type: ignore[arg-type]


def test_pull_rows_round_trip_and_keep_their_head_history(engine: Engine) -> None:
    first = record(
        8035,
        "a" * 40,
        title="Pass the collection",
        author="connor",
        body="Depends on #8034",
        stack=NativeStack(
            id=7, number=None, size=2, position=2, base_ref="b8034", base_sha="c" * 40
        ),
        commits=(CommitRecord("a" * 40, "one", ("c" * 40,)),),
        comments=(CommentRecord("phlip", "/ok to test aaaaaaa", 11),),
    )
    with session_scope(engine) as session:
        repo = store.upsert_repository(session, full_name=REPO, clone_url="https://example/x.git")
        assert repo.id is not None
        store.save_pull(session, repo_id=repo.id, record=first)
        store.save_pull(session, repo_id=repo.id, record=record(8035, "b" * 40))
        store.save_pull(session, repo_id=repo.id, record=record(8035, "b" * 40))  # no change
        row = store.save_pull(session, repo_id=repo.id, record=first)  # pushed back
        assert row.head_history == ["b" * 40]
        row = store.save_pull(session, repo_id=repo.id, record=record(8035, "d" * 40))
        assert row.head_history == ["b" * 40, "a" * 40]
        store.save_pull(session, repo_id=repo.id, record=first)
    with session_scope(engine) as session:
        found = store.get_repository(session, full_name=REPO)
        assert found is not None and found.id is not None
        stored = store.get_pull(session, repo_id=found.id, number=8035)
        assert stored is not None
        assert store.pr_record(stored) == first
        assert stored.head_history == ["b" * 40, "d" * 40]


def test_the_graph_is_replaced_and_series_rows_survive(engine: Engine) -> None:
    with session_scope(engine) as session:
        repo = store.upsert_repository(session, full_name=REPO, clone_url="x")
        assert repo.id is not None
        repo_id = repo.id
        store.replace_graph(
            session,
            repo_id=repo_id,
            edges=[(8035, 8034, "depends_on"), (8748, 8035, "base_branch")],
            series=[store.SeriesData("#6307", (8034, 8035, 8748), tracking_issue=6307)],
        )
    with session_scope(engine) as session:
        first = session.exec(select(Series)).one()
        first_id = first.id
        store.replace_graph(
            session,
            repo_id=repo_id,
            edges=[(8035, 8034, "depends_on")],
            series=[
                store.SeriesData("#6307", (8034, 8035), tracking_issue=6307),
                store.SeriesData("root-#9000", (9000, 9001), root_pr=9000),
            ],
        )
    with session_scope(engine) as session:
        assert [(e.child, e.parent) for e in store.list_edges(session, repo_id=repo_id)] == [
            (8035, 8034)
        ]
        series = {s.key: s for s in store.list_series(session, repo_id=repo_id)}
        assert series["#6307"].id == first_id
        assert series["#6307"].order == [8034, 8035]
        assert store.series_keys_of(session, repo_id=repo_id, number=8748) == []
        assert store.series_keys_of(session, repo_id=repo_id, number=9001) == ["root-#9000"]
        assert [r.full_name for r in store.tracked_repositories(session)] == [REPO]


def test_approvals_are_stored_once_per_commit(engine: Engine) -> None:
    with session_scope(engine) as session:
        repo = store.upsert_repository(session, full_name=REPO, clone_url="x")
        assert repo.id is not None
        args = {"repo_id": repo.id, "pr_number": 8035, "vetter": "phlip", "kind": "ok_to_test"}
        assert store.add_approval(session, sha="a" * 40, **args)  # type: ignore[arg-type]
        assert not store.add_approval(session, sha="a" * 40, **args)  # type: ignore[arg-type]
        assert store.add_approval(session, sha="b" * 40, **args)  # type: ignore[arg-type]
        assert [a.sha for a in store.approvals_of(session, repo_id=repo.id, pr_number=8035)] == [
            "a" * 40,
            "b" * 40,
        ]


def test_reports_are_saved_and_deleted(engine: Engine) -> None:
    with session_scope(engine) as session:
        repo = store.upsert_repository(session, full_name=REPO, clone_url="x")
        assert repo.id is not None
        store.save_report(
            session,
            repo_id=repo.id,
            pr_number=1,
            comment_id=5,
            comment_hash="h",
            check_runs={"s": {}},
        )
        store.save_report(
            session, repo_id=repo.id, pr_number=1, comment_id=6, comment_hash="i", check_runs={}
        )
        report = store.get_report(session, repo_id=repo.id, pr_number=1)
        assert report is not None and (report.comment_id, report.comment_hash) == (6, "i")
        store.delete_report(session, repo_id=repo.id, pr_number=1)
        assert store.get_report(session, repo_id=repo.id, pr_number=1) is None
