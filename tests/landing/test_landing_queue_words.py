"""What the landing page says of each active landing, from what the ``land`` task wrote it waits
for and the landings ahead of it (stackbot/domain/landing_queue.py)."""

from __future__ import annotations

from stackbot.domain.landing import LandingEntry, LandingState
from stackbot.domain.landing_queue import Ahead, duration_words, finished_words, gate_status

ENTRIES = (LandingEntry(1, "a" * 40), LandingEntry(2, "b" * 40))
AHEAD = (Ahead(7, (10, 11)),)


def test_each_place_in_the_gate_has_its_words() -> None:
    blocked = gate_status(
        LandingState.WAITING,
        ENTRIES,
        "#2 is blocked: needs 1 more approving review by someone with write access",
        (),
    )
    assert (blocked.kind, blocked.words) == (
        "blocked",
        "blocked: #2 needs 1 more approving review by someone with write access",
    )
    head = gate_status(LandingState.WAITING, ENTRIES, "the tree to land to be tested on `main`", ())
    assert (head.kind, head.words) == ("testing", "waiting for its tree's tests on main")
    turn = gate_status(
        LandingState.WAITING, ENTRIES, "its turn in the gate: 3 landing(s) ahead (#10), 3", AHEAD
    )
    assert turn.kind == "turn" and turn.words == "waiting for its turn behind landing 7 (#10 → #11)"
    failed = gate_status(
        LandingState.WAITING,
        ENTRIES,
        "the landings ahead of it (#10 → #11): its tree failed on top of them (test_x)",
        AHEAD,
    )
    assert failed.kind == "failed-ahead" and "failed on top of landing 7" in failed.words
    merging = gate_status(
        LandingState.MERGING, (LandingEntry(1, "a", "merged"), ENTRIES[1]), None, ()
    )
    assert merging.words == "bottom-up: 1 of 2 merged"


def test_finished_landings_and_durations() -> None:
    assert finished_words(LandingState.STOPPED, "#2 did not merge: a new push")[2] == "new push"
    assert finished_words(LandingState.LANDED, None)[2] is None
    assert [duration_words(s) for s in (None, 42, 14 * 60, 125 * 60, 76 * 3600)] == [
        "—",
        "42 s",
        "14 min",
        "2 h 05 min",
        "3 d 4 h",
    ]
