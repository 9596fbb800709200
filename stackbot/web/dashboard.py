"""The dashboard: server-rendered pages under ``/`` (Jinja2, no external assets).

Pages read through :mod:`stackbot.web.readmodel`, exactly like the JSON API, and refresh
themselves when ``/api/changes`` reports a new change token (a few lines of JavaScript).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from sqlmodel import Session

from stackbot.config import MaintenanceSettings
from stackbot.domain.graph_layout import GraphEdge, GraphNode, layout_graph
from stackbot.web import readmodel
from stackbot.web.joblogs import tail_line
from stackbot.web.params import PullNumber, RowId
from stackbot.web.readmodel.closed_children import closed_child_rows

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
TEMPLATES.env.globals["slug"] = readmodel.series_slug


def _pair_paths(matrix: dict[str, Any], a: int, b: int) -> list[str]:
    """The paths on which PRs ``a`` and ``b`` conflict, from a stored conflict matrix."""
    for pair in matrix.get("pairs", []):
        if {pair.get("a"), pair.get("b")} == {a, b}:
            return [str(c.get("path")) for c in pair.get("conflicts", [])]
    return []


def _matrix_prs(matrix: dict[str, Any]) -> list[int]:
    return sorted(int(n) for n in matrix.get("heads", {}))


TEMPLATES.env.globals["pair_paths"] = _pair_paths
TEMPLATES.env.globals["matrix_prs"] = _matrix_prs
TEMPLATES.env.filters["bytes"] = readmodel.human_bytes
TEMPLATES.env.filters["num"] = lambda value: f"{float(value):g}"

router = APIRouter(include_in_schema=False)


def _session(request: Request) -> Session:
    return Session(request.app.state.engine)


def _maintenance_settings(request: Request) -> MaintenanceSettings:
    settings = getattr(request.app.state, "settings", None)
    return settings.maintenance if settings is not None else MaintenanceSettings()


@router.get("/", response_class=HTMLResponse)
def index(request: Request) -> HTMLResponse:
    with _session(request) as session:
        context = {
            "series": readmodel.list_series(session),
            "tasks": readmodel.task_counts(session),
            "closed_children": closed_child_rows(session),
        }
    return TEMPLATES.TemplateResponse(request, "index.html", context)


@router.get("/series/{slug}", response_class=HTMLResponse)
def series(request: Request, slug: str) -> HTMLResponse:
    with _session(request) as session:
        page = readmodel.series_page(session, readmodel.key_from_slug(slug))
    if page is None:
        raise HTTPException(404, f"no series {readmodel.key_from_slug(slug)!r}")
    nodes = [GraphNode(row.number, row.title, row.display_state) for row in page.pulls]
    # One arrow per pair of PRs, labelled with every source that declares it.
    sources: dict[tuple[int, int], list[str]] = {}
    for child, parent, source in page.edges:
        sources.setdefault((child, parent), []).append(source)
    edges = [
        GraphEdge(c, p, ", ".join(sorted(found)), _edge_title(page, c, p, sorted(found)))
        for (c, p), found in sources.items()
    ]
    layout = layout_graph(nodes, edges)
    return TEMPLATES.TemplateResponse(request, "series.html", {"page": page, "layout": layout})


def _edge_title(page: readmodel.SeriesPage, child: int, parent: int, sources: list[str]) -> str:
    """The tooltip of one arrow: each source, where it was written and its exact words."""
    lines = [f"#{child} depends on #{parent}"]
    for source in sources:
        text, origin = page.edge_texts.get((child, parent, source), ("", ""))
        where = f" ({origin})" if origin else ""
        lines.append(f"{source}{where}: {text}" if text else f"{source}{where}")
    return "\n".join(lines)


@router.get("/pulls/{number}", response_class=HTMLResponse)
def pull(request: Request, number: PullNumber) -> HTMLResponse:
    with _session(request) as session:
        detail = readmodel.pull_detail(session, number)
    if detail is None:
        raise HTTPException(404, f"no pull request #{number}")
    return TEMPLATES.TemplateResponse(request, "pull.html", {"d": detail})


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run(request: Request, run_id: RowId) -> HTMLResponse:
    with _session(request) as session:
        found = readmodel.run_detail(session, run_id)
    if found is None:
        raise HTTPException(404, f"no integration run {run_id}")
    summary, steps, tests = found
    return TEMPLATES.TemplateResponse(
        request, "run.html", {"run": summary, "steps": steps, "tests": tests}
    )


@router.get("/jobs", response_class=HTMLResponse)
def jobs(request: Request) -> HTMLResponse:
    with _session(request) as session:
        groups = readmodel.list_jobs(session)
    tails = {
        job.id: tail_line(job.out_dir)
        for group in ("running", "finished")
        for job in groups[group][:50]
    }
    return TEMPLATES.TemplateResponse(request, "jobs.html", {"jobs": groups, "tails": tails})


@router.get("/jobs/{job_id}", response_class=HTMLResponse)
def job(request: Request, job_id: RowId) -> HTMLResponse:
    with _session(request) as session:
        detail = readmodel.job_detail(session, job_id)
    if detail is None:
        raise HTTPException(404, f"no job {job_id}")
    return TEMPLATES.TemplateResponse(
        request,
        "job.html",
        {"job": detail.summary, "tests": detail.tests, "log": detail.log, "cause": detail.cause},
    )


@router.get("/tasks", response_class=HTMLResponse)
def tasks(request: Request) -> HTMLResponse:
    with _session(request) as session:
        counts = readmodel.task_counts(session)
    return TEMPLATES.TemplateResponse(request, "tasks.html", {"tasks": counts})


@router.get("/maintenance", response_class=HTMLResponse)
def maintenance(request: Request) -> HTMLResponse:
    with _session(request) as session:
        view = readmodel.maintenance_view(session, _maintenance_settings(request))
    return TEMPLATES.TemplateResponse(request, "maintenance.html", {"m": view})


def install(app: Any) -> None:
    """Add the dashboard pages, the JSON API and the static files to a FastAPI app."""
    from fastapi.staticfiles import StaticFiles

    from stackbot.web import api

    app.include_router(api.router)
    app.include_router(router)
    app.mount(
        "/static", StaticFiles(directory=str(Path(__file__).parent / "static")), name="static"
    )
