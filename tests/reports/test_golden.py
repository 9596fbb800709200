"""The sticky comment, the status reply and the check runs, pinned by golden files.

The golden files were reviewed as a PR reader sees them. After a deliberate wording change,
regenerate with ``STACKBOT_UPDATE_GOLDEN=1 python -m pytest tests/reports/test_golden.py`` and
review the diff before committing it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stackbot.domain.report import MARKER, render_status_reply, render_sticky_comment
from stackbot.domain.report_checks import (
    is_own_row,
    ordered_rows,
    render_approval_check,
    render_check_run,
    render_integration_check,
    render_own_files_check,
)
from stackbot.domain.report_view import PrReportView
from tests.reports.cases import CASES

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("STACKBOT_UPDATE_GOLDEN") == "1"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path} is missing; run with STACKBOT_UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(encoding="utf-8"), f"{name} differs from its golden file"


def render_checks(view: PrReportView) -> str:
    blocks = []
    runs = [render_integration_check(view), render_approval_check(view)]
    rows = ordered_rows(view)
    runs += [render_check_run(view, r.test_set, r.shape) for r in rows if not is_own_row(r)]
    own = tuple(row for row in rows if is_own_row(row))
    runs += [render_own_files_check(view, own)] if own else []
    for run in runs:
        if run is None:
            continue
        blocks.append(
            "\n".join(
                [
                    f"## {run.name}",
                    f"status: {run.status}",
                    f"conclusion: {run.conclusion}",
                    f"title: {run.title}",
                    "",
                    "### summary",
                    "",
                    run.summary,
                    "",
                    "### text",
                    "",
                    run.text or "(none)",
                ]
            )
        )
    return "\n\n".join(blocks) + "\n"


@pytest.mark.parametrize("case", sorted(CASES))
def test_sticky_comment(case: str) -> None:
    text = render_sticky_comment(CASES[case]())
    assert text.startswith(MARKER + "\n")
    check_golden(f"{case}.md", text)


@pytest.mark.parametrize(
    "case",
    [
        "approved_clean",
        "series_conflict",
        "regressions_and_job_trouble",
        "retried_after_infra",
        "passes_with_the_series",
    ],
)
def test_check_runs(case: str) -> None:
    check_golden(f"{case}.checks.md", render_checks(CASES[case]()))


def test_status_reply() -> None:
    text = render_status_reply(CASES["waiting_after_push"]())
    assert MARKER not in text  # a status reply must never pass for the sticky comment
    check_golden("status_waiting_after_push.md", text)


def test_rendering_is_a_function_of_the_view() -> None:
    for make in CASES.values():
        assert render_sticky_comment(make()) == render_sticky_comment(make())
