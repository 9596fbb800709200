"""``/metrics`` lines for landings: landings by state, the queue depth per repository (its
waiting and merging landings), PRs landed, the time from ``/stackbot land`` to landed, stopped
landings by cause (a landing ejected from the gate is stopped, with its cause), and the GPU-hours
spent for landings per landed PR.

What counts as GPU-hours for landings: the jobs of every gate run (a tree a landing asked
for: its PRs on a new main, or tested speculatively on top of the landings ahead, thrown away
or not) and of every landing's tested run (the tree it lands, even when that series run was
tested before ``/stackbot land``), each job once, a reused result at 0 (it spent nothing). The
stack runs and older series runs of a series' development are not landing's cost. Divided by
the PRs landings merged (none merged: no per-PR line)."""

from __future__ import annotations

from collections import Counter

from sqlalchemy import Engine
from sqlmodel import Session, col, select

from stackbot.db import accounting_store, landing_store
from stackbot.db.models import Repository
from stackbot.domain.landing import STOP_CAUSES, LandingState, stop_cause


def _label(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def landing_lines(engine: Engine) -> list[str]:
    with Session(engine) as session:
        rows = landing_store.all_landings(session)
        gpu_hours = accounting_store.runs_gpu_hours(
            session, run_ids=landing_store.landing_run_ids(session)
        ).total
        repo_ids = {row.repo_id for row in rows}
        names = {
            repo.id: repo.full_name
            for repo in session.exec(select(Repository).where(col(Repository.id).in_(repo_ids)))
        }
    states = Counter(row.state for row in rows)
    depth = Counter(row.repo_id for row in rows if LandingState(row.state).active)
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
        "# HELP stackbot_landing_queue_depth Landings queued (waiting or merging), by repository.",
        "# TYPE stackbot_landing_queue_depth gauge",
    ]
    lines += [
        f'stackbot_landing_queue_depth{{repo="{_label(names.get(repo_id, str(repo_id)))}"}} '
        f"{depth.get(repo_id, 0)}"
        for repo_id in sorted(repo_ids, key=lambda i: names.get(i, str(i)))
    ]
    lines += [
        "# HELP stackbot_landed_prs_total PRs merged by landings.",
        "# TYPE stackbot_landed_prs_total counter",
        f"stackbot_landed_prs_total {landed_prs}",
        "# HELP stackbot_landing_seconds Time from /stackbot land to landed, landed landings.",
        "# TYPE stackbot_landing_seconds summary",
        f"stackbot_landing_seconds_sum {sum(durations):.3f}",
        f"stackbot_landing_seconds_count {len(durations)}",
        "# HELP stackbot_landings_stopped_total Landings stopped (ejected from the queue), by cause.",
        "# TYPE stackbot_landings_stopped_total counter",
    ]
    lines += [
        f'stackbot_landings_stopped_total{{cause="{c}"}} {causes.get(c, 0)}' for c in STOP_CAUSES
    ]
    lines += [
        "# HELP stackbot_landing_gpu_hours_total GPU-hours of the jobs of landings' trees "
        "(gate runs and each landing's tested run; reused results count 0).",
        "# TYPE stackbot_landing_gpu_hours_total counter",
        f"stackbot_landing_gpu_hours_total {gpu_hours:.3f}",
    ]
    if landed_prs:
        lines += [
            "# HELP stackbot_landing_gpu_hours_per_landed_pr stackbot_landing_gpu_hours_total "
            "divided by stackbot_landed_prs_total.",
            "# TYPE stackbot_landing_gpu_hours_per_landed_pr gauge",
            f"stackbot_landing_gpu_hours_per_landed_pr {gpu_hours / landed_prs:.3f}",
        ]
    return lines
