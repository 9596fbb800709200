"""What a landing says on each of its PRs: one comment per PR, edited in place (its marker), and
the reply to ``/stackbot land``. The words say what lands, in which order, with which method,
what it waits for, and once it ends, what landed, what did not and why."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stackbot.domain.landing import LandingEntry, LandingState

LANDING_MARKER = "<!-- stackbot:landing -->"
_ICON = {"merged": "✅", "not merged": "⛔", "pending": "⏳"}


@dataclass(frozen=True)
class LandingView:
    id: int
    state: LandingState
    entries: tuple[LandingEntry, ...]
    merge_method: str
    requested_by: str
    base_ref: str
    up_to: int | None = None
    waiting_for: str | None = None
    reason: str | None = None
    main_sha: str | None = None
    tested_tree: str | None = None
    landed_tree: str | None = None


def order_text(entries: Sequence[LandingEntry]) -> str:
    return order_text_of([e.number for e in entries])


def order_text_of(numbers: Sequence[int]) -> str:
    return " → ".join(f"#{n}" for n in numbers)


def landing_reply(view: LandingView, left_out: Mapping[int, str] | None = None) -> str:
    """The reply to a vetter's ``/stackbot land`` (``left_out``: open PRs of the series its
    tested tree does not hold, with why: they are not landed and stay open)."""
    what = "the series" if view.up_to is None else f"the series up to #{view.up_to}"
    left = "".join(
        f" #{n} is not landed ({why}, so the tested series tree leaves it out): it stays open."
        for n, why in sorted((left_out or {}).items())
    )
    return (
        f"Queued {what} for landing: {order_text(view.entries)}, bottom-up, each with "
        f"`{view.merge_method}` at its tested head.{left} The landing comment on each PR says "
        "what it waits for; `/stackbot land cancel` takes it out of the queue."
    )


def nothing_to_land_reply(
    number: int, up_to: int | None, left_out: Mapping[int, str] | None = None
) -> str:
    why = (left_out or {}).get(up_to if up_to is not None else number)
    if why is not None:
        target = up_to if up_to is not None else number
        return (
            f"#{target} was left out of the series' tested tree ({why}): nothing queued for "
            "landing. Resolve the conflict, then `/stackbot land` again."
        )
    if up_to is not None:
        return f"#{up_to} is not an open PR of #{number}'s series: nothing queued for landing."
    return f"#{number} is not in a series stackbot has built yet: nothing queued for landing."


def already_landing_reply(view: LandingView) -> str:
    return (
        f"This series is already queued for landing ({order_text(view.entries)}); "
        "`/stackbot land cancel` takes it out first."
    )


def cancel_reply(view: LandingView | None, merged: Sequence[int]) -> str:
    if view is None:
        return "Nothing of this series is queued for landing."
    kept = (
        f" {', '.join(f'#{n}' for n in merged)} merged already and stay merged." if merged else ""
    )
    return f"Landing of {order_text(view.entries)} cancelled; nothing more merges.{kept}"


def _headline(view: LandingView) -> str:
    order = order_text(view.entries)
    if view.state is LandingState.WAITING:
        return f"⏳ **Queued for landing**: {order}. Waiting for {view.waiting_for or 'its turn'}."
    if view.state is LandingState.MERGING:
        return f"🚀 **Landing**: {order}, bottom-up."
    if view.state is LandingState.LANDED:
        return f"✅ **Landed** on `{view.base_ref}`: {order}."
    if view.state is LandingState.CANCELLED:
        return f"⚪ **Landing cancelled** by a vetter: {order}."
    return f"⛔ **Landing stopped**: {view.reason or 'see below'}"


def _line(entry: LandingEntry, base_ref: str) -> str:
    head = f"`{entry.head_sha[:10]}`"
    if entry.state == "merged":
        into = f" as `{entry.merge_sha[:10]}`" if entry.merge_sha else ""
        return f"- {_ICON['merged']} #{entry.number} (tested head {head}) merged into `{base_ref}`{into}"
    note = f": {entry.note}" if entry.note else ""
    if entry.state == "not merged":
        return f"- {_ICON['not merged']} #{entry.number} (tested head {head}) not merged{note}"
    return f"- {_ICON['pending']} #{entry.number} (tested head {head}) to merge{note}"


def landing_comment(view: LandingView) -> str:
    """The landing's comment on each of its PRs (the same text on every one)."""
    lines = [LANDING_MARKER, _headline(view), ""]
    lines += [_line(e, view.base_ref) for e in view.entries]
    lines.append("")
    tested = f" tested tree `{view.tested_tree[:10]}`" if view.tested_tree else ""
    on_main = f" on `{view.base_ref}` at `{view.main_sha[:10]}`" if view.main_sha else ""
    lines.append(
        f"Merge method `{view.merge_method}`; asked by @{view.requested_by}.{tested}{on_main}"
        if tested or on_main
        else f"Merge method `{view.merge_method}`; asked by @{view.requested_by}."
    )
    if view.state is LandingState.STOPPED:
        left = [e.number for e in view.entries if e.state != "merged"]
        if left:
            lines.append(
                f"Still open: {', '.join(f'#{n}' for n in left)}, based on `{view.base_ref}` "
                "where their parent landed. Fix what is named above, then `/stackbot land` again."
            )
    if view.state is LandingState.LANDED and view.landed_tree and view.tested_tree:
        same = (
            "the tree that was tested"
            if view.landed_tree == view.tested_tree
            else "NOT the tested tree"
        )
        lines.append(f"`{view.base_ref}` now holds {same} (`{view.landed_tree[:10]}`).")
    return "\n".join(lines) + "\n"
