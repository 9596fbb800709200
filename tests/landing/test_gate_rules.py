"""The gate's pure rule (:func:`stackbot.domain.landing.gate_place`): each landing of a
repository is tested on main + the non-failing landings ahead of it + itself; a landing whose
tree failed is left out of the trees behind it; only the head merges; a window bounds how many
are tested at once."""

from __future__ import annotations

import pytest

from stackbot.domain.landing import EvidenceState, QueueItem, gate_place

X, Y, Z, W = (
    QueueItem(1, (11, 12)),
    QueueItem(2, (21,)),
    QueueItem(3, (31, 32)),
    QueueItem(4, (41,)),
)


def _judge(failed: set[tuple[int, ...]]):  # type: ignore[no-untyped-def]
    asked: list[tuple[int, ...]] = []

    def judge(prs: tuple[int, ...]) -> EvidenceState:
        asked.append(prs)
        return "failed" if prs in failed else "testing"

    return judge, asked


def test_the_head_is_tested_alone_and_each_one_behind_on_top_of_those_ahead() -> None:
    judge, asked = _judge(set())
    head = gate_place([X, Y, Z], 1, window=3, judge=judge)
    assert head.at_head and head.prs == (11, 12) and head.position == 0
    assert asked == []  # nothing ahead to judge
    third = gate_place([X, Y, Z], 3, window=3, judge=judge)
    assert third.prs == (11, 12, 21, 31, 32)
    assert third.ahead == (1, 2) and third.position == 2 and third.in_window
    assert not third.at_head
    assert asked == [(11, 12), (11, 12, 21)]  # each item ahead judged on its own tree


def test_a_failing_landing_ahead_is_left_out_of_the_trees_behind_it() -> None:
    judge, _ = _judge({(11, 12, 21)})  # Y failed on top of X
    third = gate_place([X, Y, Z], 3, window=3, judge=judge)
    assert third.prs == (11, 12, 31, 32)  # re-tested without Y
    assert third.ahead == (1,) and third.failing_ahead == (2,)
    assert third.position == 1 and not third.at_head  # it still lands only after X (and Y out)


def test_when_the_head_fails_the_next_is_tested_on_main_but_waits_for_it_to_go() -> None:
    judge, _ = _judge({(11, 12)})
    second = gate_place([X, Y], 2, window=3, judge=judge)
    assert second.prs == (21,) and second.ahead == () and second.failing_ahead == (1,)
    assert not second.at_head  # the failing head is taken out first (its own land task)


def test_the_window_bounds_what_is_tested_at_once() -> None:
    judge, _ = _judge(set())
    fourth = gate_place([X, Y, Z, W], 4, window=3, judge=judge)
    assert fourth.position == 3 and not fourth.in_window
    assert gate_place([X, Y], 2, window=1, judge=judge).in_window is False  # series policy
    assert gate_place([X, Y], 1, window=1, judge=judge).in_window


def test_a_merging_landing_ahead_holds_the_ones_behind() -> None:
    judge, asked = _judge(set())
    merging = QueueItem(1, (12,), merging=True)  # #11 merged already
    place = gate_place([merging, Y], 2, window=3, judge=judge)
    assert place.merging_ahead == 1 and place.prs == (12, 21) and not place.at_head
    assert asked == []  # a merging landing is not judged: its tree passed


def test_a_landing_not_in_the_queue_is_an_error() -> None:
    judge, _ = _judge(set())
    with pytest.raises(ValueError, match="landing 9 is not in the queue"):
        gate_place([X], 9, window=3, judge=judge)
