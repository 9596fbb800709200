"""The ``maintenance`` task: keep the disks of a service that runs for months from filling.

Once per ``[maintenance] interval_s`` (a day by default), whatever the number of workers — a
round claims its period in ``maintenance_runs`` (a unique column), so a second task for the same
period, from a racing worker start, does nothing — it:

1. per mirror, under the mirror's exclusive lock (a mirror an integration is using is left for
   the next round): points the keep refs at every unfinished job's commit, deletes the run refs
   past ``run_ref_retention_days``, and repacks (everything reachable in one pack, unreachable
   objects dropped);
2. removes job output directories past ``job_output_retention_days``;
3. prunes the runner's repository cache by age and size (:mod:`gpu_jobs.cache`);
4. measures disk use per area and stores it with the bytes freed, for the dashboard's
   ``/maintenance`` page and ``/api/maintenance`` (pages never walk the disks themselves).

What is kept whatever its age is decided in :mod:`stackbot.domain.retention`. Every step is
idempotent, so a round retried after a crash redoes nothing harmful. ``stackbot maintenance
run [--dry-run]`` runs the same round by hand.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from gpu_jobs import cache as runner_cache
from stackbot.adapters import git_maintenance as mirrors
from stackbot.adapters.git_process import mirror_name, resolve_source
from stackbot.config import Settings
from stackbot.db import maintenance_store as store
from stackbot.db.engine import session_scope
from stackbot.domain.retention import JobFact, Keep, decide_keep, expired, human_bytes
from stackbot.domain.tasks import FollowUp, Maintenance
from stackbot.errors import StackbotError
from stackbot.services.resources import ServiceContext
from stackbot.taskqueue import TaskRegistry

log = logging.getLogger(__name__)

Say = Callable[[str], None]
AREAS = ("mirrors", "run_refs", "job_output", "runner_cache", "database")


@dataclass
class MaintenanceReport:
    """What one round did (or, dry, would do) and the disk use it measured before and after
    (dry: what it would be after the removals; a mirror's repack is not foreseen)."""

    dry_run: bool = False
    freed: dict[str, int] = field(default_factory=dict)  # area -> bytes
    usage: dict[str, dict[str, int | None]] = field(default_factory=dict)
    usage_before: dict[str, dict[str, int | None]] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def count(self, key: str, by: int = 1) -> None:
        self.summary[key] = int(self.summary.get(key, 0)) + by

    def free(self, area: str, nbytes: int) -> None:
        self.freed[area] = self.freed.get(area, 0) + nbytes

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "freed": self.freed,
            "usage": self.usage,
            "usage_before": self.usage_before,
            "summary": self.summary,
            "errors": self.errors,
        }


def run_maintenance(
    engine: Engine,
    settings: Settings,
    *,
    dry_run: bool = False,
    now: float | None = None,
    say: Say = log.info,
) -> MaintenanceReport:
    """One round; ``dry_run`` removes nothing and reports what would go."""
    now = time.time() if now is None else now
    report = MaintenanceReport(
        dry_run=dry_run, freed=dict.fromkeys(("mirrors", "job_output", "runner_cache"), 0)
    )
    with Session(engine) as session:
        job_facts = store.job_facts(session)
        keep = decide_keep(
            store.run_facts(session),
            job_facts,
            open_prs=store.open_prs(session),
            series_with_open_prs=store.series_with_open_prs(session),
        )
        repo_of_mirror = _repo_ids_by_mirror(store.repositories(session), settings.mirrors_dir)
    jobs = {job.id: job for job in job_facts}
    steps: list[tuple[str, Callable[[], None]]] = [
        ("mirrors", lambda: _mirrors(settings, keep, repo_of_mirror, report, now, say)),
        ("job_output", lambda: _job_output(settings, keep, jobs, report, now, say)),
        ("runner_cache", lambda: _runner_cache(settings, report, now, say)),
    ]
    for area, step in steps:
        try:
            step()
        except (StackbotError, OSError) as error:
            report.errors.append(f"{area}: {error}")
            log.warning("maintenance %s failed: %s", area, error)
    with Session(engine) as session:
        report.usage["database"] = {"bytes": store.database_bytes(session), "count": None}
    report.usage_before["database"] = report.usage["database"]
    return report


