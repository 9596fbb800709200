"""Landing a series: which PRs land, in which order, what they wait for, and why one cannot.

A landing (``/stackbot land`` or ``/stackbot land #N``) lands the open PRs of a series in series
order, or its prefix up to and including #N, bottom-up. Before anything merges:

- the tree main will have after the last PR must be a tree stackbot tested on the current main
  (:class:`TreeEvidence`, asked of :mod:`stackbot.services.landing_evidence`): while it is being
  integrated or tested the landing waits; when it failed the landing stops;
- each PR must still have the head that was tested, and satisfy the base branch's protection
  (required checks passed, enough approving reviews by people with write access): a PR that
  lacks one is ``blocked: needs …`` and nothing merges (so a landing never half-lands because a
  later PR lacks a review).

Then each PR, bottom first: its children are retargeted onto main (GitHub closes a PR whose base
branch is deleted), then it is merged naming the tested head SHA, with the repository's merge
method. When main moved under it half-way (not by its own merges), the landing waits again: the
rest must be tested on the new main before it merges. When GitHub refuses one (a new push: 409; a check or review missing, a conflict: 405),
the landing stops there: what merged stays merged, the rest stays open and based on main (their
parent landed, so they were retargeted), and every PR of the landing says so.

Landings of one repository form a gate (:func:`gate_place`, Zuul's dependent pipeline): the
head is tested on main, each landing behind it (``window`` at once) on main + the non-failing
landings ahead + its own PRs, in parallel; only the head merges; a landing whose tree failed is
left out of the trees behind it and stopped once nothing is ahead of it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Literal

from stackbot.domain.records import MergeRules, ReviewRecord

QUEUE_MODE = "queue"  # settings.landing.merge_method(s): land through GitHub's merge queue


class LandingState(StrEnum):
    WAITING = "waiting"  # for its tree to be integrated and tested on the current main
    MERGING = "merging"
    LANDED = "landed"
    STOPPED = "stopped"
    CANCELLED = "cancelled"

    @property
    def active(self) -> bool:
        return self in (LandingState.WAITING, LandingState.MERGING)


EntryState = Literal["pending", "merged", "not merged"]


@dataclass(frozen=True)
class LandingEntry:
    """One PR of a landing: the head that was tested and what happened to it."""

    number: int
    head_sha: str
    state: EntryState = "pending"
    merge_sha: str | None = None
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "head_sha": self.head_sha,
            "state": self.state,
            "merge_sha": self.merge_sha,
            "note": self.note,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LandingEntry:
        state = data.get("state", "pending")
        return cls(
            number=int(data["number"]),
            head_sha=str(data.get("head_sha", "")),
            state=state if state in ("pending", "merged", "not merged") else "pending",
            merge_sha=data.get("merge_sha"),
            note=data.get("note"),
        )


@dataclass(frozen=True)
class TreeEvidence:
    """Whether the tree a landing would leave on main was tested green on that main:
    ``green`` (every test set and own-test job passed or failed only as main does), ``testing``
    (integrating or jobs running), ``failed`` (a new failure, a conflict, an error) or
    ``untested`` (no run of these heads on this main yet)."""

    state: Literal["green", "testing", "failed", "untested"]
    run_id: int | None = None
    tree: str | None = None
    detail: str = ""


def landing_order(
    order: Sequence[int],
    open_prs: Iterable[int],
    up_to: int | None,
    left_out: Iterable[int] = (),
) -> list[int]:
    """The PRs a landing takes, bottom first: the series' open PRs in series order, up to and
    including ``up_to`` (all of them without it). Empty when ``up_to`` is not one of them.

    ``left_out``: the PRs the series' integration left out of its tree (a conflict, or a parent
    left out). The tree a landing leaves on main must be a tested one, and the series tree that
    was tested does not hold them: they are not landed, they stay open (a conflicting sibling
    such as #8050 does not hold back the series it conflicts with)."""
    still_open = set(open_prs) - set(left_out)
    numbers = [n for n in order if n in still_open]
    if up_to is None:
        return numbers
    if up_to not in numbers:
        return []
    return numbers[: numbers.index(up_to) + 1]


def approvers(
    reviews: Sequence[ReviewRecord], *, author: str, head_sha: str, rules: MergeRules
) -> set[str]:
    """Who approves the PR now: each reviewer's newest decisive review is an approval (on the
    current head when stale approvals are dismissed); the author never counts."""
    newest: dict[str, str] = {}
    for review in reviews:
        if review.state == "COMMENTED":
            continue
        stale = rules.dismiss_stale_reviews and review.commit_id != head_sha
        newest[review.author] = "STALE" if stale else review.state
    return {login for login, state in newest.items() if state == "APPROVED" and login != author}


def blockers(*, rules: MergeRules, approving_writers: int, checks: Mapping[str, str]) -> list[str]:
    """What the base branch's protection still needs of one PR, as ``needs …`` phrases."""
    needs: list[str] = []
    for name in rules.required_checks:
        outcome = checks.get(name)
        if outcome is None:
            needs.append(f"the required check `{name}` (not reported on this head)")
        elif outcome == "pending":
            needs.append(f"the required check `{name}` to finish")
        elif outcome not in ("success", "neutral", "skipped"):
            needs.append(f"the required check `{name}` to pass (it is `{outcome}`)")
    if approving_writers < rules.approvals:
        missing = rules.approvals - approving_writers
        noun = "approving review" if missing == 1 else "approving reviews"
        needs.append(f"{missing} more {noun} by someone with write access")
    return needs


def refusal_note(status: int | None, message: str) -> str:
    """Why GitHub would not merge a PR, for the account on every PR of the landing."""
    text = " ".join(message.split())
    if status == 409:
        return "a new push: its head is no longer the tested one; land again once it is tested"
    lowered = text.lower()
    if "approving review" in lowered or "status check" in lowered:
        return f"blocked: needs what branch protection asks: {text}"
    return f"GitHub refused the merge ({status}): {text}"


def mark(entries: Sequence[LandingEntry], number: int, **changes: Any) -> list[LandingEntry]:
    """``entries`` with PR ``number``'s entry changed."""
    return [replace(e, **changes) if e.number == number else e for e in entries]


def stopped_at(entries: Sequence[LandingEntry], number: int, note: str) -> list[LandingEntry]:
    """A landing's entries once PR ``number`` did not merge (``note`` says why): what merged
    stays merged, the rest is "not merged", those after it "not reached"."""
    return [
        e
        if e.state == "merged"
        else LandingEntry(
            e.number,
            e.head_sha,
            "not merged",
            None,
            note if e.number == number else f"not reached: #{number} did not merge",
        )
        for e in entries
    ]


STOP_CAUSES = ("new push", "blocked", "refused", "untested", "closed", "other")


def stop_cause(reason: str | None) -> str:
    """The cause of a stopped landing, for ``/metrics``, read from the reason it was given."""
    text = reason or ""
    if "a new push" in text:
        return "new push"
    if "blocked: needs" in text:
        return "blocked"
    if "GitHub refused" in text:
        return "refused"
    if "not tested green" in text:
        return "untested"
    if "outside the landing" in text:
        return "closed"
    return "other"


# -- the gate: landings of one repository queue like Zuul's dependent pipeline -----------------

EvidenceState = Literal["green", "testing", "failed", "untested"]


@dataclass(frozen=True)
class QueueItem:
    """One active landing in its repository's queue (oldest first): the PRs it still has to
    merge, bottom first, and whether it is merging now."""

    landing_id: int
    prs: tuple[int, ...]
    merging: bool = False


@dataclass(frozen=True)
class GatePlace:
    """Where a landing stands in the gate, and the tree it is tested on.

    ``ahead`` are the landings ahead of it that it is tested on top of (the nearest non-failing
    ones, oldest first); ``failing_ahead`` those ahead whose own speculative tree failed: it is
    tested without them (they are taken out once everything ahead of them is done).
    ``prs`` is its speculative tree: the PRs of ``ahead`` then its own, merged on main in that
    order. ``in_window``: whether it is near enough the head to be tested now."""

    position: int
    ahead: tuple[int, ...]
    failing_ahead: tuple[int, ...]
    prs: tuple[int, ...]
    in_window: bool
    merging_ahead: int | None = None  # a landing ahead that is merging now: wait for it

    @property
    def at_head(self) -> bool:
        """Nothing is ahead of it any more: it may merge once its own tree is green."""
        return not self.ahead and not self.failing_ahead and self.merging_ahead is None


def gate_place(
    queue: Sequence[QueueItem],
    landing_id: int,
    *,
    window: int,
    judge: Callable[[tuple[int, ...]], EvidenceState],
) -> GatePlace:
    """The place of ``landing_id`` in ``queue`` (the repository's active landings, oldest
    first), as Zuul's dependent pipeline sees it: each item is tested on main + the non-failing
    items ahead of it + itself; an item whose tree failed (``judge`` of the PRs of its tree, in
    merge order) is left out of the trees behind it. ``judge`` is asked only of the items
    ahead, in order, so a failure far ahead changes every tree behind it."""
    stacked: list[int] = []
    ahead: list[int] = []
    failing: list[int] = []
    merging: int | None = None
    for item in queue:
        if item.landing_id == landing_id:
            position = len(ahead)
            return GatePlace(
                position=position,
                ahead=tuple(ahead),
                failing_ahead=tuple(failing),
                prs=(*stacked, *item.prs),
                in_window=position < max(1, window),
                merging_ahead=merging,
            )
        if item.merging:
            merging = item.landing_id  # its merges move main: nothing behind it is judged now
            ahead.append(item.landing_id)
            stacked.extend(item.prs)
            continue
        if len(ahead) < max(1, window) and judge((*stacked, *item.prs)) == "failed":
            failing.append(item.landing_id)
            continue
        ahead.append(item.landing_id)
        stacked.extend(item.prs)
    raise ValueError(f"landing {landing_id} is not in the queue")
