"""Megatron-LM's test conventions through ``python -m gpu_jobs run`` with real torchrun (gloo,
CPU) on a synthetic Megatron-like tree: pytest's collection and usage errors reported with
their cause, marker selection and tolerance, and targets that need more ranks than the shape.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_jobs.result import JobResult
from tests.gpu_jobs.megatron_like import megatron_tree
from tests.gpu_jobs.throwaway import result_of, run_cli

pytestmark = pytest.mark.torchrun

UNIT = "tests/unit_tests"


def run_on(tree: Path, out: Path, *targets: str, shape: str = "1x2", extra: tuple[str, ...] = ()):
    args = ["run", "--checkout", str(tree), "--shape", shape, "--device", "cpu"]
    args += ["--no-node-check", "--out", str(out), *extra]
    for target in targets:
        args += ["--target", target]
    done = run_cli(*args)
    return done, result_of(out)


def test_a_conftest_that_cannot_be_imported_is_an_error_of_the_tree_naming_the_module(
    tmp_path: Path,
) -> None:
    tree = megatron_tree(tmp_path / "tree", training=False)
    done, result = run_on(tree, tmp_path / "out", f"{UNIT}/test_conventions.py")
    assert done.returncode == 1
    assert result.status == "error" and result.error_of == "tree", result.message
    assert "No module named 'megatron.training'" in result.message
    assert f"while importing {UNIT}/conftest.py" in result.message
    assert "pytest exit 4, usage error, before any result" in result.message
    # The lines a user reads to fix it, from the rank's own output.
    assert f"ImportError while loading conftest '{UNIT}/conftest.py'." in result.cause
    assert str(tmp_path) not in result.cause  # the node's paths stay on the node
    assert "E   ModuleNotFoundError: No module named 'megatron.training'" in result.cause
    # What the runner printed says it too, not just "rank 0 crashed (exit code 4)".
    assert "No module named 'megatron.training'" in done.stdout


def test_a_test_file_that_cannot_be_collected_names_the_file_and_the_error(
    tmp_path: Path,
) -> None:
    tree = megatron_tree(tmp_path / "tree", training=True)
    _done, result = run_on(
        tree, tmp_path / "out", f"{UNIT}/test_uncollectable.py", f"{UNIT}/test_ordinary.py"
    )
    assert result.status == "error" and result.error_of == "tree", result.message
    assert (
        "No module named 'megatron.legacy_fused_kernels' while collecting "
        f"{UNIT}/test_uncollectable.py" in result.message
    )
    assert "pytest exit 2, collection errors" in result.message


def test_a_marker_expression_pytest_cannot_parse_is_a_usage_error_quoting_pytest(
    tmp_path: Path,
) -> None:
    tree = megatron_tree(tmp_path / "tree", training=True)
    _done, result = run_on(
        tree, tmp_path / "out", f"{UNIT}/test_conventions.py", extra=("--markers", "not (")
    )
    assert result.status == "error" and result.error_of == "tree", result.message
    assert "Wrong expression passed to '-m'" in result.message
    assert "usage error" in result.message


def test_markers_select_and_a_flaky_marked_failure_is_tolerated(tmp_path: Path) -> None:
    tree = megatron_tree(tmp_path / "tree", training=True)
    target = f"{UNIT}/test_conventions.py"
    extra = ("--markers", "not internal", "--tolerate", "flaky", "--tolerate", "flaky_in_dev")
    done, result = run_on(tree, tmp_path / "out", target, extra=extra)
    assert done.returncode == 0, result.message
    assert result.status == "passed"
    outcomes = result.outcomes()
    assert f"{target}::test_internal_needs_nvidia_resources" not in outcomes  # deselected
    assert outcomes == {f"{target}::test_plain": "passed", f"{target}::test_flaky_in_dev": "flaky"}
    assert (result.counts.passed, result.counts.flaky, result.counts.failed) == (1, 1, 0)
    flaky = next(t for t in result.tests if t.outcome == "flaky")
    assert flaky.message.startswith("tolerated: marked flaky, flaky_in_dev (was failed)")
    assert "rank 1 loses the race today" in flaky.message
    assert "1 test marked flaky, flaky_in_dev failed and tolerated (flaky)" in result.message

    # Without the conventions the same tree fails: the internal test runs, the flaky one counts.
    _, plain = run_on(tree, tmp_path / "plain", target)
    assert plain.status == "failed"
    assert plain.outcomes()[f"{target}::test_flaky_in_dev"] == "failed"
    assert plain.outcomes()[f"{target}::test_internal_needs_nvidia_resources"] == "failed"


def test_markers_that_deselect_everything_say_so(tmp_path: Path) -> None:
    tree = megatron_tree(tmp_path / "tree", training=True)
    target = f"{UNIT}/test_conventions.py"
    _, result = run_on(tree, tmp_path / "out", target, extra=("--markers", "internal and flaky"))
    assert result.status == "error" and result.error_of == "tree"
    assert "with -m 'internal and flaky'" in result.message
    assert "3 deselected" in result.message


def test_a_target_needing_four_ranks_run_on_two_is_reported_as_such(tmp_path: Path) -> None:
    tree = megatron_tree(tmp_path / "tree", training=True)
    target = f"{UNIT}/test_four_ranks.py"
    needs = ("--min-world-size", f"{target}=4")
    _done, result = run_on(tree, tmp_path / "out", target, extra=needs)
    assert result.status == "error", result.message
    assert result.error_of == "configuration"  # not judged: never the tree's failure
    assert result.message == (
        f"{target} needs 4 ranks and ran on 2 (shape 1x2): 2 of its tests failed or errored "
        "and are not judged; run it on a shape of at least 4 ranks"
    )
    judged = {t.nodeid: t for t in result.tests}
    assert judged[f"{target}::test_runs_anywhere"].outcome == "passed"
    parallel = judged[f"{target}::test_tensor_parallel_four"]
    assert parallel.outcome == "error"
    assert parallel.message.startswith(f"not judged: {target} needs 4 ranks, this job has 2")
    assert "does not divide world size 2" in parallel.message

    # An ordinary failure beside it still makes the job failed, naming both.
    mixed = run_on(tree, tmp_path / "mixed", target, f"{UNIT}/test_ordinary.py", extra=needs)[1]
    assert mixed.status == "failed"
    assert f"first: {UNIT}/test_ordinary.py::test_wrong" in mixed.message
    assert f"{target} needs 4 ranks and ran on 2" in mixed.message

    # Without the setting, the same failures are ordinary ones.
    plain = run_on(tree, tmp_path / "plain", target)[1]
    assert plain.status == "failed" and "needs 4 ranks" not in plain.message


def test_the_cause_survives_the_reader_stackbot_uses(tmp_path: Path) -> None:
    tree = megatron_tree(tmp_path / "tree", training=False)
    _, result = run_on(tree, tmp_path / "out", f"{UNIT}/test_conventions.py")
    stored = JobResult.from_stored(result.to_dict())
    assert stored.cause == result.cause and stored.error_of == "tree"
    assert "megatron.training" in stored.cause
