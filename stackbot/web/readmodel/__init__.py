"""What the dashboard and the JSON API show, read from the database in a few queries.

Every page is built from one of these functions; the HTML templates and the ``/api/`` routes
render the same dataclasses, so the two never disagree. One module per page; the queries are
:mod:`stackbot.db.dashboard_store`'s, batched per page (no query per row) so a 60-PR series with
hundreds of jobs stays fast.
"""

from stackbot.domain.retention import human_bytes
from stackbot.web.readmodel.accounting import (
    SeriesFlakyPage,
    SeriesGpuPage,
    series_flaky_page,
    series_gpu_page,
)
from stackbot.web.readmodel.jobs import JobDetail, job_detail, list_jobs
from stackbot.web.readmodel.maintenance import MaintenanceView, maintenance_view
from stackbot.web.readmodel.pulls import PullRow, pull_detail, pull_rows
from stackbot.web.readmodel.runs import FindingRow, run_detail, run_findings, run_steps
from stackbot.web.readmodel.series import (
    SeriesListRow,
    SeriesPage,
    key_from_slug,
    list_series,
    series_page,
    series_slug,
)
from stackbot.web.readmodel.summaries import (
    FINISHED_JOB_STATES,
    JobSummary,
    RunSummary,
    StepRow,
    TestCell,
    job_summary,
)
from stackbot.web.readmodel.tasks import TaskCounts, change_token, task_counts

__all__ = [
    "FINISHED_JOB_STATES",
    "FindingRow",
    "JobDetail",
    "JobSummary",
    "MaintenanceView",
    "PullRow",
    "RunSummary",
    "SeriesFlakyPage",
    "SeriesGpuPage",
    "SeriesListRow",
    "SeriesPage",
    "StepRow",
    "TaskCounts",
    "TestCell",
    "change_token",
    "human_bytes",
    "job_detail",
    "job_summary",
    "key_from_slug",
    "list_jobs",
    "list_series",
    "maintenance_view",
    "pull_detail",
    "pull_rows",
    "run_detail",
    "run_findings",
    "run_steps",
    "series_flaky_page",
    "series_gpu_page",
    "series_page",
    "series_slug",
    "task_counts",
]
