"""``/healthz`` (is the database answering?) and ``/metrics`` (Prometheus text format).

Metrics are kept in-process and written by hand, without a client library: counters of
webhook deliveries by event and outcome, the task queue's counts by status (read from the
database at most every couple of seconds, so scrapes cannot load it), and request latencies as
a histogram per route.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from sqlalchemy import Engine

from stackbot.db.probe import database_answers
from stackbot.taskqueue import queue
from stackbot.web.landing_metrics import landing_lines

LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
TASK_STATS_TTL_S = 2.0
# Event label values: anything else is counted as "other", so a sender cannot grow the series.
KNOWN_EVENTS = frozenset(
    {"ping", "pull_request", "issue_comment", "push", "check_run", "installation"}
)

router = APIRouter(tags=["health"])


class Metrics:
    """The process's counters; one per app (``app.state.metrics``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.deliveries: defaultdict[tuple[str, str], int] = defaultdict(int)
        self._latency_counts: dict[str, list[int]] = {}
        self._latency_sums: defaultdict[str, float] = defaultdict(float)
        self._task_stats: tuple[float, dict[str, int]] | None = None

    def count_delivery(self, event: str, outcome: str) -> None:
        label = event if event in KNOWN_EVENTS else "other"
        with self._lock:
            self.deliveries[(label, outcome)] += 1

    def observe_latency(self, route: str, seconds: float) -> None:
        with self._lock:
            counts = self._latency_counts.setdefault(route, [0] * (len(LATENCY_BUCKETS_S) + 1))
            counts[bisect.bisect_left(LATENCY_BUCKETS_S, seconds)] += 1
            self._latency_sums[route] += seconds

    def task_stats(self, engine: Engine) -> dict[str, int]:
        now = time.monotonic()
        cached = self._task_stats
        if cached is not None and now - cached[0] < TASK_STATS_TTL_S:
            return cached[1]
        stats = queue.stats(engine)
        self._task_stats = (now, stats)
        return stats

    def render(self, engine: Engine) -> str:
        lines = [
            "# HELP stackbot_webhook_deliveries_total Webhook deliveries received, by event and outcome.",
            "# TYPE stackbot_webhook_deliveries_total counter",
        ]
        with self._lock:
            deliveries = sorted(self.deliveries.items())
            latencies = {route: list(counts) for route, counts in self._latency_counts.items()}
            sums = dict(self._latency_sums)
        for (event, outcome), count in deliveries:
            lines.append(
                f'stackbot_webhook_deliveries_total{{event="{event}",outcome="{outcome}"}} {count}'
            )
        lines += [
            "# HELP stackbot_tasks Tasks in the queue, by status.",
            "# TYPE stackbot_tasks gauge",
        ]
        for status, count in sorted(self.task_stats(engine).items()):
            lines.append(f'stackbot_tasks{{status="{status}"}} {count}')
        lines += landing_lines(engine)
        lines += _histogram_lines(latencies, sums)
        return "\n".join(lines) + "\n"


def _histogram_lines(latencies: dict[str, list[int]], sums: dict[str, float]) -> list[str]:
    name = "stackbot_http_request_duration_seconds"
    lines = [f"# HELP {name} HTTP request latency, by route.", f"# TYPE {name} histogram"]
    for route in sorted(latencies):
        cumulative = 0
        label = _escape(route)
        for bound, count in zip((*LATENCY_BUCKETS_S, float("inf")), latencies[route], strict=True):
            cumulative += count
            le = "+Inf" if bound == float("inf") else repr(bound)
            lines.append(f'{name}_bucket{{route="{label}",le="{le}"}} {cumulative}')
        lines.append(f'{name}_sum{{route="{label}"}} {sums[route]:.6f}')
        lines.append(f'{name}_count{{route="{label}"}} {cumulative}')
    return lines


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class LatencyMiddleware:
    """Pure ASGI middleware (no per-request task or body copy) timing every HTTP request."""

    def __init__(self, app: Callable[..., Any], metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            self.metrics.observe_latency(route, time.perf_counter() - started)


@router.get("/healthz", summary="Liveness and database reachability")
def healthz(request: Request) -> Response:
    problem = database_answers(request.app.state.engine)
    if problem is not None:
        return JSONResponse({"status": "unhealthy", "database": problem}, status_code=503)
    return JSONResponse({"status": "ok", "database": "ok"})


@router.get(
    "/metrics", summary="Prometheus metrics (text format)", response_class=PlainTextResponse
)
def metrics(request: Request) -> PlainTextResponse:
    text = request.app.state.metrics.render(request.app.state.engine)
    return PlainTextResponse(text, media_type="text/plain; version=0.0.4; charset=utf-8")
