"""What reconciliation judges out of date, from GitHub's list of open PRs (pure)."""

from __future__ import annotations

from stackbot.db.models import PullRequest
from stackbot.domain.records import PrRecord
from stackbot.domain.types import PrNumber
from stackbot.services.reconcile import find_drift


def row(number: int, head: str, **fields: object) -> PullRequest:
    return PullRequest(repo_id=1, number=number, head_sha=head, base_ref="main", **fields)  # type: ignore[arg-type]


def listed(number: int, head: str, **fields: object) -> PrRecord:
    return PrRecord(number=PrNumber(number), head_sha=head, base_ref="main", **fields)  # type: ignore[arg-type]


def test_matching_prs_are_left_alone() -> None:
    assert (
        find_drift(
            [row(1, "a" * 40, title="t", body="b")], [listed(1, "a" * 40, title="t", body="b")]
        )
        == []
    )


def test_every_kind_of_drift_is_found() -> None:
    stored = [
        row(1, "a" * 40),
        row(2, "b" * 40),
        row(3, "c" * 40, draft=True),
        row(4, "d" * 40, body="Depends on #1"),
        row(5, "e" * 40),  # closed on GitHub: not listed any more
        row(6, "f" * 40, state="closed"),  # closed here and there
        row(7, "0" * 40, title="old"),
    ]
    on_github = [
        listed(1, "a" * 40),
        listed(2, "9" * 40),  # a push whose delivery was lost
        listed(3, "c" * 40, draft=False),
        listed(4, "d" * 40, body="Depends on #2"),
        listed(7, "0" * 40, title="new"),
        listed(8, "8" * 40),  # opened while deliveries were lost
    ]
    drift = {d.number: d.why for d in find_drift(stored, on_github)}
    assert drift == {
        2: "head bbbbbbb → 9999999",
        3: "draft changed",
        4: "body changed",
        5: "stored as open, no longer open on GitHub",
        7: "title changed",
        8: "not stored yet",
    }
