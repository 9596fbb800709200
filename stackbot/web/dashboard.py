"""The dashboard: server-rendered pages under ``/`` (Jinja2, no external assets).

Pages read through :mod:`stackbot.web.readmodel`, exactly like the JSON API, and refresh
themselves when ``/api/changes`` reports a new change token (a few lines of JavaScript).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, Response
from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape

from stackbot.db import integration_store
from stackbot.domain.graph_layout import (
    GraphEdge,
    edge_words,
    problem_words,
    purpose_words,
    stack_order,
)
from stackbot.domain.verdict_kinds import Verdict, VerdictKind
from stackbot.web import page_cache, pages, readmodel
from stackbot.web.fragments import Fragments
from stackbot.web.joblogs import log_lines, tail_line
from stackbot.web.params import MAX_ROW_ID, PullNumber, RowId
from stackbot.web.readmodel.closed_children import closed_child_rows
from stackbot.web.readmodel.jobs import node_names, tested_by
from stackbot.web.readmodel.landings import landings_page
from stackbot.web.readmodel.nodes import nodes_view
from stackbot.web.readmodel.quarantine import quarantine_page

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
TEMPLATES.env.globals["slug"] = readmodel.series_slug


_PAGE_LINK = re.compile(r"(?<![\w/\"])(/(?:jobs|runs|pulls|series)/[\w-]+(?:#[\w-]+)?)")


def _ticks(text: str) -> Markup:
    """A verdict's words as HTML: escaped, with its `code spans` as <code>, its Markdown links
    (``[log](/jobs/7#log)``, to a page or an http(s) URL) as links, and the dashboard's own
    paths it names bare (``log: /jobs/1#log``) as links."""
    escaped = str(escape(text))
    coded = re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)
    linked = re.sub(r"\[([^\]]+)\]\(((?:/|https?://)[^)\s\"]*)\)", r'<a href="\2">\1</a>', coded)
    return Markup(_PAGE_LINK.sub(r'<a href="\1">\1</a>', linked))


TEMPLATES.env.filters["ticks"] = _ticks


# The three smallest pieces of every page, as _macros.html exports them (pill, sha, pr): plain
# functions, since a 500-PR series page calls them some 10,000 times.
def _pill(state: object, text: object = None) -> Markup:
    """``<span class="pill st-passed">passed</span>``: a state, in its words or ``text``."""
    words = escape(text if text is not None else state)
    return Markup(f'<span class="pill st-{escape(state)}">{words}</span>')


def _sha(value: str | None) -> Markup:
    """A commit's first 7 characters with the whole SHA as its title (a dash for none)."""
    if not value:
        return Markup('<span class="muted">—</span>')
    return Markup(f'<code class="sha" title="{escape(value)}">{escape(value[:7])}</code>')


def _pr(number: object) -> Markup:
    shown = escape(number)
    return Markup(f'<a class="pr" href="/pulls/{shown}">#{shown}</a>')


TEMPLATES.env.globals["pill_html"] = _pill
TEMPLATES.env.globals["sha_html"] = _sha
TEMPLATES.env.globals["pr_html"] = _pr


def _breakable(text: str) -> Markup:
    """A test's node id (or a path) escaped, with a line break allowed after each ``/`` and
    before each ``::`` only: on a phone it wraps between its parts, not inside a name."""
    escaped = str(escape(text))
    return Markup(escaped.replace("/", "/<wbr>").replace("::", "<wbr>::"))


TEMPLATES.env.filters["breakable"] = _breakable
TEMPLATES.env.filters["problem_words"] = problem_words
TEMPLATES.env.filters["purpose_words"] = purpose_words
# A PR's own test files as a test set's name reads: ``own:8034`` → ``#8034's own test files``
# (the words of :func:`~stackbot.domain.report_view.test_set_words`).
# ``own 2x4``, the tree's batched job of every PR's own test files → ``own test files 2x4``.
TEMPLATES.env.filters["set_name"] = lambda name: re.sub(
    r"^own(?= |$)", "own test files", re.sub(r"\bown:(\d+)", r"#\1's own test files", str(name))
)


def _pair_paths(matrix: dict[str, Any], a: int, b: int) -> list[str]:
    """The paths on which PRs ``a`` and ``b`` conflict, from a stored conflict matrix."""
    for pair in matrix.get("pairs", []):
        if {pair.get("a"), pair.get("b")} == {a, b}:
            return [str(c.get("path")) for c in pair.get("conflicts", [])]
    return []


def _matrix_prs(matrix: dict[str, Any]) -> list[int]:
    return sorted(int(n) for n in matrix.get("heads", {}))


TEMPLATES.env.globals["problem_words"] = problem_words
TEMPLATES.env.globals["pair_paths"] = _pair_paths
TEMPLATES.env.globals["matrix_prs"] = _matrix_prs
TEMPLATES.env.filters["bytes"] = readmodel.human_bytes
TEMPLATES.env.filters["num"] = lambda value: f"{float(value):g}"
TEMPLATES.env.filters["edge_words"] = edge_words
TEMPLATES.env.filters["hours"] = lambda value: f"{float(value):,.2f}"

router = APIRouter(include_in_schema=False)


@router.get("/", response_class=HTMLResponse)
def index(request: Request) -> HTMLResponse:
    with pages.session(request) as session:
        context = {
            "series": readmodel.list_series(session),
            "tasks": readmodel.task_counts(session),
            "closed_children": closed_child_rows(session),
        }
    return TEMPLATES.TemplateResponse(request, "index.html", context)


@router.get("/series/{slug}", response_class=HTMLResponse)
def series(request: Request, slug: str) -> Response:
    pieces = page_cache.of(request).fragments

    def render(page: readmodel.SeriesPage) -> bytes:
        context = {
            "page": page,
            "stack": _stack_list(page),
            "summary": series_summary(page),
            "rows": SeriesRows(pieces, page),
        }
        return bytes(TEMPLATES.TemplateResponse(request, "series.html", context).body)

    return pages.send_series(request, slug, render, kind="series", media_type="text/html")


@router.get("/series/{slug}/gpu", response_class=HTMLResponse)
def series_gpu(request: Request, slug: str) -> HTMLResponse:
    """GPU-hours of the series per push and per PR, and what reuse and the policy saved."""
    page = pages.series_gpu(request, slug)
    return TEMPLATES.TemplateResponse(request, "series_gpu.html", {"page": page})


@router.get("/quarantine", response_class=HTMLResponse)
def quarantine(request: Request) -> HTMLResponse:
    """Quarantined tests: since when, the evidence, expiry and the release rule's progress;
    then the nodes excluded for repeated infra failures, with theirs."""
    with pages.session(request) as db:
        page = quarantine_page(db, settings=pages.settings(request))
        nodes = nodes_view(db, settings=pages.settings(request))
    return TEMPLATES.TemplateResponse(request, "quarantine.html", {"page": page, "nodes": nodes})


@router.get("/landing", response_class=HTMLResponse)
def landing(request: Request) -> HTMLResponse:
    """Per repository the landing gate in order (what lands next, what is tested
    speculatively on top of what), then finished landings with their time to land."""
    with pages.session(request) as db:
        page = landings_page(db, settings=pages.settings(request))
    return TEMPLATES.TemplateResponse(request, "landing.html", {"page": page})


@router.get("/series/{slug}/flaky", response_class=HTMLResponse)
def series_flaky(request: Request, slug: str) -> HTMLResponse:
    """The tests the series found flaky, per test across runs, with both jobs of each time."""
    page = pages.series_flaky(request, slug)
    return TEMPLATES.TemplateResponse(request, "series_flaky.html", {"page": page})


DONE_STATES = ("ready", "closed", "merged", "superseded")
SUMMARY_GROUPS = 8  # lines of "needs action" in the summary; the rest are folded under them


@dataclass(frozen=True)
class ActionGroup:
    """PRs that need the same action for the same reason: one line of the summary."""

    verdict: Verdict
    prs: list[tuple[int, str | None]]  # (PR, its log or run when the verdict names one)

    @property
    def same_failures(self) -> int:
        return len(self.verdict.failing)


@dataclass(frozen=True)
class SeriesSummary:
    """What a reader of a big series needs first: how many PRs stand where, which need action
    (one line per reason, PRs that share it folded together), and the conflicting pairs."""

    counts: list[tuple[str, str, int]]  # (label, css class, PRs)
    groups: list[ActionGroup]
    folded: list[ActionGroup]  # the groups past the first SUMMARY_GROUPS
    needing: int  # PRs that need action
    total: int

    @property
    def folded_prs(self) -> int:
        return sum(len(group.prs) for group in self.folded)


def _group_key(verdict: Verdict) -> tuple[object, ...]:
    """PRs fold together when their verdict says the same thing: the same failing tests (new
    failures), the same wait for a vetter (each PR's own head aside), else the same words (a
    PR's own log link aside)."""
    if verdict.failing:
        return (verdict.kind, verdict.failing, verdict.paths)
    if verdict.kind is VerdictKind.NEEDS_APPROVAL:
        return (verdict.kind,)
    return (verdict.kind, verdict.label, verdict.summary, _LOG_LINK.sub("", verdict.action))


_LOG_LINK = re.compile(r"/jobs/\d+#log")


def series_summary(page: readmodel.SeriesPage) -> SeriesSummary:
    counts: dict[tuple[str, str], int] = {}
    groups: dict[tuple[object, ...], ActionGroup] = {}
    needing = 0
    for row in page.pulls:
        state = row.display_state
        if row.verdict is not None and state not in ("closed", "merged", "superseded"):
            label, css = row.verdict.label, f"tone-{row.verdict.tone}"
            if row.verdict.kind is VerdictKind.BLOCKED:
                label = "blocked"  # one count, whichever PR blocks it
        else:
            label, css = state, f"st-{state}"
        counts[(label, css)] = counts.get((label, css), 0) + 1
        if row.verdict is None or state in DONE_STATES:
            continue
        needing += 1
        group = groups.setdefault(_group_key(row.verdict), ActionGroup(row.verdict, []))
        group.prs.append((row.number, row.verdict.url))
    order = {"bad": 0, "wait": 1, "warn": 2, "run": 3, "ok": 4, "off": 5}
    ranked = sorted(groups.values(), key=lambda g: (order.get(g.verdict.tone, 9), -len(g.prs)))
    return SeriesSummary(
        counts=[(label, css, n) for (label, css), n in sorted(counts.items(), key=lambda i: -i[1])],
        groups=ranked[:SUMMARY_GROUPS],
        folded=ranked[SUMMARY_GROUPS:],
        needing=needing,
        total=len(page.pulls),
    )


class SeriesRows:
    """The series page's per-PR pieces (templates/_series_rows.html), each kept in ``pieces``
    under its exact content: a write to one PR renders that PR's pieces again, not 1,500."""

    def __init__(self, pieces: Fragments, page: readmodel.SeriesPage) -> None:
        self._pieces = pieces
        self._macros = TEMPLATES.env.get_template("_series_rows.html").module
        self._series_tests = page.series_tests
        self._series_own_tests = page.series_own_tests
        self._in_tree = page.in_series_tree if page.series_tests else set()

    def node(self, item: StackItem) -> Markup:
        return self._pieces.piece("node", self._macros.node, item)  # type: ignore[attr-defined]

    def pull(self, row: readmodel.PullRow) -> Markup:
        # a row without tests of its own shows the series tree's, when that tree holds it
        # (the tree's test sets, then this PR's part of the batched own-files jobs)
        series_cells = (
            tuple(c for c in self._series_tests if c.own_pr is None and not c.batched_own)
            + tuple(c for c in self._series_own_tests if c.own_pr == row.number)
            if not row.tests and row.number in self._in_tree
            else None
        )
        return self._pieces.piece("pull", self._macros.pull_row, row, series_cells)  # type: ignore[attr-defined]

    def grid(self, row: readmodel.PullRow, labels: list[str]) -> Markup:
        return self._pieces.piece("grid", self._macros.grid_row, row, labels)  # type: ignore[attr-defined]

    def steps(self, steps: tuple[readmodel.StepRow, ...]) -> Markup:
        """The latest series run's step table (one row per PR)."""
        return self._pieces.piece("steps", self._macros.steps, steps)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class StackItem:
    """One PR of the stack-order list: how deep it sits, what it depends on (in words), what
    it conflicts with, what superseded it."""

    row: readmodel.PullRow
    depth: int
    parents: list[tuple[int, str, str, str]]  # (parent, sources, in words, their declaring text)
    conflicts: list[tuple[int, list[str]]]  # (other PR, paths)


def _stack_list(page: readmodel.SeriesPage) -> list[StackItem]:
    numbers = [row.number for row in page.pulls]
    sources: dict[tuple[int, int], list[str]] = {}
    for child, parent, source in page.edges:
        sources.setdefault((child, parent), []).append(source)
    rows = {row.number: row for row in page.pulls}
    parents_of: dict[int, list[int]] = {}
    for child, parent in sources:
        parents_of.setdefault(child, []).append(parent)
    conflicts: dict[int, dict[int, list[str]]] = {n: {} for n in numbers}
    for a, b, paths in page.conflict_pairs:
        conflicts.setdefault(a, {})[b] = paths
        conflicts.setdefault(b, {})[a] = paths
    for step in page.series_steps:
        paths = [str(c.get("path")) for c in step.conflicts]
        for other in step.conflicts_with:
            conflicts.setdefault(step.pr_number, {}).setdefault(other, paths)
            conflicts.setdefault(other, {}).setdefault(step.pr_number, paths)
    return [
        StackItem(
            row=rows[number],
            depth=min(depth, 8),
            parents=sorted(
                (
                    parent,
                    ", ".join(sorted(set(found))),
                    ", ".join(edge_words(source) for source in sorted(set(found))),
                    _edge_title(page, number, parent, sorted(set(found))),
                )
                for parent in parents_of.get(number, ())
                for found in (sources[(number, parent)],)
            ),
            conflicts=sorted(conflicts.get(number, {}).items()),
        )
        for number, depth in _stack_order(tuple(numbers), tuple(sources))
    ]


@lru_cache(maxsize=16)
def _stack_order(
    numbers: tuple[int, ...], pairs: tuple[tuple[int, int], ...]
) -> tuple[tuple[int, int], ...]:
    """:func:`stack_order` of the series' PRs and (child, parent) edges, kept for the next build
    of the page (they change far less often than a PR's state)."""
    return tuple(stack_order(numbers, [GraphEdge(c, p, "") for c, p in pairs]))


def _edge_title(page: readmodel.SeriesPage, child: int, parent: int, sources: list[str]) -> str:
    """The tooltip of one arrow: each source, where it was written and its exact words."""
    lines = [f"#{child} depends on #{parent}"]
    for source in sources:
        text, origin = page.edge_texts.get((child, parent, source), ("", ""))
        where = f" ({origin})" if origin else ""
        lines.append(f"{source}{where}: {text}" if text else f"{source}{where}")
    return "\n".join(lines)


@router.get("/pulls/{number}", response_class=HTMLResponse)
def pull(request: Request, number: PullNumber) -> Response:
    def render(detail: dict[str, Any]) -> bytes:
        return bytes(TEMPLATES.TemplateResponse(request, "pull.html", {"d": detail}).body)

    return pages.send_pull(request, number, render, kind="pulls", media_type="text/html")


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run(request: Request, run_id: RowId) -> HTMLResponse:
    with pages.session(request) as session:
        found = readmodel.run_detail(session, run_id)
        stored = integration_store.get_run(session, run_id=run_id)
        findings = readmodel.run_findings(session, stored) if stored else []
    summary, steps, tests = pages.or_404(found, f"no integration run {run_id}")
    return TEMPLATES.TemplateResponse(
        request,
        "run.html",
        {"run": summary, "steps": steps, "tests": tests, "findings": findings},
    )


@router.get("/jobs", response_class=HTMLResponse)
def jobs(
    request: Request,
    pr: Annotated[int | None, Query(ge=1, le=MAX_ROW_ID)] = None,
    test_set: Annotated[str | None, Query(max_length=100)] = None,
) -> HTMLResponse:
    test_set = test_set or None
    with pages.session(request) as session:
        groups = readmodel.list_jobs(session, pr=pr, test_set=test_set)
        shown = [job for group in ("running", "queued", "finished") for job in groups[group]]
        tested = tested_by(session, shown)
    tails = {
        job.id: tail_line(job.out_dir)
        for group in ("running", "finished")
        for job in groups[group][:50]
    }
    context = {
        "jobs": groups,
        "tails": tails,
        "tested": tested,
        "nodes": {job.id: node_names(job.node) for job in shown},
        "filters": {"pr": pr, "test_set": test_set},
    }
    return TEMPLATES.TemplateResponse(request, "jobs.html", context)


@router.get("/jobs/{job_id}", response_class=HTMLResponse)
def job(request: Request, job_id: RowId) -> HTMLResponse:
    detail = pages.job(request, job_id)
    return TEMPLATES.TemplateResponse(
        request,
        "job.html",
        {
            "job": detail.summary,
            "tests": detail.tests,
            "log": detail.log,
            "lines": log_lines(detail.log),
            "tested": detail.tested,
            "node": node_names(detail.summary.node),
            "cause": detail.cause,
            "key": detail.key,
        },
    )


@router.get("/tasks", response_class=HTMLResponse)
def tasks(request: Request) -> HTMLResponse:
    with pages.session(request) as session:
        counts = readmodel.task_counts(session)
    return TEMPLATES.TemplateResponse(request, "tasks.html", {"tasks": counts})


@router.get("/maintenance", response_class=HTMLResponse)
def maintenance(request: Request) -> HTMLResponse:
    with pages.session(request) as session:
        view = readmodel.maintenance_view(session, pages.maintenance_settings(request))
    return TEMPLATES.TemplateResponse(request, "maintenance.html", {"m": view})


_STATIC = Path(__file__).parent / "static"
_DOCS_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>stackbot · API</title>
<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/static/swagger/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="/static/swagger/swagger-ui-bundle.js"></script>
<script src="/static/swagger/init.js"></script></body></html>
"""


@router.get("/docs", response_class=HTMLResponse)
def docs() -> HTMLResponse:
    """Swagger UI for /openapi.json from stackbot's own copy (GPU clusters are often offline)."""
    return HTMLResponse(_DOCS_PAGE)


@router.get("/favicon.ico")
def favicon() -> FileResponse:
    return FileResponse(_STATIC / "favicon.svg", media_type="image/svg+xml")


def install(app: Any) -> None:
    """Add the dashboard pages, the JSON API and the static files to a FastAPI app."""
    from fastapi.staticfiles import StaticFiles

    from stackbot.web import api
    from stackbot.web.conditional import ConditionalGet

    app.add_middleware(ConditionalGet)
    app.include_router(api.router)
    app.include_router(router)
    app.mount(
        "/static", StaticFiles(directory=str(Path(__file__).parent / "static")), name="static"
    )