def _repo_ids_by_mirror(repositories: list[Any], mirrors_dir: Path) -> dict[str, int]:
    found = {}
    for repository in repositories:
        try:
            found[mirror_name(resolve_source(repository.clone_url))] = repository.id
        except StackbotError:  # a local source that is gone: its mirror is judged by age only
            continue
    return found


def _mirrors(
    settings: Settings,
    keep: Keep,
    repo_of_mirror: dict[str, int],
    report: MaintenanceReport,
    now: float,
    say: Say,
) -> None:
    retention = settings.maintenance.run_ref_retention_days
    directory = settings.mirrors_dir
    git_dirs = (
        sorted(p for p in directory.iterdir() if (p / "HEAD").is_file())
        if directory.is_dir()
        else []
    )
    report.usage_before["mirrors"] = {
        "bytes": sum(mirrors.disk_usage(p) for p in git_dirs),
        "count": len(git_dirs),
    }
    refs_left = 0
    for git_dir in git_dirs:
        repo_id = repo_of_mirror.get(git_dir.name)
        with mirrors.exclusive_use(git_dir) as mine:
            if not mine:
                say(f"mirror {git_dir.name}: in use by an integration; left for the next round")
                report.count("mirrors_busy")
                refs_left += sum(len(g.refs) for g in mirrors.list_run_refs(git_dir))
                continue
            if not report.dry_run and repo_id is not None:
                kept = mirrors.set_keep_refs(git_dir, keep.job_commits.get(repo_id, {}))
                report.count("keep_refs", kept)
            doomed: list[str] = []
            for group in mirrors.list_run_refs(git_dir):
                newest = keep.newest_run_of.get((repo_id or -1, group.prefix))
                times = [t for t in (group.written_at, newest and newest.timestamp()) if t]
                if (repo_id or -1, group.prefix) in keep.ref_prefixes:
                    report.count("run_refs_kept_in_use")
                elif expired(max(times, default=None), now=now, retention_days=retention):
                    doomed.extend(group.refs)
                    report.count("run_names_removed")
                    continue
                refs_left += len(group.refs)
            verb = "would delete" if report.dry_run else "deleted"
            if doomed:
                say(f"mirror {git_dir.name}: {verb} {len(doomed)} run refs past {retention:g} days")
            report.count("run_refs_removed", len(doomed))
            if report.dry_run:
                continue
            mirrors.delete_refs(git_dir, doomed)
            if settings.maintenance.repack:
                freed = mirrors.repack(git_dir, timeout=settings.git_fetch_timeout_s)
                report.free("mirrors", freed)
                report.count("mirrors_repacked")
                say(f"mirror {git_dir.name}: repacked, {human_bytes(freed)} freed")
    report.usage["mirrors"] = {
        "bytes": sum(mirrors.disk_usage(p) for p in git_dirs),
        "count": len(git_dirs),
    }
    report.usage["run_refs"] = {"bytes": None, "count": refs_left}


def _job_output(
    settings: Settings,
    keep: Keep,
    jobs: dict[int, JobFact],
    report: MaintenanceReport,
    now: float,
    say: Say,
) -> None:
    retention = settings.maintenance.job_output_retention_days
    directory = settings.jobs_dir
    dirs = sorted(p for p in directory.iterdir() if p.is_dir()) if directory.is_dir() else []
    left_bytes = left = total = 0
    for path in dirs:
        size = runner_cache.disk_usage(path)
        total += size
        job_id = _job_id(path.name)
        row = jobs.get(job_id) if job_id is not None else None
        if job_id is None or job_id in keep.job_ids or (row is not None and not row.finished):
            written: float | None = None  # not a job's directory, or needed: kept
        elif row is None:
            written = path.stat().st_mtime  # no job row knows it (a dropped database)
        else:
            written = row.finished_at.timestamp() if row.finished_at else None
        if expired(written, now=now, retention_days=retention):
            say(f"job output: {'would remove' if report.dry_run else 'removed'} {path.name}")
            if not report.dry_run:
                shutil.rmtree(path, ignore_errors=True)
            report.free("job_output", size)
            report.count("job_dirs_removed")
            continue
        left_bytes += size
        left += 1
    report.usage["job_output"] = {"bytes": left_bytes, "count": left}
    report.usage_before["job_output"] = {"bytes": total, "count": len(dirs)}


def _job_id(name: str) -> int | None:
    digits = name.removeprefix("job-")
    return int(digits) if name.startswith("job-") and digits.isdigit() else None


