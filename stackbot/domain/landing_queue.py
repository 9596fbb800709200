"""What the dashboard's landing page says of each landing: where it stands in its repository's
gate (merging, blocked, tested speculatively on top of the landings ahead, waiting for tests or
for its turn) and, once finished, how long it took from ``/stackbot land``.

Read from what the ``land`` task writes on the landing (its state, what it waits for) and its
place in the queue; nothing here asks GitHub or judges a tree again."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from stackbot.domain.landing import LandingEntry, LandingState, stop_cause
from stackbot.domain.landing_text import order_text_of


@dataclass(frozen=True)
class Ahead:
    """A landing ahead of another in the gate: its id and the PRs it still has to merge."""

    landing_id: int
    prs: tuple[int, ...]


@dataclass(frozen=True)
class GateStatus:
    """``kind``: merging | blocked | failed-ahead | speculative | testing | turn; ``pill``: the
    dashboard's state colour; ``words``: one line a person reads."""

    kind: str
    pill: str
    words: str


def _plain(text: str | None) -> str:
    return (text or "").replace("`", "")


def gate_status(
    state: LandingState,
    entries: Sequence[LandingEntry],
    waiting_for: str | None,
    ahead: Sequence[Ahead],
) -> GateStatus:
    """Where an active landing stands, from its state, what the ``land`` task last wrote it
    waits for, and the active landings ahead of it in its repository's queue."""
    if state is LandingState.MERGING:
        merged = sum(1 for e in entries if e.state == "merged")
        return GateStatus("merging", "running", f"bottom-up: {merged} of {len(entries)} merged")
    text = _plain(waiting_for)
    if "is blocked: needs" in text:
        return GateStatus(
            "blocked", "conflict", "blocked: " + text.replace(" is blocked: needs", " needs")
        )
    on_top = "; ".join(f"landing {a.landing_id} ({order_text_of(a.prs)})" for a in ahead)
    if "its turn in the gate" in text or "to finish merging" in text:
        return GateStatus("turn", "pending", f"waiting for its turn behind {on_top}")
    if not ahead:
        return GateStatus("testing", "queued", "waiting for its tree's tests on main")
    if "failed on top of them" in text:
        return GateStatus(
            "failed-ahead",
            "failed",
            f"its tree failed on top of {on_top}: re-tested without any of them that fails",
        )
    if "passed" in text:
        return GateStatus(
            "speculative", "passed", f"tested speculatively on top of {on_top}: passed"
        )
    return GateStatus("speculative", "queued", f"tested speculatively on top of {on_top}")


def finished_words(state: LandingState, reason: str | None) -> tuple[str, str, str | None]:
    """(pill, words, cause) of a finished landing; ``cause`` as ``/metrics`` names it (stopped
    landings only)."""
    if state is LandingState.LANDED:
        return "merged", "every PR merged at its tested head", None
    if state is LandingState.CANCELLED:
        return "closed", "cancelled by a vetter", None
    return "conflict", _plain(reason) or "no reason given", stop_cause(reason)


def duration_words(seconds: float | None) -> str:
    """``42 s``, ``14 min``, ``2 h 05 min``, ``3 d 4 h``; a dash for none."""
    if seconds is None:
        return "—"
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes = whole // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes:02d} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"
