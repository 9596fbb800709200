"""``/metrics`` lines for landings: landings by state (waiting + merging is the queue depth),
PRs landed, the time from ``/stackbot land`` to landed, and stopped landings by cause."""

from __future__ import annotations

from collections import Counter

from sqlalchemy import Engine
from sqlmodel import Session

from stackbot.db import landing_store
from stackbot.domain.landing import STOP_CAUSES, LandingState, stop_cause


def landing_lines(engine: Engine) -> list[str]:
    with Session(engine) as session:
        rows = landing_store.all_landings(session)
    states = Counter(row.state for row in rows)
    landed_prs = sum(
        1 for row in rows for entry in landing_store.entries_of(row) if entry.state == "merged"
    )
    durations = [
        (row.finished_at - row.created_at).total_seconds()
        for row in rows
        if row.state == LandingState.LANDED.value and row.finished_at is not None
    ]
    causes = Counter(stop_cause(row.reason) for row in rows if row.state == "stopped")
    lines = [
        "# HELP stackbot_landings Landings by state (waiting and merging: the queue).",
        "# TYPE stackbot_landings gauge",
    ]
    lines += [
        f'stackbot_landings{{state="{s.value}"}} {states.get(s.value, 0)}' for s in LandingState
    ]
    lines += [
        "# HELP stackbot_landed_prs_total PRs merged by landings.",
        "# TYPE stackbot_landed_prs_total counter",
        f"stackbot_landed_prs_total {landed_prs}",
        "# HELP stackbot_landing_seconds Time from /stackbot land to landed, landed landings.",
        "# TYPE stackbot_landing_seconds summary",
        f"stackbot_landing_seconds_sum {sum(durations):.3f}",
        f"stackbot_landing_seconds_count {len(durations)}",
        "# HELP stackbot_landings_stopped_total Landings stopped, by cause.",
        "# TYPE stackbot_landings_stopped_total counter",
    ]
    lines += [
        f'stackbot_landings_stopped_total{{cause="{c}"}} {causes.get(c, 0)}' for c in STOP_CAUSES
    ]
    return lines
