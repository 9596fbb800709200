"""The test plan of one integration run's tree (pure decisions, issue 13).

Given a run's merged steps (its *layers*: the tree after each PR was merged, in merge order), the
configurations tested on it (test set × shape × targets), every job made for it so far and main's
results, :func:`plan_tree` says which jobs are still wanted and what is known about each failing
test. It is recomputed from the stored jobs whenever one of them finishes, so it holds no state
of its own: a job is wanted at most once (its key is the configuration, why it exists and where),
and a retried or concurrent planning pass wants the same jobs again, never new ones.

For each configuration:

1. The run's final tree is tested (``tree``). An ``infra`` result (the node, not the tests) is
   retried on another node up to ``infra_retries`` times (``retry``) and never counted. A job
   is ``infra`` when its node check failed, setup ran out of time before any test ran, a node
   failed or wrote no report, torchrun could not start the ranks, or a rank was *lost*: killed
   from outside (SIGKILL, SIGTERM, SIGHUP as torchrun's first observed failure) or its
   finished session's report never arrived — even mid-test, after tests ran on it or on the
   other ranks. Those tests are not results: an infra job carries no test outcomes (the
   precise rule is :mod:`gpu_jobs.verdict`'s). A rank that exits with a code of its own or
   crashes the interpreter (SIGSEGV, SIGABRT ...) is the tree's ``error``, never retried.
2. A test failing there that does not fail on main (it passes on main, or main does not have it)
   is a *suspect*. Tests failing on main too are ``pre-existing``.
3. Suspects are confirmed by a rerun of the same tree (``confirm``, attempt 2). A suspect that
   passes the rerun is ``flaky`` (both jobs are its evidence) and is attributed to no PR.
   A suspect the rerun fails again that is quarantined, or that the repository saw flaky within
   the quarantine window, gets more runs of the tree (up to :data:`QUARANTINE_RUNS`): passing
   one it is ``quarantined`` (resp. ``flaky``), failing all of them it is confirmed.
4. With ``bisect`` on (every run the service plans: the series run and each stack run), each confirmed failure is
   bisected over the prefixes of the merge order: position 0 is main (where it does not fail),
   the last position is the final tree (where it does); the prefix at the middle is tested
   (``bisect``, ``step_position`` = how many layers it holds) until two adjacent positions
   remain, and the failure is ``new``, introduced by the PR of the first failing position.
   A configuration's failing tests are bisected together: every test takes the midpoint of its
   interval, so tests whose answers agree share every probe and their intervals part only
   where their answers differ. A prefix whose tree equals another tested tree costs nothing
   (the service reuses identical trees' results). Without ``bisect`` a confirmed failure is
   ``new`` and attributed to the run's target PR.
   If the confirming rerun is infra on every retry, the suspects are final ``new`` failures
   attributed to no PR, with a note: neither confirmed nor cleared, they count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stackbot.domain.types import PrNumber

# A job's test outcomes that count as failing (``flaky`` is gpu_jobs' tolerated failure).
FAILING = frozenset({"failed", "error"})
FINISHED = frozenset({"passed", "failed", "error", "timeout", "infra", "cancelled"})
# Finished results that say nothing about the tree: retried on another node.
INFRA = frozenset({"infra"})

TREE, CONFIRM, BISECT, RETRY = "tree", "confirm", "bisect", "retry"
# Runs of one tree a quarantined test, or one seen flaky recently, must fail, all of them, to
# count as a failure.
QUARANTINE_RUNS = 5

NEW, PRE_EXISTING, FLAKY, SUSPECT, BISECTING, QUARANTINED = (
    "new",
    "pre-existing",
    "flaky",
    "suspect",
    "bisecting",
    "quarantined",
)
FAILURE_CLASSES = (NEW, PRE_EXISTING, FLAKY, SUSPECT, BISECTING, QUARANTINED)


@dataclass(frozen=True, order=True)
class Config:
    """One configuration a tree is tested with (targets only for a PR's own test files)."""

    test_set: str
    shape: str
    targets: tuple[str, ...] | None = None

    @property
    def label(self) -> str:
        return f"{self.test_set} {self.shape}"


@dataclass(frozen=True)
class Layer:
    """The tree after one merged step of the run (position 1 is the first PR merged)."""

    position: int
    pr: PrNumber
    tree: str


@dataclass(frozen=True)
class JobFact:
    """What the planner needs to know of one job made for the run."""

    id: int
    config: Config
    purpose: str  # tree | confirm | bisect | retry
    step_position: int | None  # None: the run's final tree
    attempt: int
    status: str  # queued ... passed | failed | error | timeout | infra | cancelled
    tests: Mapping[str, str] = field(default_factory=dict)  # nodeid -> outcome, once finished
    node: str | None = None
    retry_of: int | None = None

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


@dataclass(frozen=True)
class WantedJob:
    config: Config
    purpose: str
    step_position: int | None
    attempt: int
    retry_of: int | None = None
    excluded_nodes: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.config, self.purpose, self.step_position, self.attempt, self.retry_of)


