"""The landing's pure rules: which PRs land in which order, what protection still needs, how a
refusal reads, and what the landing comment says at each state."""

from __future__ import annotations

from stackbot.domain.landing import (
    LandingEntry,
    LandingState,
    approvers,
    blockers,
    landing_order,
    refusal_note,
)
from stackbot.domain.landing_text import (
    LANDING_MARKER,
    LandingView,
    landing_comment,
    landing_reply,
    nothing_to_land_reply,
)
from stackbot.domain.records import MergeRules, ReviewRecord


def test_the_order_is_the_series_order_of_open_prs_up_to_n() -> None:
    order = [8034, 8035, 8050, 8748]
    assert landing_order(order, {8034, 8035, 8748}, None) == [8034, 8035, 8748]
    assert landing_order(order, {8034, 8035, 8748}, 8035) == [8034, 8035]
    assert landing_order(order, {8034, 8035, 8748}, 8050) == []  # not open: nothing
    assert landing_order(order, {8035, 8748}, 8748) == [8035, 8748]  # 8034 landed already


def test_a_pr_the_tested_series_tree_left_out_is_not_landed() -> None:
    order = [8034, 8035, 8050, 8748]
    open_prs = {8034, 8035, 8050, 8748}
    assert landing_order(order, open_prs, None, {8050}) == [8034, 8035, 8748]
    assert landing_order(order, open_prs, 8748, {8050}) == [8034, 8035, 8748]
    assert landing_order(order, open_prs, 8050, {8050}) == []
    view = LandingView(
        1, LandingState.WAITING, (LandingEntry(8034, "a" * 40),), "merge", "maintainer-p", "main"
    )
    reply = landing_reply(view, {8050: "it conflicts with #8035"})
    assert "#8050 is not landed (it conflicts with #8035, so the tested series tree" in reply
    assert "it stays open" in reply
    refused = nothing_to_land_reply(8748, 8050, {8050: "it conflicts with #8035"})
    assert refused.startswith("#8050 was left out of the series' tested tree (it conflicts")


def test_approvals_count_each_reviewers_newest_decision_on_the_head() -> None:
    reviews = [
        ReviewRecord("bob", "APPROVED", "old"),
        ReviewRecord("dave", "APPROVED", "new"),
        ReviewRecord("dave", "CHANGES_REQUESTED", "new"),
        ReviewRecord("erin", "APPROVED", "new"),
        ReviewRecord("erin", "COMMENTED", "new"),
        ReviewRecord("alice", "APPROVED", "new"),  # the author
    ]
    keep = MergeRules(approvals=1)
    dismiss = MergeRules(approvals=1, dismiss_stale_reviews=True)
    assert approvers(reviews, author="alice", head_sha="new", rules=keep) == {"bob", "erin"}
    assert approvers(reviews, author="alice", head_sha="new", rules=dismiss) == {"erin"}


def test_blockers_name_each_missing_check_and_review() -> None:
    rules = MergeRules(required_checks=("ci/a", "ci/b", "ci/c", "ci/d"), approvals=2)
    checks = {"ci/a": "success", "ci/b": "pending", "ci/c": "failure"}
    assert blockers(rules=rules, approving_writers=1, checks=checks) == [
        "the required check `ci/b` to finish",
        "the required check `ci/c` to pass (it is `failure`)",
        "the required check `ci/d` (not reported on this head)",
        "1 more approving review by someone with write access",
    ]
    assert blockers(rules=MergeRules(), approving_writers=0, checks={}) == []


def test_refusals_say_what_happened() -> None:
    assert refusal_note(409, "Head branch was modified.").startswith("a new push")
    blocked = refusal_note(405, "At least 1 approving review is required by reviewers")
    assert blocked.startswith("blocked: needs")
    assert refusal_note(405, "Pull Request is not mergeable") == (
        "GitHub refused the merge (405): Pull Request is not mergeable"
    )


def _view(state: LandingState, entries: tuple[LandingEntry, ...], **kw: object) -> LandingView:
    return LandingView(1, state, entries, "squash", "bob", "main", **kw)  # type: ignore[arg-type]


def test_the_comment_says_what_lands_what_it_waits_for_and_what_did_not_land() -> None:
    waiting = _view(
        LandingState.WAITING,
        (LandingEntry(8034, "a" * 40), LandingEntry(8035, "b" * 40)),
        waiting_for="the tree to land to be tested",
    )
    body = landing_comment(waiting)
    assert body.startswith(LANDING_MARKER)
    assert (
        "**Queued for landing**: #8034 → #8035. Waiting for the tree to land to be tested." in body
    )
    assert "#8035 (tested head `bbbbbbbbbb`) to merge" in body
    stopped = _view(
        LandingState.STOPPED,
        (
            LandingEntry(8034, "a" * 40, "merged", "c" * 40),
            LandingEntry(8035, "b" * 40, "not merged", None, "a new push"),
        ),
        reason="#8035 did not merge: a new push",
    )
    body = landing_comment(stopped)
    assert "⛔ **Landing stopped**: #8035 did not merge: a new push" in body
    assert "#8034 (tested head `aaaaaaaaaa`) merged into `main` as `cccccccccc`" in body
    assert "#8035 (tested head `bbbbbbbbbb`) not merged: a new push" in body
    assert "Still open: #8035, based on `main` where their parent landed." in body
