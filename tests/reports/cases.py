"""Report views used by the golden tests and the publishing tests: stored state as a user sees it."""

from __future__ import annotations

from dataclasses import replace

from stackbot.domain.comparison import Counts, TestOutcomes, compare_with_main
from stackbot.domain.report_view import (
    AllowlistView,
    ApprovalView,
    IntegrationView,
    PrRef,
    PrReportView,
    ReusedFrom,
    StackView,
    StepView,
    TestRow,
)
from stackbot.domain.retries import Attempt

ALLOWLIST = "tools/process_group_usage_allowlist.json"
MAIN = "77391e7f00000000000000000000000000000000"
HEAD = "be10fd5c0ffee0000000000000000000000000aa"
OLD_HEAD = "1dd9473aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
STACK_COMMIT = "5ac0ffe100000000000000000000000000000000"
SERIES_COMMIT = "5e71e5c200000000000000000000000000000000"
URL = "http://stackbot.example:8000"

AMAX = "tests/unit_tests/transformer/test_amax_group.py"


def amax_tests(passing: int, failing: int = 0, *, prefix: str = "test_case") -> dict[str, str]:
    tests = {f"{AMAX}::{prefix}_{i:02d}": "passed" for i in range(passing)}
    tests.update({f"{AMAX}::{prefix}_{i:02d}": "failed" for i in range(passing, passing + failing)})
    return tests


def outcomes(tests: dict[str, str], status: str = "passed") -> TestOutcomes:
    return TestOutcomes(status=status, counts=Counts.of_tests(tests), tests=tests)


def approved_clean() -> PrReportView:
    """A vetted PR in the middle of a stack: clean stack merge, tests better than main."""
    integration = outcomes(amax_tests(23))
    main = outcomes(amax_tests(14, 9), "failed")
    blockwise = outcomes(
        {
            f"tests/unit_tests/fp8/test_blockwise.py::test_{n}": "passed"
            for n in ("zero_block", "edge_block", "e5m2")
        }
    )
    return PrReportView(
        repo="NVIDIA/Megatron-LM",
        pr=PrRef(8035, "Pass the owner's collection to FP8/FP4 contexts"),
        head_sha=HEAD,
        approval=ApprovalView("approved", by="phlip"),
        stack=StackView(
            series_key="#6307",
            parents=(PrRef(8034, "Add amax_reduction_group"),),
            children=(
                PrRef(8748, "Pass collections to linears", draft=True),
                PrRef(8750, "Old attempt", state="closed"),
            ),
        ),
        stack_integration=IntegrationView(
            kind="stack",
            status="resolved",
            base_ref="main",
            base_sha=MAIN,
            commit=STACK_COMMIT,
            steps=(
                StepView(8034, "clean"),
                StepView(
                    8035,
                    "resolved",
                    resolved_files=(ALLOWLIST,),
                    resolution="the allowlist was regenerated on the merged tree",
                ),
            ),
            url=f"{URL}/runs/41",
        ),
        allowlist=AllowlistView(
            ALLOWLIST,
            total_before=195,
            total_after=194,
            stale_dropped=(
                "megatron/core/pipeline_parallel/schedules.py:forward_step_calc_loss:accessor:parallel_state.get_context_parallel_world_size",
            ),
        ),
        tests=(
            TestRow(
                "amax-group",
                "1x4",
                "passed",
                compare_with_main(integration, main),
                url=f"{URL}/jobs/7",
            ),
            TestRow(
                "amax-group",
                "2x4",
                "passed",
                compare_with_main(integration, main),
                url=f"{URL}/jobs/8",
            ),
            TestRow(
                "blockwise-recipe",
                "1x4",
                "passed",
                compare_with_main(blockwise, None),
                reused_from=ReusedFrom(39, 5),
            ),
        ),
        tested_commit=STACK_COMMIT,
        main_sha=MAIN,
        series_integration=IntegrationView(
            kind="series",
            status="clean",
            base_ref="main",
            base_sha=MAIN,
            commit=SERIES_COMMIT,
            steps=(StepView(8034, "clean"), StepView(8035, "clean"), StepView(8748, "clean")),
            url=f"{URL}/runs/42",
        ),
        series_tests=(
            TestRow(
                "amax-group",
                "2x4",
                "failed",
                compare_with_main(
                    outcomes({**amax_tests(23), f"{AMAX}::test_linears": "failed"}, "failed"), main
                ),
                url=f"{URL}/jobs/9",
            ),
        ),
        series_tested_commit=SERIES_COMMIT,
        url=f"{URL}/pulls/8035",
    )


