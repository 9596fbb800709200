"""Per-rank JUnit reports and their merge: a test passes only if it passed on every rank."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gpu_jobs.spec import Counts, Outcome, TestResult, outcome_severity, worst_outcome

MAX_MESSAGE_CHARS = 2000


@dataclass(frozen=True)
class CaseOutcome:
    nodeid: str
    outcome: Outcome
    duration_s: float
    message: str = ""
    markers: frozenset[str] = frozenset()


@dataclass(frozen=True)
class RankReport:
    rank: int
    cases: dict[str, CaseOutcome]


@dataclass(frozen=True)
class MergedTests:
    tests: tuple[TestResult, ...]
    counts: Counts
    failed_ranks: tuple[int, ...]  # ranks where some test failed or errored
    markers: Mapping[str, frozenset[str]] = field(default_factory=dict)  # nodeid -> markers


def junit_path(phase_dir: Path, rank: int) -> Path:
    return phase_dir / "junit" / f"rank-{rank}.xml"


def read_rank_report(path: Path, rank: int) -> RankReport | None:
    """The rank's report, or None when the file is missing or cut short (a crashed rank)."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    cases: dict[str, CaseOutcome] = {}
    for element in root.iter("testcase"):
        case = _case(element)
        previous = cases.get(case.nodeid)
        # pytest writes a test failing in call and in teardown as two entries: keep the worse.
        if previous is None or outcome_severity(case.outcome) > outcome_severity(previous.outcome):
            cases[case.nodeid] = case
    return RankReport(rank, cases)


def _case(element: ET.Element) -> CaseOutcome:
    nodeid = ""
    markers: frozenset[str] = frozenset()
    for prop in element.iter("property"):
        if prop.get("name") == "nodeid":
            nodeid = prop.get("value", "")
        elif prop.get("name") == "markers":
            markers = frozenset(filter(None, prop.get("value", "").split(",")))
    if not nodeid:
        nodeid = _fallback_nodeid(element)
    outcome: Outcome = "passed"
    message = ""
    for tag, meaning in (("skipped", "skipped"), ("error", "error"), ("failure", "failed")):
        child = element.find(tag)
        if child is not None:
            outcome = meaning  # type: ignore[assignment]
            message = (child.get("message") or "") + "\n" + (child.text or "")
    duration = float(element.get("time") or 0.0)
    return CaseOutcome(nodeid, outcome, duration, message.strip()[:MAX_MESSAGE_CHARS], markers)


def _fallback_nodeid(element: ET.Element) -> str:
    # Collection errors have no item, so no nodeid property: name them from classname/name.
    classname, name = element.get("classname", ""), element.get("name", "")
    file = element.get("file")
    if file:
        return f"{file}::{name}"
    return f"{classname}::{name}" if classname else name


def merge_ranks(reports: Mapping[int, RankReport | None], ranks: Iterable[int]) -> MergedTests:
    """Merge reports of ``ranks``; a None report (crashed rank) makes every test 'missing'."""
    ranks = sorted(ranks)
    nodeids: dict[str, None] = {}
    for rank in ranks:
        report = reports.get(rank)
        if report is not None:
            nodeids.update(dict.fromkeys(report.cases))
    tests = tuple(_merge_one(nodeid, reports, ranks) for nodeid in nodeids)
    failed_ranks = sorted(
        rank
        for rank in ranks
        if (report := reports.get(rank)) is not None
        and any(case.outcome in ("failed", "error") for case in report.cases.values())
    )
    counts = Counts.of_tests({t.nodeid: t.outcome for t in tests})
    markers: dict[str, frozenset[str]] = {}
    for rank in ranks:
        report = reports.get(rank)
        for nodeid, case in (report.cases if report is not None else {}).items():
            if case.markers:
                markers[nodeid] = markers.get(nodeid, frozenset()) | case.markers
    return MergedTests(tests, counts, tuple(failed_ranks), markers)


def _merge_one(
    nodeid: str, reports: Mapping[int, RankReport | None], ranks: list[int]
) -> TestResult:
    per_rank: dict[int, str] = {}
    cases: dict[int, CaseOutcome] = {}
    for rank in ranks:
        report = reports.get(rank)
        case = report.cases.get(nodeid) if report is not None else None
        per_rank[rank] = case.outcome if case is not None else "missing"
        if case is not None:
            cases[rank] = case
    # A rank that never reported the test could not judge it: an error there.
    outcome = worst_outcome("error" if o == "missing" else o for o in per_rank.values())
    duration = max((case.duration_s for case in cases.values()), default=0.0)
    return TestResult(nodeid, outcome, duration, per_rank, _message(outcome, per_rank, cases))


def _message(outcome: str, per_rank: dict[int, str], cases: dict[int, CaseOutcome]) -> str:
    if outcome == "passed":
        return ""
    by_outcome: dict[str, list[int]] = {}
    for rank, rank_outcome in per_rank.items():
        by_outcome.setdefault(rank_outcome, []).append(rank)
    summary = "; ".join(f"{name} on ranks {_ranges(r)}" for name, r in sorted(by_outcome.items()))
    explained = sorted(r for r, c in cases.items() if c.outcome == outcome and c.message)
    text = summary
    if explained:
        text += f"\nrank {explained[0]}: {cases[explained[0]].message}"
    return text[:MAX_MESSAGE_CHARS]


def _ranges(ranks: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2, 5'."""
    parts: list[str] = []
    for rank in sorted(ranks):
        if parts and parts[-1].split("-")[-1] == str(rank - 1):
            parts[-1] = f"{parts[-1].split('-')[0]}-{rank}"
        else:
            parts.append(str(rank))
    return ", ".join(parts)


def describe_ranks(ranks: Iterable[int]) -> str:
    return _ranges(list(ranks))
