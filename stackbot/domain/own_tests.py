"""A PR's own test files (issue 13): which they are, and how they fared against main, file by
file (seed #8035: "test_schedule_quantization_context.py: 14 vs 5 on main").

The test files a PR adds or modifies under the configured roots run beside the configured test
sets. A tested tree runs the own files of every PR it holds in as few jobs as their shapes
require: one job per shape, the test set ``own``, its targets the files of every PR that run on
that shape (issue 24). Each PR's results are split out of it by file (a test's node id starts
with its file's path; :func:`restrict_outcomes`) and shown under the name users know, ``own:N``.
They run once more on main for the files main has. Pure: the service reads the stored steps and
jobs and hands their facts here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from stackbot.domain.comparison import Counts, TestOutcomes

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


def owners_of(files_by_pr: Mapping[int, Sequence[str]]) -> dict[str, tuple[int, ...]]:
    """Each own test file → the PRs whose own file it is (usually one; a child that modifies
    its parent's new test file owns it too), lowest PR number first."""
    owners: dict[str, list[int]] = {}
    for pr, paths in sorted(files_by_pr.items()):
        for path in paths:
            if pr not in owners.setdefault(path, []):
                owners[path].append(pr)
    return {path: tuple(prs) for path, prs in owners.items()}


def restrict_outcomes(outcomes: TestOutcomes, files: Iterable[str]) -> TestOutcomes:
    """The part of a batched own-files job's outcomes that tests ``files``: its tests whose node
    id is in one of them, counted again. A job that passed or failed takes the status its part
    earns (another PR's failing file does not fail this one's); any other status (error,
    timeout, infra, cancelled, still running) is the whole job's and stays. Outcomes recorded
    only as counts cannot be split: they stay whole."""
    if not outcomes.per_test:
        return outcomes
    wanted = set(files)
    tests = {nodeid: o for nodeid, o in outcomes.tests.items() if file_of(nodeid) in wanted}
    counts = Counts.of_tests(tests)
    status = outcomes.status
    if status in ("passed", "failed"):
        status = "failed" if counts.failed or counts.error else "passed"
    return TestOutcomes(status, counts, tests, per_test=True)


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