@dataclass(frozen=True)
class Finding:
    config: Config
    nodeid: str
    failure_class: str
    pr: PrNumber | None = None
    evidence: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class TreePlan:
    wanted: list[WantedJob] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    # Configurations whose conclusion is still open (a job or a rerun is pending).
    open_configs: list[Config] = field(default_factory=list)
    # Configurations whose result is infra after every retry: no test result at all.
    infra_configs: list[Config] = field(default_factory=list)

    @property
    def final(self) -> bool:
        return not self.open_configs


@dataclass(frozen=True)
class _Outcome:
    """A (config, position, attempt) slot's effective result after its infra retries."""

    state: str  # pending | infra | done
    tests: Mapping[str, str]
    job_ids: tuple[int, ...]


def plan_tree(
    *,
    layers: Sequence[Layer],
    configs: Sequence[Config],
    jobs: Sequence[JobFact],
    main: Mapping[Config, Mapping[str, str] | None],
    bisect: bool,
    target_pr: PrNumber | None = None,
    infra_retries: int = 2,
    results_by_tree: Mapping[tuple[str, Config], Mapping[str, str] | None] | None = None,
    quarantined: frozenset[str] = frozenset(),
    seen_flaky: frozenset[str] = frozenset(),
) -> TreePlan:
    """The jobs still wanted for a run's tree and the findings about its failing tests.

    ``main`` maps each configuration to main's test outcomes (None: main's job is not finished;
    an absent configuration: main has no result, so every failing test is a suspect).
    ``results_by_tree`` holds results already known for (tree, configuration) elsewhere (other
    runs, earlier pushes; None: that job still runs): a prefix with a known result is not
    tested again, one whose job runs elsewhere is waited for. ``quarantined``: the
    repository's quarantined tests; ``seen_flaky``: tests it recorded flaky (failed, then
    passed on a rerun of the same tree) within the quarantine window, quarantined or not: a
    failure of either that the first rerun repeats gets more runs before it counts."""
    plan = TreePlan()
    slots = _Slots(jobs, infra_retries, plan)
    known = results_by_tree or {}
    for config in configs:
        _plan_config(
            plan, slots, known, layers, config, main, bisect, target_pr, quarantined, seen_flaky
        )
    return plan


class _Slots:
    """Jobs grouped by what they test: (config, position, attempt), with their retries."""

    def __init__(self, jobs: Sequence[JobFact], infra_retries: int, plan: TreePlan) -> None:
        self.retries = infra_retries
        self.plan = plan
        self.by_slot: dict[tuple[Config, int | None, int], list[JobFact]] = {}
        for job in sorted(jobs, key=lambda j: j.id):
            self.by_slot.setdefault((job.config, job.step_position, job.attempt), []).append(job)

    def outcome(
        self, config: Config, position: int | None, attempt: int, purpose: str
    ) -> _Outcome | None:
        """The slot's result; None when no job exists for it yet (the caller wants one)."""
        chain = self.by_slot.get((config, position, attempt))
        if not chain:
            return None
        ids = tuple(j.id for j in chain)
        last = chain[-1]
        if not last.finished:
            return _Outcome("pending", {}, ids)
        if last.status not in INFRA:
            return _Outcome("done", dict(last.tests), ids)
        retries = sum(1 for j in chain if j.purpose == RETRY)
        if retries >= self.retries:
            return _Outcome("infra", {}, ids)
        nodes = tuple(sorted({n for j in chain for n in _nodes(j.node)}))
        self.plan.wanted.append(
            WantedJob(config, RETRY, position, attempt, retry_of=last.id, excluded_nodes=nodes)
        )
        return _Outcome("pending", {}, ids)


