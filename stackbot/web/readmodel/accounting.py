"""The series' GPU-hours page and its flaky tests page (issue 13 points 5 and 3), each read in
a fixed number of queries whatever the number of PRs, pushes, runs or jobs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlmodel import Session

from stackbot.config import Settings
from stackbot.db import accounting_store, dashboard_store, flaky_store
from stackbot.domain.accounting import PushAccount, SeriesAccount, Slice
from stackbot.domain.flaky import FlakyEvent, FlakyTest
from stackbot.web.readmodel.series import series_slug
from stackbot.web.readmodel.summaries import iso


def _h(hours: float) -> float:
    return round(float(hours), 3)


def slice_json(part: Slice) -> dict[str, Any]:
    return {
        "gpu_hours": _h(part.hours.total),
        "by_purpose": {k: _h(v) for k, v in sorted(part.hours.by_purpose.items())},
        "saved_by_reuse": _h(part.hours.saved_by_reuse),
        "jobs": part.jobs,
        "reused_jobs": part.reused,
    }


def push_json(push: PushAccount) -> dict[str, Any]:
    return {
        "series_run": push.series_run_id,
        "created_at": iso(push.created_at) if push.created_at else None,
        "base_sha": push.base_sha,
        "first": push.first,
        "changed": list(push.changed),
        "dropped": list(push.dropped),
        "base_moved": push.base_moved,
        "runs": push.run_ids,
        **slice_json(push.spent),
        "untested_stacks": push.untested_stacks,
        "saved_by_policy": _h(push.saved_by_policy),
    }


@dataclass(frozen=True)
class SeriesGpuPage:
    key: str
    slug: str
    repo: str
    policy: str
    account: SeriesAccount

    def to_json(self) -> dict[str, Any]:
        a = self.account
        return {
            "series": self.key,
            "repo": self.repo,
            **slice_json(a.total),
            "shared": slice_json(a.shared),
            "by_push": [push_json(p) for p in a.pushes],
            "by_pr": {str(pr): slice_json(part) for pr, part in a.by_pr.items()},
            "saved_by_policy": {
                "policy": self.policy,
                "gpu_hours": _h(a.saved_by_policy),
                "untested_stacks": a.untested_stacks,
                "per_stack_gpu_hours": _h(a.per_stack_hours),
                "mean_seconds_by_config": {
                    k: round(v, 1) for k, v in a.mean_seconds_by_config.items()
                },
                "gpus_by_config": dict(sorted(a.gpus_by_config.items())),
            },
        }


def series_gpu_page(
    session: Session, key: str, settings: Settings | None = None
) -> SeriesGpuPage | None:
    found = dashboard_store.find_series(session, key=key)
    if found is None:
        return None
    series, repository = found
    account = accounting_store.series_account(
        session, repo_id=series.repo_id, series_key=series.key
    )
    policy = (
        settings.test_plan_policy
        if settings is not None
        else Settings.model_fields["test_plan_policy"].default
    )
    return SeriesGpuPage(series.key, series_slug(series.key), repository.full_name, policy, account)


def event_json(event: FlakyEvent) -> dict[str, Any]:
    return {
        "test_set": event.test_set,
        "shape": event.shape,
        "tree": event.tree_sha,
        "failed_job": event.failed_job,
        "passed_job": event.passed_job,
        "failed_run": event.failed_run,
        "passed_run": event.passed_run,
        "failed_node": event.failed_node,
        "passed_node": event.passed_node,
        "failed_at": iso(event.failed_at) if event.failed_at else None,
        "reported_by": [
            {"run": r.id, "kind": r.kind, "target_pr": r.target_pr} for r in event.runs
        ],
    }


@dataclass(frozen=True)
class SeriesFlakyPage:
    key: str
    slug: str
    repo: str
    tests: tuple[FlakyTest, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "series": self.key,
            "repo": self.repo,
            "tests": [
                {
                    "nodeid": t.nodeid,
                    "times": t.times,
                    "configs": list(t.configs),
                    "trees": list(t.trees),
                    "events": [event_json(e) for e in t.events],
                }
                for t in self.tests
            ],
        }


def series_flaky_page(session: Session, key: str) -> SeriesFlakyPage | None:
    found = dashboard_store.find_series(session, key=key)
    if found is None:
        return None
    series, repository = found
    tests = flaky_store.series_flaky_tests(session, repo_id=series.repo_id, series_key=series.key)
    return SeriesFlakyPage(series.key, series_slug(series.key), repository.full_name, tuple(tests))
