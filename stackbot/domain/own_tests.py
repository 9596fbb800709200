"""A PR's own test files (issue 13): which they are, and how they fared against main, file by
file (seed #8035: "test_schedule_quantization_context.py: 14 vs 5 on main").

The test files a PR adds or modifies under the configured roots run beside the configured test
sets, as the test set ``own:N`` of PR N (one job per shape, its targets the files that run on
that shape), and once more on main for those of them main has. Pure: the service reads the
stored steps and jobs and hands their facts here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

ADDED, MODIFIED = "added", "modified"
_FAILING = frozenset({"failed", "error"})
_RUNNING = {"queued": "queued", "starting": "queued", "submitted": "queued", "running": "running"}
MAX_NAMED = 5  # failing tests named per file before "and N more"


@dataclass(frozen=True)
class OwnFile:
    """One test file a PR adds or modifies, as stored on its integration step."""

    path: str
    status: str  # added | modified (relative to the PR's base)
    on_main: bool  # whether main has the file (a baseline runs it there)

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "status": self.status, "on_main": self.on_main}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> OwnFile:
        return cls(
            str(data.get("path", "")), str(data.get("status", MODIFIED)), bool(data.get("on_main"))
        )


def file_of(nodeid: str) -> str:
    """The test file of a pytest node id (``tests/x/test_y.py::TestZ::test_w[1]``)."""
    return nodeid.split("::", 1)[0]


@dataclass(frozen=True)
class FileCounts:
    passed: int = 0
    failed: int = 0  # failed or error
    skipped: int = 0
    flaky: int = 0
    failing: tuple[str, ...] = ()  # the failing tests' names within the file

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.skipped + self.flaky

    def describe(self) -> str:
        parts = [f"{self.passed} passed"]
        for count, word in ((self.failed, "failed"), (self.flaky, "flaky")):
            if count:
                parts.append(f"{count} {word}")
        if self.skipped:
            parts.append(f"{self.skipped} skipped")
        return ", ".join(parts)


def counts_by_file(outcomes: Mapping[str, str], files: Iterable[str]) -> dict[str, FileCounts]:
    """Per file of ``files``: its tests' outcomes counted (a file with no test in ``outcomes``
    gets zero counts: it was not collected)."""
    tally: dict[str, dict[str, list[str]]] = {path: {} for path in files}
    for nodeid, outcome in sorted(outcomes.items()):
        path = file_of(nodeid)
        if path in tally:
            tally[path].setdefault(outcome, []).append(nodeid)
    counts = {}
    for path, by_outcome in tally.items():
        failing = [n for o in _FAILING for n in by_outcome.get(o, ())]
        counts[path] = FileCounts(
            passed=len(by_outcome.get("passed", ())),
            failed=len(failing),
            skipped=len(by_outcome.get("skipped", ())),
            flaky=len(by_outcome.get("flaky", ())),
            failing=tuple(sorted(n.split("::", 1)[-1] for n in failing)),
        )
    return counts


@dataclass(frozen=True)
class OwnFileView:
    """One own test file of a PR on one shape: its result on the tested tree and on main."""

    path: str
    status: str  # added | modified
    shape: str
    job_status: str  # the tree job's status (queued ... passed | failed | ...)
    here: FileCounts | None = None  # None until the tree job finished with a readable result
    on_main: bool = False
    # main's counts; None while main's job runs or when it has none (main_status says which)
    main: FileCounts | None = None
    main_status: str | None = None  # main's job status; None: main has no job for the file
    error: str | None = None  # the tree job's last error line, when it gave no result

    def line(self) -> str:
        """``tests/unit_tests/x/test_y.py (1x4): 14 passed vs 5 on main``."""
        head = f"`{self.path}` ({self.shape}): "
        if self.job_status in _RUNNING:
            return head + _RUNNING[self.job_status]
        here = self.here
        if here is None or here.total == 0:
            text = f"no tests collected ({self.job_status}"
            return head + text + (f": {self.error})" if self.error else ")")
        text = here.describe()
        if here.failing:
            text += " (" + _names(here.failing) + ")"
        if not self.on_main:
            return head + "new file: " + text
        if self.main is None:
            pending = self.main_status in _RUNNING
            return head + text + (" vs main: not run yet" if pending else " vs main: no result")
        main = self.main
        main_text = str(main.passed) if main.total == main.passed else main.describe()
        return head + f"{text} vs {main_text} on main"


def _names(names: tuple[str, ...]) -> str:
    shown = ", ".join(f"`{n}`" for n in names[:MAX_NAMED])
    rest = len(names) - MAX_NAMED
    return f"failing: {shown}" + (f" and {rest} more" if rest > 0 else "")


@dataclass(frozen=True)
class OwnTestsView:
    """A PR's own test files on the tree tested for it, compared with main."""

    pr: int
    where: str  # "the series #6307 integration", "the stack integration"
    commit: str | None
    main_sha: str | None
    files: tuple[OwnFileView, ...] = ()


def render_own_tests(view: OwnTestsView | None) -> str:
    """The comment's section: one line per file and shape."""
    if view is None or not view.files:
        return ""
    heading = f"**Own test files** of #{view.pr} on {view.where}"
    if view.commit:
        heading += f" `{view.commit[:7]}`"
    if view.main_sha:
        heading += f", compared with main `{view.main_sha[:7]}`"
    return "\n".join([heading, *(f"- {file.line()}" for file in view.files)])
