"""The test plan's decisions (stackbot.domain.test_plan), driven to the end by a model of the
trees: layer k of a linear series holds PRs 1..k; an injected failure fails from its layer up;
a flaky one fails on the first run of one tree only; infra answers come from a list of nodes."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest

from stackbot.domain.test_plan import (
    BISECT,
    BISECTING,
    CONFIRM,
    FLAKY,
    NEW,
    PRE_EXISTING,
    QUARANTINED,
    RETRY,
    SUSPECT,
    TREE,
    Config,
    JobFact,
    Layer,
    TreePlan,
    plan_tree,
)
from stackbot.domain.types import PrNumber

AMAX = Config("amax-group", "1x4")
RECIPE = Config("blockwise-recipe", "1x4")


@dataclass
class Model:
    prs: int
    fail_at: Mapping[str, int] = field(default_factory=dict)  # nodeid -> first failing layer
    flaky_at: Mapping[str, int] = field(default_factory=dict)  # fails on a tree's 1st run
    main_fails: frozenset[str] = frozenset()
    added: frozenset[str] = frozenset()  # tests of fail_at/flaky_at that main does not have
    quarantined: frozenset[str] = frozenset()
    seen_flaky: frozenset[str] = frozenset()  # recorded flaky within the window
    flaky_runs: Mapping[str, int] = field(default_factory=dict)  # runs of the tree failing it
    run_number: int = 1
    infra_nodes: list[str] = field(default_factory=list)  # the next jobs' nodes fail as infra
    jobs: list[JobFact] = field(default_factory=list)
    runs_per_tree: dict[int, int] = field(default_factory=dict)

    @property
    def layers(self) -> list[Layer]:
        return [Layer(k, PrNumber(k), f"tree-{k}") for k in range(1, self.prs + 1)]

    def tests_at(self, layer: int, first_run: bool) -> dict[str, str]:
        tests = {"test_base": "passed"}
        for nodeid, k in self.fail_at.items():
            if layer >= k:
                tests[nodeid] = "failed"
        for nodeid, k in self.flaky_at.items():
            if layer >= k:
                fails = self.flaky_runs.get(nodeid, 1) >= self.run_number
                tests[nodeid] = "failed" if fails and layer == self.prs else "passed"
        for nodeid in self.main_fails:
            tests[nodeid] = "failed"
        return tests

    def main(self) -> dict[str, str]:
        tests = {"test_base": "passed"}
        tests.update({nodeid: "failed" for nodeid in self.main_fails})
        tests.update({nodeid: "passed" for nodeid in self.flaky_at if nodeid not in self.added})
        tests.update({nodeid: "passed" for nodeid in self.fail_at if nodeid not in self.added})
        return tests

    def run(self, plan: TreePlan) -> None:
        for wanted in plan.wanted:
            layer = wanted.step_position or self.prs
            runs = self.runs_per_tree.get(layer, 0)
            if self.infra_nodes:
                node = self.infra_nodes.pop(0)
                status, tests = "infra", {}
            else:
                node = f"node-{len(self.jobs) % 3}"
                runs += 1
                self.runs_per_tree[layer] = runs
                self.run_number = runs
                tests = self.tests_at(layer, first_run=runs == 1)
                failing = any(o == "failed" for o in tests.values())
                status = "failed" if failing else "passed"
            self.jobs.append(
                JobFact(
                    id=len(self.jobs) + 1,
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

    def settle(self, *, configs: tuple[Config, ...] = (AMAX,), bisect: bool = True) -> TreePlan:
        for _ in range(50):
            plan = plan_tree(
                layers=self.layers,
                configs=configs,
                jobs=self.jobs,
                main={c: self.main() for c in configs},
                bisect=bisect,
                target_pr=PrNumber(self.prs),
                quarantined=self.quarantined,
                seen_flaky=self.seen_flaky,
            )
            if not plan.wanted:
                return plan
            self.run(plan)
        raise AssertionError("the plan never settled")


def _classes(plan: TreePlan) -> dict[str, tuple[str, int | None]]:
    return {f.nodeid: (f.failure_class, f.pr) for f in plan.findings}


def _extra_jobs(model: Model) -> int:
    return sum(1 for job in model.jobs if job.purpose != TREE)


@pytest.mark.parametrize("layer", [1, 2, 25, 37, 49, 50])
def test_a_failure_is_attributed_to_the_layer_that_introduced_it(layer: int) -> None:
    model = Model(prs=50, fail_at={"test_new": layer})
    plan = model.settle()
    assert plan.final
    assert _classes(plan) == {"test_new": (NEW, layer)}
    # One confirming rerun, then at most ceil(log2 50) prefixes.
    assert _extra_jobs(model) <= math.ceil(math.log2(50)) + 1
    finding = plan.findings[0]
    assert (finding.evidence["passes_at"], finding.evidence["fails_at"]) == (layer - 1, layer)


def test_two_failures_at_different_layers_are_each_attributed() -> None:
    model = Model(prs=50, fail_at={"test_a": 7, "test_b": 31})
    plan = model.settle()
    assert _classes(plan) == {"test_a": (NEW, 7), "test_b": (NEW, 31)}
    # The two share the probes until their intervals part.
    assert _extra_jobs(model) <= 2 * math.ceil(math.log2(50)) + 1


def test_a_flaky_failure_is_attributed_to_no_pr_with_both_runs_as_evidence() -> None:
    model = Model(prs=50, flaky_at={"test_flaky": 20})
    plan = model.settle()
    assert _classes(plan) == {"test_flaky": (FLAKY, None)}
    finding = plan.findings[0]
    assert finding.evidence["failed_in"] != finding.evidence["passed_in"]
    assert [j.purpose for j in model.jobs] == [TREE, CONFIRM]


def test_a_failure_on_main_too_is_pre_existing_and_costs_no_job() -> None:
    model = Model(prs=10, main_fails=frozenset({"test_old"}))
    plan = model.settle()
    assert _classes(plan) == {"test_old": (PRE_EXISTING, None)}
    assert [j.purpose for j in model.jobs] == [TREE]


def test_infra_is_retried_on_other_nodes_and_never_counted() -> None:
    model = Model(prs=5, fail_at={"test_new": 3}, infra_nodes=["gpu-7"])
    plan = model.settle()
    assert _classes(plan) == {"test_new": (NEW, 3)}
    retry = next(j for j in model.jobs if j.purpose == RETRY)
    assert retry.retry_of == 1
    wanted_retry = plan_tree(
        layers=model.layers,
        configs=[AMAX],
        jobs=model.jobs[:1],
        main={AMAX: model.main()},
        bisect=True,
    ).wanted
    assert wanted_retry[0].excluded_nodes == ("gpu-7",)


def test_infra_every_time_gives_no_result_after_the_retries() -> None:
    model = Model(prs=5, infra_nodes=["a", "b", "c", "d"])
    plan = model.settle()
    assert plan.infra_configs == [AMAX]
    assert plan.findings == []
    assert [j.purpose for j in model.jobs] == [TREE, RETRY, RETRY]


def test_a_stack_run_does_not_bisect_and_names_its_own_pr() -> None:
    model = Model(prs=4, fail_at={"test_new": 2})
    plan = model.settle(bisect=False)
    assert _classes(plan) == {"test_new": (NEW, 4)}
    assert BISECT not in {j.purpose for j in model.jobs}


def test_pending_states_are_reported_while_jobs_run() -> None:
    model = Model(prs=8, fail_at={"test_new": 5})
    first = plan_tree(layers=model.layers, configs=[AMAX], jobs=[], main={}, bisect=True)
    assert [w.purpose for w in first.wanted] == [TREE] and not first.final
    model.run(first)
    second = plan_tree(
        layers=model.layers, configs=[AMAX], jobs=model.jobs, main={AMAX: model.main()}, bisect=True
    )
    assert _classes(second) == {"test_new": (SUSPECT, None)}
    model.run(second)
    third = plan_tree(
        layers=model.layers, configs=[AMAX], jobs=model.jobs, main={AMAX: model.main()}, bisect=True
    )
    assert _classes(third) == {"test_new": (BISECTING, None)}
    assert [w.step_position for w in third.wanted] == [4]


def test_main_still_running_holds_the_classification() -> None:
    model = Model(prs=3, fail_at={"test_new": 1})
    model.run(plan_tree(layers=model.layers, configs=[AMAX], jobs=[], main={}, bisect=True))
    waiting = plan_tree(
        layers=model.layers, configs=[AMAX], jobs=model.jobs, main={AMAX: None}, bisect=True
    )
    assert waiting.wanted == [] and waiting.findings == [] and not waiting.final


def test_known_results_of_identical_trees_cost_no_job() -> None:
    model = Model(prs=16, fail_at={"test_new": 11})
    known = {(f"tree-{k}", AMAX): model.tests_at(k, first_run=True) for k in range(1, 16)}
    for _ in range(10):
        plan = plan_tree(
            layers=model.layers,
            configs=[AMAX],
            jobs=model.jobs,
            main={AMAX: model.main()},
            bisect=True,
            results_by_tree=known,
        )
        if not plan.wanted:
            break
        model.run(plan)
    assert _classes(plan) == {"test_new": (NEW, 11)}
    assert [j.purpose for j in model.jobs] == [TREE, CONFIRM]


def test_a_prefix_running_elsewhere_is_waited_for_not_duplicated() -> None:
    model = Model(prs=8, fail_at={"test_new": 6})
    model.settle()  # the job model answers everything; now replay with a pending tree elsewhere
    jobs = [j for j in model.jobs if j.purpose in (TREE, CONFIRM)]
    plan = plan_tree(
        layers=model.layers,
        configs=[AMAX],
        jobs=jobs,
        main={AMAX: model.main()},
        bisect=True,
        results_by_tree={("tree-4", AMAX): None},
    )
    assert plan.wanted == [] and _classes(plan) == {"test_new": (BISECTING, None)}


def test_each_configuration_is_planned_on_its_own() -> None:
    model = Model(prs=6, fail_at={"test_new": 2})
    plan = model.settle(configs=(AMAX, RECIPE))
    assert sorted((f.config.test_set, f.pr) for f in plan.findings) == [
        ("amax-group", 2),
        ("blockwise-recipe", 2),
    ]


def test_a_rerun_that_is_infra_on_every_retry_ends_as_an_unattributed_failure() -> None:
    # The tree fails test_new; its confirming rerun and both retries land on broken nodes.
    model = Model(prs=5, fail_at={"test_new": 3})
    model.run(plan_tree(layers=model.layers, configs=[AMAX], jobs=[], main={}, bisect=True))
    model.infra_nodes = ["bad-1", "bad-2", "bad-3"]
    plan = model.settle()
    assert [j.purpose for j in model.jobs] == [TREE, CONFIRM, RETRY, RETRY]
    # Final: nothing is waited for or wanted, and the failure counts (attributed to no PR).
    assert plan.final and plan.wanted == []
    assert _classes(plan) == {"test_new": (NEW, None)}
    assert "not confirmed" in plan.findings[0].evidence["note"]
    assert plan.findings[0].evidence["jobs"] == [1, 2, 3, 4]


def test_failing_tests_of_one_configuration_share_every_probe_until_their_answers_differ() -> None:
    # Three tests introduced by one PR cost what one costs: the confirming rerun and the
    # bisection of one interval.
    one = Model(prs=50, fail_at={"test_a": 19})
    one.settle()
    three = Model(prs=50, fail_at={"test_a": 19, "test_b": 19, "test_c": 19})
    plan = three.settle()
    assert {f.pr for f in plan.findings} == {19}
    assert _extra_jobs(three) == _extra_jobs(one) <= math.ceil(math.log2(50)) + 1
    # Two tests of different PRs: the probes before their intervals part are shared, so the
    # pair costs less than two bisections.
    pair = Model(prs=50, fail_at={"test_a": 7, "test_b": 8})
    plan = pair.settle()
    assert _classes(plan) == {"test_a": (NEW, 7), "test_b": (NEW, 8)}
    assert _extra_jobs(pair) <= math.ceil(math.log2(50)) + 2
    probes = [j.step_position for j in pair.jobs if j.purpose == BISECT]
    assert len(probes) == len(set(probes))


def test_a_new_tests_failure_is_never_retried_into_green() -> None:
    # test_added is not on main (main's result lacks it): PR 3 added it, and it fails once
    # only. It is not rerun, so it is never flaky (nor evidence for a quarantine): it is new.
    model = Model(prs=5, flaky_at={"test_added": 3}, added=frozenset({"test_added"}))
    plan = model.settle()
    assert _classes(plan) == {"test_added": (NEW, 5)}
    assert CONFIRM not in [j.purpose for j in model.jobs]
    # The same flake in a test main has is rerun and found flaky.
    old = Model(prs=5, flaky_at={"test_old": 3})
    assert _classes(old.settle()) == {"test_old": (FLAKY, None)}


def test_a_quarantined_tests_flake_is_shown_as_quarantined_not_counted() -> None:
    model = Model(prs=5, flaky_at={"test_q": 2}, quarantined=frozenset({"test_q"}))
    plan = model.settle()
    assert _classes(plan) == {"test_q": (QUARANTINED, None)}
    assert plan.final and [j.purpose for j in model.jobs] == [TREE, CONFIRM]


def test_a_quarantined_test_failing_twice_gets_a_third_run_and_passing_it_is_not_counted() -> None:
    model = Model(
        prs=5,
        flaky_at={"test_q": 2},
        flaky_runs={"test_q": 4},
        quarantined=frozenset({"test_q"}),
    )
    plan = model.settle()
    assert _classes(plan) == {"test_q": (QUARANTINED, None)}
    assert [(j.purpose, j.attempt) for j in model.jobs] == [
        (TREE, 1),
        (CONFIRM, 2),
        (CONFIRM, 3),
        (CONFIRM, 4),
        (CONFIRM, 5),
    ]
    # Without the quarantine, two failures on the same tree are a new failure.
    plain = Model(prs=5, flaky_at={"test_q": 2}, flaky_runs={"test_q": 2})
    assert _classes(plain.settle())["test_q"][0] == NEW


def test_a_test_seen_flaky_before_failing_twice_gets_more_runs_and_passing_one_is_flaky() -> None:
    # Seen flaky within the window, not quarantined (yet): its two failures on one tree are
    # not enough to eject a landing; the third run passes, so it is a flake (evidence for its
    # quarantine), attributed to no PR.
    model = Model(
        prs=5,
        flaky_at={"test_f": 2},
        flaky_runs={"test_f": 2},
        seen_flaky=frozenset({"test_f"}),
    )
    plan = model.settle()
    assert _classes(plan) == {"test_f": (FLAKY, None)}
    [finding] = plan.findings
    assert finding.evidence["failed_in"] == [1] and finding.evidence["passed_in"] == [3]
    assert [(j.purpose, j.attempt) for j in model.jobs] == [(TREE, 1), (CONFIRM, 2), (CONFIRM, 3)]


def test_a_test_seen_flaky_before_that_fails_every_time_is_a_failure() -> None:
    model = Model(prs=8, fail_at={"test_f": 6}, seen_flaky=frozenset({"test_f"}))
    plan = model.settle()
    assert _classes(plan) == {"test_f": (NEW, 6)}
    confirms = [j.attempt for j in model.jobs if j.purpose == CONFIRM]
    assert confirms == [2, 3, 4, 5]


def test_a_quarantined_test_that_fails_every_time_is_a_failure() -> None:
    model = Model(prs=8, fail_at={"test_q": 6}, quarantined=frozenset({"test_q"}))
    plan = model.settle()
    assert _classes(plan) == {"test_q": (NEW, 6)}