def waiting_after_push() -> PrReportView:
    """A push after an approval: the old approval does not carry over, nothing runs yet."""
    return PrReportView(
        repo="NVIDIA/Megatron-LM",
        pr=PrRef(8035, "Pass the owner's collection to FP8/FP4 contexts"),
        head_sha=HEAD,
        approval=ApprovalView("waiting", earlier_sha=OLD_HEAD),
        stack=StackView(series_key="#6307", parents=(PrRef(8034),)),
        url=f"{URL}/pulls/8035",
    )


def carried_after_restack() -> PrReportView:
    """A restack kept the PR's own patch: the vetter's approval of the old head carried."""
    return PrReportView(
        repo="NVIDIA/Megatron-LM",
        pr=PrRef(8035, "Pass the owner's collection to FP8/FP4 contexts"),
        head_sha=HEAD,
        approval=ApprovalView("approved", by="vetter-v", carried_from=OLD_HEAD),
        stack=StackView(series_key="#6307", parents=(PrRef(8034),)),
        url=f"{URL}/pulls/8035",
    )


def series_conflict() -> PrReportView:
    """A trusted author's PR whose series run hits a real conflict; tests run on the stack."""
    steps = [StepView(n, "clean") for n in range(8020, 8030)]
    steps.append(
        StepView(
            8748,
            "conflict",
            conflicting_paths=(
                "megatron/core/transformer/multi_token_prediction.py",
                "megatron/core/models/T5/t5_model.py",
            ),
            conflicts_with=(8035, 6293),
        )
    )
    steps += [StepView(n, "resolved", resolved_files=(ALLOWLIST,)) for n in (8752, 8753)]
    steps += [
        StepView(n, "skipped", skipped_reason="it depends on #8748, which conflicts")
        for n in range(8760, 8770)
    ]
    integration = outcomes({**amax_tests(20, 1), f"{AMAX}::test_new_mtp": "failed"}, "failed")
    main = outcomes(amax_tests(21), "passed")
    return PrReportView(
        repo="NVIDIA/Megatron-LM",
        pr=PrRef(8748, "Pass collections to linears"),
        head_sha=HEAD,
        approval=ApprovalView("trusted", by="connor"),
        stack=StackView(
            series_key="#6307",
            parents=(PrRef(8035), PrRef(8017)),
            problems=("#8017 is superseded by #8893; its children still depend on it",),
        ),
        stack_integration=IntegrationView(
            "stack", "clean", "main", MAIN, STACK_COMMIT, tuple(steps[:3])
        ),
        series_integration=IntegrationView(
            "series", "conflict", "main", MAIN, None, tuple(steps), url=f"{URL}/runs/42"
        ),
        allowlist=AllowlistView(
            ALLOWLIST,
            total_before=194,
            total_after=196,
            new_reads=(
                "megatron/core/transformer/multi_token_prediction.py:MultiTokenPredictionLayer.__init__:accessor:parallel_state.get_tensor_model_parallel_group",
                "megatron/core/transformer/multi_token_prediction.py:MultiTokenPredictionLayer.__init__:accessor:parallel_state.get_context_parallel_group",
            ),
            unparsed=("megatron/core/broken_module.py",),
        ),
        tests=(
            TestRow("amax-group", "1x4", "failed", compare_with_main(integration, main)),
            TestRow("amax-group", "2x4", "running"),
            TestRow("blockwise-recipe", "1x4", "queued"),
        ),
        tested_commit=STACK_COMMIT,
        main_sha=MAIN,
    )


def regressions_and_job_trouble() -> PrReportView:
    """Many newly failing tests (the list is cut), a timed-out job, an infra failure."""
    main = outcomes(amax_tests(30), "passed")
    integration = outcomes(amax_tests(16, 14), "failed")
    return PrReportView(
        repo="NVIDIA/Megatron-LM",
        pr=PrRef(8034, "Add amax_reduction_group"),
        head_sha=HEAD,
        approval=ApprovalView("approved", by="dima"),
        stack_integration=IntegrationView(
            "stack", "clean", "main", MAIN, STACK_COMMIT, (StepView(8034, "clean"),)
        ),
        tests=(
            TestRow("amax-group", "1x4", "failed", compare_with_main(integration, main)),
            TestRow("amax-group", "2x4", "timeout", error="no result after 60 minutes"),
            TestRow("blockwise-recipe", "1x4", "infra", error="node gpu-07 lost"),
        ),
        tested_commit=STACK_COMMIT,
        main_sha=MAIN,
    )