def _runner_cache(settings: Settings, report: MaintenanceReport, now: float, say: Say) -> None:
    limits = settings.maintenance
    pruned = runner_cache.prune(
        settings.runner_cache_dir,
        max_age_s=limits.runner_cache_max_age_days * 86400.0,
        max_bytes=int(limits.runner_cache_max_gb * 1024**3),
        dry_run=report.dry_run,
        now=now,
        say=say,
    )
    report.free("runner_cache", pruned.freed_bytes)
    report.count("runner_cache_removed", len(pruned.removed))
    report.count("runner_cache_in_use", len(pruned.kept_in_use))
    report.usage["runner_cache"] = {
        "bytes": pruned.remaining_bytes,
        "count": pruned.remaining_entries,
    }
    report.usage_before["runner_cache"] = {
        "bytes": pruned.remaining_bytes + pruned.freed_bytes,
        "count": pruned.remaining_entries + len(pruned.removed),
    }


def describe(report: MaintenanceReport) -> str:
    """One line: what was (or would be) freed and removed, per area."""
    freed = ", ".join(
        f"{area.replace('_', ' ')} {human_bytes(n)}" for area, n in report.freed.items()
    )
    s = report.summary
    removed = (
        f"{s.get('run_refs_removed', 0)} run refs, {s.get('job_dirs_removed', 0)} job output "
        f"directories, {s.get('runner_cache_removed', 0)} runner cache entries"
    )
    if report.dry_run:
        line = f"maintenance (dry run): would free {freed}; would remove {removed}"
    else:
        line = f"maintenance: freed {freed}; removed {removed}"
    return line + (f"; failed: {'; '.join(report.errors)}" if report.errors else "")


# -- the task ---------------------------------------------------------------------------------


def period_of(now: float, interval_s: float) -> int:
    return int(now // interval_s)


def round_at(epoch: float) -> FollowUp:
    """A maintenance round not claimed before ``epoch`` (seconds since the epoch)."""
    return FollowUp.of(Maintenance(), delay_s=max(0.0, epoch - time.time()))


# The first round waits a little after a worker starts: the repairs of what was missed while
# no worker ran (reconcile) come first.
FIRST_ROUND_DELAY_S = 300.0


def first_round() -> FollowUp:
    """What a worker starts with: a round, unless one is pending or running (its period
    decides whether it does anything)."""
    return FollowUp.of(Maintenance(), delay_s=FIRST_ROUND_DELAY_S, unless_open=True)


def handle_maintenance(ctx: ServiceContext, task: Maintenance) -> None:
    interval = ctx.settings.maintenance.interval_s
    now = time.time()
    period = period_of(now, interval)
    next_round = (period + 1) * interval
    with session_scope(ctx.engine) as session:
        row = store.claim_period(session, period=period, task_id=ctx.task_id)
        row_id = row.id if row is not None else None
    if row_id is None:
        log.info("maintenance: this period's round was run by another task; next at the next")
        ctx.enqueue_task(Maintenance(), delay_s=max(0.0, next_round - time.time()))
        return
    try:
        report = run_maintenance(ctx.engine, ctx.settings, now=now)
    except Exception as error:  # recorded, and the next round still comes
        # A round that dies here would otherwise, after its retries, end the schedule.
        log.exception("maintenance: the round failed")
        report = MaintenanceReport(errors=[f"round: {type(error).__name__}: {error}"])
    log.info("%s", describe(report))

    def record(session: Session) -> None:
        store.finish(
            session,
            run_id=row_id,
            freed=report.freed,
            usage=report.usage,
            summary=report.summary,
            error="; ".join(report.errors) or None,
        )

    ctx.on_completion(record)
    ctx.enqueue_task(Maintenance(), delay_s=max(0.0, next_round - time.time()))


def run_by_hand(
    engine: Engine, settings: Settings, *, dry_run: bool, say: Say
) -> MaintenanceReport:
    """``stackbot maintenance run``: a round now, recorded (unless dry) beside the scheduled
    ones."""
    report = run_maintenance(engine, settings, dry_run=dry_run, say=say)
    if not dry_run:
        with session_scope(engine) as session:
            row = store.start_manual(session)
            assert row.id is not None
            store.finish(
                session,
                run_id=row.id,
                freed=report.freed,
                usage=report.usage,
                summary=report.summary,
                error="; ".join(report.errors) or None,
            )
    return report


def register_tasks(registry: TaskRegistry) -> None:
    registry.add_task(Maintenance, handle_maintenance)
