"""What a verdict is and how it looks: its kinds, their words, icons and colours, and the state
of one test row in the same words. :mod:`stackbot.domain.verdict` decides which one a PR gets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from stackbot.domain.report_view import TestRow


class VerdictKind(StrEnum):
    READY = "ready"
    # Passes, but only as part of a larger tree (the series'): its own tree was not tested.
    WITH_SERIES = "passes with the series"
    NO_REGRESSIONS = "no regressions"
    NEEDS_APPROVAL = "needs approval"
    TESTING = "testing"
    CONFLICT = "conflict"
    NEW_FAILURES = "new failures"
    BLOCKED = "blocked"
    ERROR = "error"
    CLOSED = "closed"

    @property
    def slug(self) -> str:
        """The CSS/JSON form: ``no-regressions``."""
        return self.value.replace(" ", "-")


Tone = Literal["ok", "warn", "bad", "wait", "run", "off"]

# One colour scheme everywhere: the dashboard's CSS classes are ``tone-<tone>``.
TONE: dict[VerdictKind, Tone] = {
    VerdictKind.READY: "ok",
    VerdictKind.WITH_SERIES: "ok",
    VerdictKind.NO_REGRESSIONS: "warn",
    VerdictKind.NEEDS_APPROVAL: "wait",
    VerdictKind.TESTING: "run",
    VerdictKind.CONFLICT: "bad",
    VerdictKind.NEW_FAILURES: "bad",
    VerdictKind.BLOCKED: "warn",
    VerdictKind.ERROR: "bad",
    VerdictKind.CLOSED: "off",
}
ICON: dict[VerdictKind, str] = {
    VerdictKind.READY: "✅",
    VerdictKind.WITH_SERIES: "☑️",
    VerdictKind.NO_REGRESSIONS: "🟡",
    VerdictKind.NEEDS_APPROVAL: "✋",
    VerdictKind.TESTING: "⏳",
    VerdictKind.CONFLICT: "❌",
    VerdictKind.NEW_FAILURES: "❌",
    VerdictKind.BLOCKED: "🚧",
    VerdictKind.ERROR: "⚠️",
    VerdictKind.CLOSED: "⚪",
}

_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_RUNNING = frozenset({"queued", "starting", "submitted", "running"})
_JOB_TROUBLE = frozenset({"error", "timeout", "infra", "cancelled"})


@dataclass(frozen=True)
class Verdict:
    kind: VerdictKind
    summary: str  # what is true, in one phrase (Markdown code spans allowed)
    action: str  # what to do next, with the exact command or the PR and file to fix
    conflicts_with: tuple[int, ...] = ()
    paths: tuple[str, ...] = ()
    failing: tuple[str, ...] = ()  # node ids of the new failures
    blocked_by: int | None = None
    url: str | None = None  # where to look (a job's log, a run)

    @property
    def label(self) -> str:
        """The verdict's name as shown: ``blocked by #8034``."""
        if self.kind is VerdictKind.BLOCKED and self.blocked_by is not None:
            return f"blocked by #{self.blocked_by}"
        return self.kind.value

    @property
    def tone(self) -> Tone:
        return TONE[self.kind]

    @property
    def icon(self) -> str:
        return ICON[self.kind]

    def markdown(self) -> str:
        """The first line of a comment or a check-run summary."""
        return f"{self.icon} **{self.label}**{self._sep}{self.summary} — {self.action}"

    @property
    def _sep(self) -> str:
        # "conflict with #8035 …" reads as one phrase; the other verdicts take a colon.
        return " " if self.kind is VerdictKind.CONFLICT else ": "

    def text(self) -> str:
        """The same line without Markdown (a check-run title, a commit status)."""
        line = f"{self.label}{self._sep}{self.summary} — {self.action}".replace("`", "")
        return _LINK.sub(r"\1", line)  # "[log](url)" reads "log" where Markdown is not shown

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind.slug,
            "label": self.label,
            "tone": self.tone,
            "summary": self.summary,
            "action": self.action,
            "line": self.text(),
            "conflicts_with": list(self.conflicts_with),
            "paths": list(self.paths),
            "failing": list(self.failing),
            "blocked_by": self.blocked_by,
            "url": self.url,
        }


# -- per test row -------------------------------------------------------------------------------

# A job's ``error_of`` when its targets ran on fewer ranks than they need (gpu_jobs.conventions):
# the configuration is wrong, not the tree; the row is "not judged", neutral in the verdict.
NOT_JUDGED_ERROR = "configuration"
RowState = Literal[
    "passed", "no-regressions", "new-failures", "running", "job-trouble", "not-judged"
]
ROW_TONE: dict[RowState, Tone] = {
    "passed": "ok",
    "no-regressions": "warn",
    "new-failures": "bad",
    "running": "run",
    "job-trouble": "bad",
    "not-judged": "off",
}
ROW_ICON: dict[RowState, str] = {
    "passed": "✅",
    "no-regressions": "🟡",
    "new-failures": "❌",
    "running": "⏳",
    "job-trouble": "⚠️",
    "not-judged": "⚪",
}


def row_state(row: TestRow) -> RowState:
    """One test set × shape, in the verdict's words."""
    if row.status in _RUNNING:
        return "running"
    if row.status == "error" and row.error_of == NOT_JUDGED_ERROR:
        return "not-judged"  # run on fewer ranks than its tests need: says nothing of the tree
    comparison = row.comparison
    if comparison is not None and comparison.regressed:
        return "new-failures"
    if row.status in _JOB_TROUBLE or comparison is None:
        return "job-trouble"
    if comparison.failures == 0:
        return "passed"
    return "no-regressions"