def _nodes(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def _failing(tests: Mapping[str, str]) -> set[str]:
    return {nodeid for nodeid, outcome in tests.items() if outcome in FAILING}


def _plan_config(
    plan: TreePlan,
    slots: _Slots,
    known: Mapping[tuple[str, Config], Mapping[str, str] | None],
    layers: Sequence[Layer],
    config: Config,
    main: Mapping[Config, Mapping[str, str] | None],
    bisect: bool,
    target_pr: PrNumber | None,
    quarantined: frozenset[str],
    seen_flaky: frozenset[str] = frozenset(),
) -> None:
    first = slots.outcome(config, None, 1, TREE)
    if first is None:
        plan.wanted.append(WantedJob(config, TREE, None, 1))
        plan.open_configs.append(config)
        return
    if first.state == "pending":
        plan.open_configs.append(config)
        return
    if first.state == "infra":
        plan.infra_configs.append(config)
        return
    failing = _failing(first.tests)
    if not failing:
        return
    if config in main and main[config] is None:
        plan.open_configs.append(config)  # main's result decides what is pre-existing
        return
    on_main = main.get(config) or {}
    pre_existing = sorted(n for n in failing if on_main.get(n) in FAILING)
    for nodeid in pre_existing:
        plan.findings.append(
            Finding(config, nodeid, PRE_EXISTING, evidence={"jobs": list(first.job_ids)})
        )
    suspects = sorted(failing - set(pre_existing))
    if not suspects:
        return
    # A test main does not have (main's result exists and lacks it) is new in this run: it is
    # never retried into green, so its failure counts without a rerun (and never feeds a
    # quarantine); the bisection finds the PR that added it.
    new_tests = {n for n in suspects if n not in on_main} if main.get(config) is not None else set()
    rerunnable = [n for n in suspects if n not in new_tests]
    if not rerunnable:
        _conclude(
            plan,
            slots,
            known,
            layers,
            config,
            sorted(new_tests),
            list(first.job_ids),
            bisect,
            target_pr,
        )
        return
    rerun = slots.outcome(config, None, 2, CONFIRM)
    if rerun is None or rerun.state != "done":
        if rerun is None:
            plan.wanted.append(WantedJob(config, CONFIRM, None, 2))
        evidence = {"jobs": list(first.job_ids + (rerun.job_ids if rerun else ()))}
        if rerun is not None and rerun.state == "infra":
            # Final: the rerun failed as infra on every node it was retried on, so the failure
            # can be neither confirmed nor cleared. It is counted as a failure (a gate does not
            # pass an unknown), attributed to no PR; nothing is planned for it any more.
            note = (
                "not confirmed: the rerun of the same tree could not run (infra on every "
                "retry), so it counts as a failure; /stackbot retest runs it again"
            )
            for nodeid in rerunnable:
                plan.findings.append(
                    Finding(config, nodeid, NEW, pr=None, evidence={**evidence, "note": note})
                )
            if new_tests:
                _conclude(
                    plan,
                    slots,
                    known,
                    layers,
                    config,
                    sorted(new_tests),
                    list(first.job_ids),
                    bisect,
                    target_pr,
                )
            return
        plan.open_configs.append(config)
        for nodeid in suspects:
            plan.findings.append(
                Finding(config, nodeid, SUSPECT, evidence={**evidence, "note": "rerun pending"})
            )
        return
    both = list(first.job_ids + rerun.job_ids)
    confirmed = sorted(n for n in rerunnable if rerun.tests.get(n) in FAILING)
    for nodeid in rerunnable:
        if nodeid not in confirmed:
            plan.findings.append(
                Finding(
                    config,
                    nodeid,
                    QUARANTINED if nodeid in quarantined else FLAKY,
                    evidence={
                        "jobs": both,
                        "failed_in": list(first.job_ids[-1:]),
                        "passed_in": list(rerun.job_ids[-1:]),
                    },
                )
            )
    # A quarantined test that failed twice gets more runs of the same tree (up to
    # QUARANTINE_RUNS in all): passing one, the failure is the flake it is quarantined for (not
    # counted); failing every time, it is a deterministic failure and counts like any other (a
    # quarantine never hides one). Five runs: a test flaking 30 % of the time fails all five
    # 0.24 % of the time, where three runs would let it eject 2.7 % of landings.
    # The same holds for a test the repository saw flaky within the window but has not (yet, or
    # any more) quarantined: that evidence says a second failure is as likely a flake as a
    # regression, and one more rerun tells them apart (a flake passes it, a regression fails
    # all five). Its pass is a ``flaky`` finding, evidence towards its quarantine. A test never
    # seen flaky is judged on the one rerun, as before; a new test is never rerun at all.
    held = [n for n in confirmed if n in quarantined or n in seen_flaky]
    for attempt in range(3, QUARANTINE_RUNS + 1):
        if not held:
            break
        extra = slots.outcome(config, None, attempt, CONFIRM)
        if extra is None or extra.state == "pending":
            if extra is None:
                plan.wanted.append(WantedJob(config, CONFIRM, None, attempt))
            plan.open_configs.append(config)
            for nodeid in held:
                why = "quarantined" if nodeid in quarantined else "seen flaky before"
                note = (
                    f"{why}, failed {attempt - 1} times: run {attempt} of at most "
                    f"{QUARANTINE_RUNS} of the same tree is pending"
                )
                plan.findings.append(
                    Finding(config, nodeid, SUSPECT, evidence={"jobs": both, "note": note})
                )
            confirmed = [n for n in confirmed if n not in held]
            break
        if extra.state != "done":
            break  # infra on every retry: no answer, so the failures count
        both = both + list(extra.job_ids)
        for nodeid in list(held):
            if extra.tests.get(nodeid) not in FAILING:
                plan.findings.append(
                    Finding(
                        config,
                        nodeid,
                        QUARANTINED if nodeid in quarantined else FLAKY,
                        evidence={
                            "jobs": both,
                            "failed_in": list(first.job_ids[-1:]),
                            "passed_in": list(extra.job_ids[-1:]),
                        },
                    )
                )
                confirmed.remove(nodeid)
                held.remove(nodeid)
    confirmed = sorted(set(confirmed) | new_tests)
    if confirmed:
        _conclude(plan, slots, known, layers, config, confirmed, both, bisect, target_pr)


def _conclude(
    plan: TreePlan,
    slots: _Slots,
    known: Mapping[tuple[str, Config], Mapping[str, str] | None],
    layers: Sequence[Layer],
    config: Config,
    confirmed: Sequence[str],
    both: list[int],
    bisect: bool,
    target_pr: PrNumber | None,
) -> None:
    """Confirmed failures (and new tests' failures): ``new``, bisected to the PR that
    introduced them where the run bisects."""
    if not bisect or len(layers) <= 1:
        pr = target_pr if not bisect or not layers else layers[-1].pr
        for nodeid in confirmed:
            plan.findings.append(
                Finding(
                    config,
                    nodeid,
                    NEW,
                    pr=pr,
                    evidence={"jobs": both, "fails_at": len(layers), "passes_at": 0},
                )
            )
        return
    _bisect(plan, slots, known, layers, config, confirmed, both)


def _bisect(
    plan: TreePlan,
    slots: _Slots,
    known: Mapping[tuple[str, Config], Mapping[str, str] | None],
    layers: Sequence[Layer],
    config: Config,
    confirmed: Sequence[str],
    confirm_jobs: list[int],
) -> None:
    """Narrow each confirmed failure to the first prefix that fails it."""
    n = len(layers)
    probes: dict[int, _Outcome | None] = {}

    def at(position: int) -> _Outcome | None:
        if position not in probes:
            tree = layers[position - 1].tree
            if (tree, config) in known:
                elsewhere = known[(tree, config)]
                state = "pending" if elsewhere is None else "done"
                probes[position] = _Outcome(state, elsewhere or {}, ())
            elif tree == layers[-1].tree:  # the same tree as the final one: it fails
                probes[position] = _Outcome("done", {nodeid: "failed" for nodeid in confirmed}, ())
            else:
                probes[position] = slots.outcome(config, position, 1, BISECT)
        return probes[position]

    waiting = False
    wanted_positions: set[int] = set()
    for nodeid in confirmed:
        lo, hi, used = 0, n, list(confirm_jobs)
        state = "done"
        while hi - lo > 1:
            mid = (lo + hi) // 2
            probe = at(mid)
            if probe is None:
                wanted_positions.add(mid)
                state = "bisecting"
                break
            used.extend(probe.job_ids)
            if probe.state == "pending":
                state = "bisecting"
                break
            if probe.state == "infra":  # no answer at this prefix: narrow no further
                state = "infra"
                break
            if probe.tests.get(nodeid) in FAILING:
                hi = mid
            else:
                lo = mid
        evidence: dict[str, Any] = {"jobs": sorted(set(used)), "passes_at": lo, "fails_at": hi}
        if state == "bisecting":
            waiting = True
            plan.findings.append(Finding(config, nodeid, BISECTING, evidence=evidence))
        elif state == "infra":
            evidence["note"] = f"bisection stopped: the prefix of {hi - 1} PRs could not be tested"
            plan.findings.append(Finding(config, nodeid, NEW, pr=None, evidence=evidence))
        else:
            plan.findings.append(
                Finding(config, nodeid, NEW, pr=layers[hi - 1].pr, evidence=evidence)
            )
    for position in sorted(wanted_positions):
        plan.wanted.append(WantedJob(config, BISECT, position, 1))
    if waiting:
        plan.open_configs.append(config)
