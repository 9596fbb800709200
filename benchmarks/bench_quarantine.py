"""Flakes, quarantine and broken nodes over a landing stream (issue 26).

Drives the real test planner (``stackbot.domain.test_plan.plan_tree``, given the quarantined
tests and the tests seen flaky within the window as the service gives them), the real quarantine
rules (``stackbot.domain.quarantine``: ``to_quarantine``, ``review``) and the real broken-node
rules (``stackbot.domain.broken_nodes``) with a model of a test suite, a node pool and a stream
of landings, with quarantine on and off (the same seeds, the same landings, the same random
draws per job; the flaky record is part of the quarantine's evidence, so ``none`` has neither).

- Tests: ``--tests`` (300) of which 6 % flake with a probability drawn from 1-5 % and 1.5 % from
  10-30 % (some tests much flakier than others); the rest never flake.
- Landings: ``--landings`` (400) per seed, one every 3 hours (8 a day, Megatron's rate); each
  is a series of 1-3 PRs tested as the series run does (confirm, bisect); 3 % of them carry a
  real, deterministic failure of a random test from a random PR of the series.
- Nodes: 16, two of them broken (every job placed there is infra, and so is a node check); a
  job goes to the next node in turn that its retry chain does not exclude and that the real
  broken-node rule (``stackbot.domain.broken_nodes``: ``to_exclude``, ``check_due``) has not
  excluded, as the executors honour ``exclude_nodes``. An excluded node gets a node check when
  one is due (at each landing): a passing check re-admits it.
- A landing is *ejected* when the plan ends with a ``new`` finding; ejected by flakes when the
  landing carried no real failure.

Prints one JSON object per line per mode (``quarantine``, ``none``): ``landings``,
``ejected_by_flakes``, ``ejected_by_flakes_pct``, ``ejected_real`` (real failures caught),
``real_failures_missed``, ``real_failures_quarantined``, ``quarantined`` (entries made),
``quarantine_precision`` (entries whose test really flakes), ``rerun_gpu_hours`` (confirm,
bisect and retry jobs; 8 GPUs × 15 minutes each), ``infra_jobs``,
``infra_jobs_on_broken_node_before_exclusion`` (the most test jobs any one broken node took, all
infra, before it was excluded, over the seeds and broken nodes; ``_total``: summed over them),
``node_checks`` (checks of excluded nodes) and ``node_check_gpu_hours`` (8 GPUs × 2 minutes
each), ``healthy_nodes_excluded`` (exclusions of a node that is not broken).

    python benchmarks/bench_quarantine.py [--seeds N] [--landings N] [--tests N]
        [--flaky-count K] [--release-after N] --json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stackbot.domain.broken_nodes import NodeJob, NodePolicy, check_due, to_exclude
from stackbot.domain.quarantine import (
    ACTIVE,
    FlakyObservation,
    QuarantinePolicy,
    review,
    to_quarantine,
)
from stackbot.domain.test_plan import (
    FLAKY,
    NEW,
    QUARANTINED,
    TREE,
    Config,
    JobFact,
    Layer,
    TreePlan,
    plan_tree,
)
from stackbot.domain.types import PrNumber

CONFIG = Config("unit-tests", "1x8")
NODES = tuple(f"node-{i:02d}" for i in range(16))
BROKEN = frozenset({"node-03", "node-11"})
JOB_GPU_HOURS = 8 * 0.25
NODE_CHECK_GPU_HOURS = 8 * 2 / 60
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Entry:
    nodeid: str
    started: datetime
    expires: datetime
    outcomes: list[str] = field(default_factory=list)
    state: str = ACTIVE


@dataclass
class Stream:
    mode: str
    rng_seed: int
    tests: int
    flake: dict[str, float]
    policy: QuarantinePolicy = field(default_factory=QuarantinePolicy)
    observations: list[FlakyObservation] = field(default_factory=list)
    entries: dict[str, Entry] = field(default_factory=dict)
    ended: list[Entry] = field(default_factory=list)
    next_job: int = 1
    node_turn: int = 0
    stats: dict[str, float] = field(default_factory=dict)
    node_policy: NodePolicy = field(default_factory=NodePolicy)
    node_jobs: list[NodeJob] = field(default_factory=list)
    excluded: dict[str, datetime] = field(default_factory=dict)  # node -> last check (or start)
    readmitted: dict[str, datetime] = field(default_factory=dict)
    failed_checks: dict[str, int] = field(default_factory=dict)  # in the current exclusion
    on_broken: dict[str, int] = field(default_factory=dict)  # infra test jobs per broken node

    def quarantined(self) -> frozenset[str]:
        if self.mode != "quarantine":
            return frozenset()
        return frozenset(n for n, e in self.entries.items() if e.state == ACTIVE)

    def seen_flaky(self, now: datetime) -> frozenset[str]:
        """The tests seen flaky within the window, as the service reads them for the planner
        (part of the quarantine's evidence: none without quarantine)."""
        if self.mode != "quarantine":
            return frozenset()
        since = now - self.policy.window
        return frozenset(o.nodeid for o in self.observations if o.at >= since)

    def place(self, excluded: tuple[str, ...]) -> str:
        for _ in range(len(NODES)):
            node = NODES[self.node_turn % len(NODES)]
            self.node_turn += 1
            if node not in excluded and node not in self.excluded:
                return node
        return NODES[0]

    def finished_on(self, node: str, job_id: int, status: str, now: datetime) -> None:
        """A job finished on ``node``: the broken-node rule reads it (as the service does after
        each round of finished jobs)."""
        self.node_jobs.append(NodeJob(node, job_id, status, now))
        found = to_exclude(
            self.node_jobs,
            now=now,
            policy=self.node_policy,
            held=self.excluded,
            since=self.readmitted,
        )
        for name in found:
            self.excluded[name] = now
            self.failed_checks[name] = 0
            self.stats["nodes_excluded"] += 1
            if name not in BROKEN:
                self.stats["healthy_nodes_excluded"] += 1

    def check_nodes(self, now: datetime) -> None:
        """The node checks due: a broken node fails its check (stays out), any other passes
        (re-admitted)."""
        for name, last in sorted(self.excluded.items()):
            due = check_due(
                excluded_at=last,
                last_check_at=last,
                failed_checks=self.failed_checks.get(name, 0),
                asked=False,
                now=now,
                policy=self.node_policy,
            )
            if not due:
                continue
            self.stats["node_checks"] += 1
            self.stats["node_check_gpu_hours"] += NODE_CHECK_GPU_HOURS
            if name in BROKEN:
                self.excluded[name] = now
                self.failed_checks[name] = self.failed_checks.get(name, 0) + 1
            else:
                del self.excluded[name]
                self.failed_checks.pop(name, None)
                self.readmitted[name] = now

    def landing(self, index: int, rng: random.Random, real: tuple[str, int] | None, prs: int):
        now = EPOCH + timedelta(hours=3 * index)
        layers = [Layer(k, PrNumber(k), f"L{index}-tree-{k}") for k in range(1, prs + 1)]
        names = [f"tests/unit_tests/test_{i:03d}.py::test_it" for i in range(self.tests)]
        main = {CONFIG: dict.fromkeys(names, "passed")}
        jobs: list[JobFact] = []
        held = self.quarantined()
        seen = self.seen_flaky(now)
        self.check_nodes(now)
        plan = TreePlan()
        for _ in range(60):
            plan = plan_tree(
                layers=layers,
                configs=[CONFIG],
                jobs=jobs,
                main=main,
                bisect=True,
                target_pr=PrNumber(prs),
                quarantined=held,
                seen_flaky=seen,
            )
            if not plan.wanted:
                break
            for wanted in plan.wanted:
                node = self.place(wanted.excluded_nodes)
                if wanted.purpose != TREE:
                    self.stats["rerun_gpu_hours"] += JOB_GPU_HOURS
                if node in BROKEN:
                    status, tests = "infra", {}
                    self.stats["infra_jobs"] += 1
                    self.on_broken[node] = self.on_broken.get(node, 0) + 1
                else:
                    layer = wanted.step_position or prs
                    tests = {}
                    for name in names:
                        fails = rng.random() < self.flake.get(name, 0.0)
                        if real is not None and name == real[0] and layer >= real[1]:
                            fails = True
                        tests[name] = "failed" if fails else "passed"
                    status = "failed" if "failed" in tests.values() else "passed"
                    for name in held:
                        if name in self.entries and wanted.purpose == TREE:
                            self.entries[name].outcomes.append(tests[name])
                jobs.append(
                    JobFact(
                        id=self.next_job,
                        config=wanted.config,
                        purpose=wanted.purpose,
                        step_position=wanted.step_position,
                        attempt=wanted.attempt,
                        status=status,
                        tests=tests,
                        node=node,
                        retry_of=wanted.retry_of,
                    )
                )
                self.finished_on(node, self.next_job, status, now)
                self.next_job += 1
        new = [f for f in plan.findings if f.failure_class == NEW]
        if new:
            if real is None:
                self.stats["ejected_by_flakes"] += 1
                if any(f.nodeid in held for f in new):
                    self.stats["ejected_by_quarantined"] += 1
            else:
                self.stats["ejected_real"] += 1
        elif real is not None:
            self.stats["real_failures_missed"] += 1
        if real is not None and any(
            f.nodeid == real[0] and f.failure_class == QUARANTINED for f in plan.findings
        ):
            self.stats["real_failures_quarantined"] += 1
        for f in plan.findings:
            if f.failure_class in (FLAKY, QUARANTINED) and f.evidence.get("failed_in"):
                self.observations.append(
                    FlakyObservation(
                        nodeid=f.nodeid,
                        test_set=CONFIG.test_set,
                        shape=CONFIG.shape,
                        tree=layers[-1].tree,
                        failed_job=int(f.evidence["failed_in"][-1]),
                        passed_job=int(f.evidence["passed_in"][-1]),
                        at=now,
                    )
                )
        if self.mode == "quarantine":
            self.review(now, real)

    def review(self, now: datetime, real: tuple[str, int] | None) -> None:
        for name, entry in list(self.entries.items()):
            if entry.state != ACTIVE:
                continue
            decision = review(
                expires_at=entry.expires,
                outcomes_since_start=entry.outcomes,
                failed_every_time=False,
                now=now,
                policy=self.policy,
            )
            if decision is not None:
                entry.state = decision.state
                self.ended.append(self.entries.pop(name))
        ended_at = {e.nodeid: e.expires for e in self.ended}
        seen = [o for o in self.observations if o.at > ended_at.get(o.nodeid, EPOCH)]
        for name, _ in to_quarantine(
            seen, now=now, policy=self.policy, held=self.quarantined()
        ).items():
            self.entries[name] = Entry(name, now, now + self.policy.expiry)
            self.stats["quarantined"] += 1
            if self.flake.get(name, 0.0) > 0:
                self.stats["quarantined_flaky"] += 1
            elif real is not None and name == real[0]:
                self.stats["real_failures_quarantined"] += 1


def run(mode: str, seed: int, args: argparse.Namespace) -> dict[str, float]:
    rng = random.Random(seed)
    flake: dict[str, float] = {}
    for i in range(args.tests):
        name = f"tests/unit_tests/test_{i:03d}.py::test_it"
        draw = rng.random()
        if draw < 0.015:
            flake[name] = rng.uniform(0.10, 0.30)
        elif draw < 0.075:
            flake[name] = rng.uniform(0.01, 0.05)
    policy = QuarantinePolicy(flaky_count=args.flaky_count, release_after=args.release_after)
    stream = Stream(mode, seed, args.tests, flake, policy=policy)
    stream.stats = dict.fromkeys(
        (
            "ejected_by_flakes",
            "ejected_real",
            "real_failures_missed",
            "real_failures_quarantined",
            "quarantined",
            "quarantined_flaky",
            "ejected_by_quarantined",
            "rerun_gpu_hours",
            "infra_jobs",
            "infra_jobs_on_broken_node_before_exclusion_total",
            "nodes_excluded",
            "healthy_nodes_excluded",
            "node_checks",
            "node_check_gpu_hours",
        ),
        0.0,
    )
    landings = random.Random(seed * 7919 + 1)
    outcomes = random.Random(seed * 104729 + 2)  # the same draws in both modes
    for index in range(args.landings):
        prs = landings.randint(1, 3)
        real = None
        if landings.random() < 0.03:
            victim = landings.randrange(args.tests)
            real = (f"tests/unit_tests/test_{victim:03d}.py::test_it", landings.randint(1, prs))
        stream.landing(index, outcomes, real, prs)
    stream.stats["infra_jobs_on_broken_node_before_exclusion_total"] = sum(
        stream.on_broken.values()
    )
    # Every test job a broken node takes is infra and taken before its exclusion (the
    # placement honours exclusions): the worst broken node of this seed.
    stream.stats["broken_node_max"] = max(stream.on_broken.values(), default=0)
    return stream.stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--landings", type=int, default=400)
    parser.add_argument("--tests", type=int, default=300)
    parser.add_argument("--flaky-count", type=int, default=QuarantinePolicy.flaky_count)
    parser.add_argument("--release-after", type=int, default=QuarantinePolicy.release_after)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.seeds < 1 or args.landings < 1 or args.tests < 1:
        parser.error("--seeds, --landings and --tests take a positive number")
    for mode in ("quarantine", "none"):
        totals: dict[str, float] = {}
        worst = 0.0
        for seed in range(1, args.seeds + 1):
            for key, value in run(mode, seed, args).items():
                totals[key] = totals.get(key, 0.0) + value
                if key == "broken_node_max":
                    worst = max(worst, value)
        landings = args.landings * args.seeds
        made = totals["quarantined"]
        row: dict[str, Any] = {
            "mode": mode,
            "seeds": args.seeds,
            "landings": landings,
            "ejected_by_flakes": int(totals["ejected_by_flakes"]),
            "ejected_by_flakes_pct": round(100 * totals["ejected_by_flakes"] / landings, 2),
            "ejected_real": int(totals["ejected_real"]),
            "ejected_by_quarantined_tests": int(totals["ejected_by_quarantined"]),
            "real_failures_missed": int(totals["real_failures_missed"]),
            "real_failures_quarantined": int(totals["real_failures_quarantined"]),
            "quarantined": int(made),
            "quarantine_precision": round(totals["quarantined_flaky"] / made, 3) if made else None,
            "rerun_gpu_hours": round(totals["rerun_gpu_hours"], 1),
            "infra_jobs": int(totals["infra_jobs"]),
            "infra_jobs_on_broken_node_before_exclusion": int(worst),
            "infra_jobs_on_broken_node_before_exclusion_total": int(
                totals["infra_jobs_on_broken_node_before_exclusion_total"]
            ),
            "nodes_excluded": int(totals["nodes_excluded"]),
            "healthy_nodes_excluded": int(totals["healthy_nodes_excluded"]),
            "node_checks": int(totals["node_checks"]),
            "node_check_gpu_hours": round(totals["node_check_gpu_hours"], 1),
        }
        if args.json:
            print(json.dumps(row, sort_keys=True))
        else:
            print(" ".join(f"{k}={v}" for k, v in row.items()))


if __name__ == "__main__":
    main()
