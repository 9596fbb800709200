"""Carry a vetter's approval to a PR's new head when its own patch is unchanged (issue 24
point 5; the rule and why it is safe: :mod:`stackbot.domain.approval_carry`).

Run by the ``integrate`` task, which has the mirror fetched, before it decides which trees may
be tested: each live PR of the integration whose head has no approval, but whose latest
vetter's approval (``ok_to_test`` or an earlier carried one; a trusted author's is re-derived by
the sync instead) names an older head, is compared; a match stores an approval of the new head
with kind ``carried`` and ``carried_from`` the approved head, by the same vetter.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import Engine
from sqlmodel import Session

from stackbot.adapters.git import GitError, GitMirror, GitRepository
from stackbot.adapters.own_patch import own_patch, replays_exactly
from stackbot.db import github_store as store
from stackbot.db.engine import session_scope
from stackbot.db.models import Approval, PullRequest
from stackbot.domain.approval_carry import CarryDecision, CarryReason, compare_patches
from stackbot.domain.retarget import RETARGET_MARKER
from stackbot.domain.series import SeriesGraph
from stackbot.domain.types import Sha

log = logging.getLogger(__name__)

CARRYABLE = ("ok_to_test", "carried")
_RETARGETED = re.compile(re.escape(RETARGET_MARKER).replace(r"\{parent\}", r"(\d+)"))


@dataclass(frozen=True)
class CarryOutcome:
    number: int
    approved_sha: str
    head_sha: str
    decision: CarryDecision


def candidates(
    rows: Iterable[PullRequest], approvals: Mapping[int, Sequence[Approval]], numbers: Iterable[int]
) -> dict[int, Approval]:
    """``{PR: the approval to try carrying}`` among ``numbers``: an unapproved head with a
    vetter's approval of an older one (the newest)."""
    by_number = {row.number: row for row in rows}
    found: dict[int, Approval] = {}
    for number in numbers:
        row = by_number.get(number)
        if row is None or not row.head_sha:
            continue
        mine = approvals.get(number, ())
        if any(a.sha == row.head_sha for a in mine):
            continue
        earlier = [a for a in mine if a.kind in CARRYABLE and a.sha != row.head_sha]
        if earlier:
            found[number] = earlier[-1]
    return found


def decide(
    repo: GitRepository,
    *,
    approved_sha: str,
    head_sha: str,
    trusted_tips: Sequence[str],
    earlier_tips: Sequence[str],
) -> CarryDecision:
    """Compare the own patches of the approved head and the new one (both in ``repo``).

    ``trusted_tips``: the default branch's tip and the current heads of the PR's live
    ancestors; ``earlier_tips``: what else may be left out of the approved head only."""
    approved = own_patch(repo, approved_sha, [*trusted_tips, *earlier_tips])
    new = own_patch(repo, head_sha, trusted_tips)
    decision = compare_patches(approved, new)
    if not decision.carry:
        return decision
    for old, now in zip(approved.commits, new.commits, strict=True):
        if not replays_exactly(repo, old.sha, now.sha):
            detail = f"`{now.sha[:7]}` is not `{old.sha[:7]}` cherry-picked onto its parent"
            return CarryDecision(False, CarryReason.PLACEMENT, detail)
    return decision


def carry_approvals(
    engine: Engine,
    mirror: GitMirror,
    *,
    repo_id: int,
    base_sha: str,
    rows: Sequence[PullRequest],
    graph: SeriesGraph,
    numbers: Iterable[int],
) -> list[CarryOutcome]:
    """Try to carry the approvals of ``numbers`` (live PRs whose heads the mirror has); store
    the carried ones. Returns every PR tried, carried or not, with the decision."""
    with Session(engine) as session:
        approvals = store.approvals_of_prs(
            session, repo_id=repo_id, numbers=[row.number for row in rows]
        )
        session.expunge_all()
    tried = candidates(rows, approvals, numbers)
    if not tried:
        return []
    by_number = {row.number: row for row in rows}
    missing = [a.sha for a in tried.values() if mirror.try_rev_parse(a.sha) is None]
    for sha in missing:  # an approved head force-pushed away before it was fetched
        try:
            mirror.fetch([sha])
        except GitError:
            log.info("approved head %s could not be fetched; not carried", sha[:7])
    parents: dict[int, set[int]] = {}
    for edge in graph.edges:
        parents.setdefault(int(edge.child), set()).add(int(edge.parent))
    approved = {n: {a.sha for a in found} for n, found in approvals.items()}
    outcomes = []
    # Ancestors first (shorter stacks), so a parent carried here counts as approved below.
    for number, approval in sorted(
        tried.items(), key=lambda item: (len(graph.stacks.get(item[0], ())), item[0])
    ):
        row = by_number[number]
        ancestors = [n for n in graph.stacks.get(number, [number]) if n != number]
        # Only approved ancestor heads are left out: an unapproved one's commits count as
        # this PR's own, so no later change of the graph can uncover unapproved code.
        trusted = [base_sha] + [
            by_number[n].head_sha
            for n in ancestors
            if n in by_number and by_number[n].head_sha in approved.get(n, set())
        ]
        decision = decide(
            mirror,
            approved_sha=approval.sha,
            head_sha=row.head_sha,
            trusted_tips=trusted,
            earlier_tips=_earlier_tips(mirror, approval.sha, number, by_number, parents),
        )
        outcomes.append(CarryOutcome(number, approval.sha, row.head_sha, decision))
        log.info(
            "approval of #%d at %s for %s: %s %s",
            number,
            approval.sha[:7],
            row.head_sha[:7],
            decision.reason.value,
            decision.detail,
        )
        if decision.carry:
            approved.setdefault(number, set()).add(row.head_sha)
            with session_scope(engine) as session:
                store.add_approval(
                    session,
                    repo_id=repo_id,
                    pr_number=number,
                    sha=row.head_sha,
                    vetter=approval.vetter,
                    kind="carried",
                    comment_id=approval.comment_id,
                    carried_from=approval.sha,
                )
    return outcomes


def _earlier_tips(
    repo: GitRepository,
    approved_sha: str,
    number: int,
    rows: Mapping[int, PullRequest],
    parents: Mapping[int, set[int]],
) -> list[str]:
    """The heads, current and earlier, of every PR this one depends or depended on (graph
    edges of any state, transitively, and the parent a retarget comment names: a squash-merged
    parent leaves the graph but its commits stay in the approved head), less any that hold the
    approved head (a child built on it)."""
    todo = [*parents.get(number, ())]
    row = rows.get(number)
    for comment in row.comments if row is not None else ():
        match = _RETARGETED.match(str(comment.get("body", "")))
        if match:
            todo.append(int(match.group(1)))
    seen: set[int] = {number}
    tips: list[str] = []
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        todo.extend(parents.get(current, ()))
        found = rows.get(current)
        if found is not None:
            tips.extend(s for s in (found.head_sha, *found.head_history) if s)
    present = [t for t in dict.fromkeys(tips) if repo.try_rev_parse(t) is not None]
    return [t for t in present if not repo.is_ancestor(Sha(approved_sha), Sha(t))]
