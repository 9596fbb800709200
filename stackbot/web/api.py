"""The JSON API under ``/api/``: the dashboard's data, documented in the OpenAPI schema."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from stackbot.web import page_cache, pages, readmodel
from stackbot.web.params import PullNumber, RowId
from stackbot.web.readmodel.landings import landings_page
from stackbot.web.readmodel.nodes import nodes_view
from stackbot.web.readmodel.tasks import last_data_change

router = APIRouter(prefix="/api", tags=["api"])

# What a route that looks one thing up answers when there is no such thing (``pages.or_404``).
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {
        "description": "No such thing: `detail` says what was looked for",
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {"detail": {"type": "string"}},
                    "required": ["detail"],
                }
            }
        },
    }
}


@router.get("/series", summary="Every series with its status")
def api_series(request: Request) -> list[dict[str, Any]]:
    with pages.session(request) as session:
        return [row.to_json() for row in readmodel.list_series(session)]


@router.get(
    "/series/{slug}",
    summary="One series: graph, PRs, latest series run, conflicts",
    response_class=Response,
    responses={**page_cache.JSON_OBJECT, **NOT_FOUND},
)
def api_series_detail(request: Request, slug: str) -> Response:
    return pages.send_series(
        request,
        slug,
        lambda page: page_cache.json_bytes(page.to_json()),
        kind="api/series",
        media_type="application/json",
    )


@router.get(
    "/series/{slug}/gpu",
    summary="GPU-hours of one series: per push, per PR, saved",
    responses=NOT_FOUND,
)
def api_series_gpu(request: Request, slug: str) -> dict[str, Any]:
    """GPU-hours the series' jobs spent by purpose (tree, confirm, bisect, retry), per push
    (``by_push``: each series run with the stack runs made with it), per PR (``by_pr``: its
    stack runs' jobs and its own test files' jobs; ``shared`` is the series tree's other
    jobs), what reused results saved (their sources' GPU-hours) and what the test plan policy
    saved (``saved_by_policy``: the stacks series-first left to the series tree, at the mean
    measured duration of each configuration). A fixed number of aggregate queries, whatever
    the number of PRs or jobs."""
    return pages.series_gpu(request, slug).to_json()


@router.get(
    "/series/{slug}/flaky",
    summary="The tests one series found flaky, across runs",
    responses=NOT_FOUND,
)
def api_series_flaky(request: Request, slug: str) -> dict[str, Any]:
    """Each test that failed on a run's tree and passed on the rerun of the same tree, with
    how many times, and for each time the failing job and the passing rerun (the jobs that
    ran) and the runs that reported it. Three queries, whatever the number of runs."""
    return pages.series_flaky(request, slug).to_json()


@router.get(
    "/pulls/{number}",
    summary="One pull request with its stack, runs and tests",
    response_class=Response,
    responses={**page_cache.JSON_OBJECT, **NOT_FOUND},
)
def api_pull(request: Request, number: PullNumber) -> Response:
    return pages.send_pull(
        request,
        number,
        lambda detail: page_cache.json_bytes(_pull_json(detail)),
        kind="api/pulls",
        media_type="application/json",
    )


def _pull_json(detail: dict[str, Any]) -> dict[str, Any]:
    return {
        "repo": detail["repo"],
        "pull": detail["pull"].to_json(),
        "base_ref": detail["base_ref"],
        "head_ref": detail["head_ref"],
        "parents": [{"number": n, "source": s} for n, s in detail["parents"]],
        "children": [{"number": n, "source": s} for n, s in detail["children"]],
        "dependencies": detail["parent_edges"],
        "runs": [run.to_json() for run in detail["runs"]],
        "series": detail["series"].key if detail["series"] else None,
        # the latest series run's tests when its tree holds this PR (series-first testing)
        "series_tests": [cell.to_json() for cell in detail["series_tests"]],
        "approvals": detail["approvals"],
    }


@router.get(
    "/runs/{run_id}", summary="One integration run with its steps and jobs", responses=NOT_FOUND
)
def api_run(request: Request, run_id: RowId) -> dict[str, Any]:
    with pages.session(request) as session:
        found = readmodel.run_detail(session, run_id)
    summary, steps, tests = pages.or_404(found, f"no integration run {run_id}")
    return {
        **summary.to_json(),
        "steps": [step.to_json() for step in steps],
        "tests": [cell.to_json() for cell in tests],
    }


@router.get("/jobs", summary="Queued, running and finished jobs")
def api_jobs(request: Request) -> dict[str, list[dict[str, Any]]]:
    with pages.session(request) as session:
        groups = readmodel.list_jobs(session)
    return {name: [job.to_json() for job in jobs] for name, jobs in groups.items()}


@router.get(
    "/jobs/{job_id}", summary="One job with its per-test results and log", responses=NOT_FOUND
)
def api_job(request: Request, job_id: RowId) -> dict[str, Any]:
    return pages.job(request, job_id).to_json()


@router.get("/tasks", summary="Task queue counts and dead letters")
def api_tasks(request: Request) -> dict[str, Any]:
    with pages.session(request) as session:
        counts = readmodel.task_counts(session)
    return {"by_status": counts.by_status, "dead": list(counts.dead)}


@router.get(
    "/maintenance",
    summary="Disk use per area as the last maintenance round measured it, and recent rounds",
)
def api_maintenance(request: Request) -> dict[str, Any]:
    with pages.session(request) as session:
        view = readmodel.maintenance_view(session, pages.maintenance_settings(request))
    return view.to_json()


@router.get(
    "/nodes",
    summary="Nodes excluded from job submissions for repeated infra failures, with the evidence",
)
def api_nodes(request: Request) -> dict[str, Any]:
    """``excluded``: each node with the infra jobs in a row that excluded it (job, time,
    signature, line) and its node checks since; ``readmitted``: nodes back in, and how."""
    with pages.session(request) as session:
        view = nodes_view(session, settings=pages.settings(request))
    return view.to_json()


@router.get(
    "/landing",
    summary="The landing gate per repository, and the landings that finished last",
)
def api_landing(request: Request) -> dict[str, Any]:
    """Per repository: ``queue``, the active landings in the order they land (``position`` 0
    lands next), each with ``state`` (merging, blocked, testing, speculative, failed-ahead,
    turn), ``on_top_of`` (the landings ahead it is tested speculatively on top of),
    ``waiting_for`` and ``queued_at``; ``finished``, the last landed, stopped or cancelled
    landings with ``land_to_finished_s`` (from ``/stackbot land`` to landed or stopped) and
    for a stopped one its ``cause`` (as ``/metrics`` counts it)."""
    with pages.session(request) as session:
        return landings_page(session, settings=pages.settings(request)).to_json()


@router.get("/changes", summary="A token that changes whenever the dashboard's data changes")
def api_changes(request: Request) -> dict[str, str | None]:
    """``token`` changes with anything shown; ``changed_at`` is when data last changed."""
    with pages.session(request) as session:
        return {
            "token": readmodel.change_token(session),
            "changed_at": last_data_change(session),
        }
