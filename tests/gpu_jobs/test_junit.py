"""Merging per-rank JUnit files: a test passes only if it passed on every rank."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from gpu_jobs.junit import RankReport, describe_ranks, merge_ranks, read_rank_report
from gpu_jobs.launch import rank_failures, root_cause_rank


def junit(*cases: str) -> str:
    return (
        '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">'
        + "".join(cases)
        + "</testsuite></testsuites>"
    )


def case(nodeid: str, inner: str = "", time: str = "0.5") -> str:
    prop = f'<properties><property name="nodeid" value="{nodeid}" /></properties>'
    return f'<testcase classname="c" name="n" time="{time}">{prop}{inner}</testcase>'


FAIL = '<failure message="assert 1 == 2">trace</failure>'
ERROR = '<error message="fixture broke">trace</error>'
SKIP = '<skipped message="needs 8 ranks" />'


def reports(tmp_path: Path, per_rank: Mapping[int, str | None]) -> dict[int, RankReport | None]:
    found: dict[int, RankReport | None] = {}
    for rank, text in per_rank.items():
        path = tmp_path / f"rank-{rank}.xml"
        if text is not None:
            path.write_text(text)
        found[rank] = read_rank_report(path, rank)
    return found


def test_passed_everywhere_is_passed_and_a_failure_on_one_rank_fails(tmp_path: Path) -> None:
    per_rank = {
        r: junit(case("t.py::a"), case("t.py::b", FAIL if r == 2 else "")) for r in range(4)
    }
    merged = merge_ranks(reports(tmp_path, per_rank), range(4))
    outcomes = {t.nodeid: t.outcome for t in merged.tests}
    assert outcomes == {"t.py::a": "passed", "t.py::b": "failed"}
    assert merged.failed_ranks == (2,)
    (b,) = [t for t in merged.tests if t.nodeid == "t.py::b"]
    assert b.ranks == {0: "passed", 1: "passed", 2: "failed", 3: "passed"}
    assert "failed on ranks 2" in b.message and "assert 1 == 2" in b.message
    assert (merged.counts.passed, merged.counts.failed) == (1, 1)


def test_a_rank_without_a_report_makes_its_tests_errors(tmp_path: Path) -> None:
    per_rank = {0: junit(case("t.py::a")), 1: None, 2: junit(case("t.py::a"), "<testcase")}
    merged = merge_ranks(reports(tmp_path, per_rank), range(3))
    (a,) = merged.tests
    assert a.outcome == "error"
    assert a.ranks == {0: "passed", 1: "missing", 2: "missing"}


def test_skips_errors_and_the_worse_of_two_entries(tmp_path: Path) -> None:
    per_rank = {
        0: junit(case("t.py::s", SKIP), case("t.py::m"), case("t.py::e", ERROR), case("t.py::x")),
        1: junit(
            case("t.py::s", SKIP),
            case("t.py::m", SKIP),
            case("t.py::e"),
            case("t.py::x", FAIL),
            case("t.py::x", ERROR),
        ),
    }
    merged = merge_ranks(reports(tmp_path, per_rank), range(2))
    outcomes = {t.nodeid: t.outcome for t in merged.tests}
    # Passed on one rank and skipped on the other did not pass on every rank.
    assert outcomes == {
        "t.py::s": "skipped",
        "t.py::m": "skipped",
        "t.py::e": "error",
        "t.py::x": "failed",
    }
    assert merged.failed_ranks == (0, 1)


def test_collection_errors_without_a_nodeid_get_a_name(tmp_path: Path) -> None:
    text = junit(
        '<testcase classname="tests.unit" name="test_x" time="0"><error message="collection failure" /></testcase>'
    )
    report = reports(tmp_path, {0: text})[0]
    assert report is not None
    assert list(report.cases) == ["tests.unit::test_x"]


def test_rank_ranges_read_well() -> None:
    assert describe_ranks([5, 0, 1, 2, 7]) == "0-2, 5, 7"
    assert describe_ranks([]) == ""


TORCHRUN_SUMMARY = """
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
-m pytest FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-12-02_13:45:35
  host      : localhost
  rank      : 5 (local_rank: 1)
  exitcode  : -15 (pid: 25708)  (SIGTERM)
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-02_13:45:34
  host      : localhost
  rank      : 6 (local_rank: 2)
  exitcode  : 3 (pid: 25709)
============================================================
"""


def test_torchrun_failure_summaries_give_exit_codes_per_rank() -> None:
    assert rank_failures("noise rank : 1 (local_rank: 1)\n exitcode : 9" + TORCHRUN_SUMMARY) == {
        5: -15,
        6: 3,
    }


def test_the_root_cause_is_the_first_observed_failure_not_the_ranks_stopped_after_it() -> None:
    # Rank 5 is listed first, with SIGTERM: torchrun stopped it after rank 6 failed.
    assert root_cause_rank("noise rank : 1 (local_rank: 1)\n exitcode : 9" + TORCHRUN_SUMMARY) == 6
    assert root_cause_rank("torchrun ended without a summary\n") is None