def retried_after_infra() -> PrReportView:
    """Issue 13's infra retries: a configuration that passed on a retry after a rank was lost
    on another node, one whose every attempt failed for the machine, one that passed at once."""
    main = outcomes(amax_tests(14))
    lost = (
        "rank 1 was lost (killed by SIGKILL) after 3 test results; the node failed, not the "
        "tests: none of the 6 test results the ranks wrote are counted"
    )
    node_check = (
        "node 1 failed node_check: node check failed: "
        "tests/node_check/test_nccl.py::test_all_reduce: NCCL error: unhandled system error"
    )
    slurm = (
        "a node failed under the job: the job ended NODE_FAIL (exit 0:0) before any runner "
        "reported; see /var/lib/stackbot/jobs/212/slurm-9912.out"
    )

    def attempt(job_id: int, status: str, node: str, error: str | None = None) -> Attempt:
        return Attempt(job_id, status, node, error, f"{URL}/jobs/{job_id}")

    return PrReportView(
        repo="NVIDIA/Megatron-LM",
        pr=PrRef(8035, "Pass the owner's collection to FP8/FP4 contexts"),
        head_sha=HEAD,
        approval=ApprovalView("approved", by="phlip"),
        stack_integration=IntegrationView(
            "stack", "clean", "main", MAIN, STACK_COMMIT, (StepView(8035, "clean"),)
        ),
        tests=(
            TestRow(
                "amax-group",
                "1x4",
                "passed",
                compare_with_main(outcomes(amax_tests(14)), main),
                url=f"{URL}/jobs/202",
                attempts=(attempt(201, "infra", "gpu-01", lost), attempt(202, "passed", "gpu-02")),
            ),
            TestRow(
                "amax-group",
                "2x4",
                "infra",
                compare_with_main(outcomes({}, "infra"), main),
                url=f"{URL}/jobs/212",
                error=slurm,
                attempts=(
                    attempt(211, "infra", "gpu-03, gpu-04", node_check),
                    attempt(212, "infra", "gpu-05, gpu-06", slurm),
                ),
            ),
            TestRow(
                "blockwise-recipe",
                "1x4",
                "passed",
                compare_with_main(outcomes(amax_tests(3)), outcomes(amax_tests(3))),
                url=f"{URL}/jobs/203",
            ),
        ),
        tested_commit=STACK_COMMIT,
        main_sha=MAIN,
        url=f"{URL}/pulls/8035",
    )


def closed_superseded() -> PrReportView:
    return PrReportView(
        repo="NVIDIA/Megatron-LM",
        pr=PrRef(8035, state="closed", superseded_by=8893),
        head_sha=HEAD,
        approval=ApprovalView("approved", by="phlip"),
        stack=StackView(
            series_key="#6307", parents=(PrRef(8034, state="merged"),), children=(PrRef(8748),)
        ),
    )


def integration_error() -> PrReportView:
    return PrReportView(
        repo="NVIDIA/Megatron-LM",
        pr=PrRef(9001, "Standalone fix"),
        head_sha=HEAD,
        approval=ApprovalView("approved", by="phlip"),
        stack_integration=IntegrationView(
            "stack",
            "error",
            "main",
            MAIN,
            error="the head be10fd5 of #9001 could not be fetched from the fork",
        ),
    )


def passes_with_the_series() -> PrReportView:
    """Issue 24: #8035 (series-first) tested only inside the series tree, which also holds
    #8748 above it: it passes, but its own tree (main + #8034, #8035) was never tested."""
    integration = outcomes(amax_tests(23))
    main = outcomes(amax_tests(14, 9), "failed")
    own_file = "tests/unit_tests/test_schedule_quantization_context.py"
    own_here = outcomes({f"{own_file}::test_{n}": "passed" for n in range(14)})
    own_main = outcomes({f"{own_file}::test_{n}": "passed" for n in range(5)})
    view = approved_clean()
    return replace(
        view,
        tests=(),
        tested_commit=None,
        series_tests=(
            TestRow(
                "amax-group",
                "1x4",
                "passed",
                compare_with_main(integration, main),
                url=f"{URL}/jobs/17",
            ),
            TestRow(
                "own:8035",
                "2x4",
                "passed",
                compare_with_main(own_here, own_main),
                url=f"{URL}/jobs/19",
            ),
        ),
    )


CASES = {
    "passes_with_the_series": passes_with_the_series,
    "approved_clean": approved_clean,
    "waiting_after_push": waiting_after_push,
    "carried_after_restack": carried_after_restack,
    "series_conflict": series_conflict,
    "regressions_and_job_trouble": regressions_and_job_trouble,
    "retried_after_infra": retried_after_infra,
    "closed_superseded": closed_superseded,
    "integration_error": integration_error,
}
