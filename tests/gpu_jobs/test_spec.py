"""The JSON contract: round trips, and errors that name the field at fault."""

from __future__ import annotations

import json

import pytest

from gpu_jobs.executors.base import JobHandle
from gpu_jobs.spec import (
    ContractError,
    Counts,
    Durations,
    JobResult,
    JobSpec,
    LauncherOptions,
    Shape,
    TestResult,
)


def full_spec() -> JobSpec:
    return JobSpec(
        job_id="run-17.amax-group.2x4",
        test_set="amax-group",
        targets=("tests/unit_tests/test_amax_reduction_group.py", "tests/x.py::TestA::test_b"),
        shape=Shape(2, 4),
        repo_url="https://github.com/NVIDIA/Megatron-LM.git",
        commit="77391e7" + "0" * 33,
        timeout_s=1800.0,
        env={"NVTE_FLASH_ATTN": "0"},
        launcher=LauncherOptions(
            master_port=29600,
            backend="nccl",
            device="cuda",
            torchrun_args=("--rdzv-conf=timeout=900",),
            pytest_args=("-x",),
            hang_grace_s=60.0,
        ),
        node_check=True,
        setup_commands=("pip install -e .",),
        container_image="nvcr.io/nvidia/pytorch:25.01-py3",
    )


def full_result() -> JobResult:
    return JobResult(
        job_id="run-17.amax-group.2x4",
        status="failed",
        message="1 of 2 tests failed",
        test_set="amax-group",
        shape="2x4",
        commit="a" * 40,
        counts=Counts(passed=1, failed=1),
        tests=(
            TestResult("t.py::test_a", "passed", 0.5, dict.fromkeys(range(8), "passed")),
            TestResult("t.py::test_b", "failed", 1.25, {0: "failed", 1: "passed"}, "boom"),
        ),
        failed_ranks=(0,),
        crashed_ranks=(5,),
        hung_ranks=(6, 7),
        missing_targets=("tests/gone.py",),
        node_check="passed",
        durations=Durations(1.0, 2.0, 3.0, 6.0),
        nodes=("n1", "n2"),
        logs={"runner-node0": "runner-node0.log"},
        started_at="2026-01-01T00:00:00+00:00",
        finished_at="2026-01-01T00:01:00+00:00",
    )


def test_spec_and_result_round_trip_through_json() -> None:
    spec, result = full_spec(), full_result()
    assert JobSpec.from_json(spec.to_json()) == spec
    assert JobResult.from_json(result.to_json()) == result
    assert json.loads(result.to_json())["tests"][1]["ranks"] == {"0": "failed", "1": "passed"}


@pytest.mark.parametrize("text", ["2y4", "0x4", "1x0", "x4", "1x65", ""])
def test_bad_shapes_are_refused_naming_the_field(text: str) -> None:
    with pytest.raises(ContractError) as caught:
        Shape.parse(text)
    assert caught.value.field == "shape"


def test_shape_parses_and_prints() -> None:
    shape = Shape.parse(" 2x4 ")
    assert (shape.nodes, shape.gpus_per_node, shape.world_size, str(shape)) == (2, 4, 8, "2x4")


def _spec_dict(**changes: object) -> dict[str, object]:
    data = full_spec().to_dict()
    data.update(changes)
    return data


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"job_id": "../etc"}, "job_id"),
        ({"job_id": None}, "job_id"),
        ({"commit": "not-hex"}, "commit"),
        ({"commit": None}, "commit"),  # repo_url without commit
        ({"repo_url": None}, "repo_url"),  # neither a repository nor a checkout
        ({"shape": "4"}, "shape"),
        ({"targets": []}, "targets"),
        ({"targets": "tests/x.py"}, "targets"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"timeout_s": "long"}, "timeout_s"),
        ({"env": {"BAD NAME": "1"}}, "env.BAD NAME"),
        ({"launcher": {"backend": "mpi"}}, "launcher.backend"),
        ({"launcher": {"master_port": 70000}}, "launcher.master_port"),
        ({"launcher": {"devcie": "cpu"}}, "launcher.devcie"),
        ({"tagrets": ["x"]}, "tagrets"),
        ({"schema_version": "2.0"}, "schema_version"),
        ({"schema_version": "one"}, "schema_version"),
        ({"node_check": "yes"}, "node_check"),
        ({"markers": "  "}, "markers"),
        ({"tolerated_markers": ["flaky in dev"]}, "tolerated_markers"),
        ({"min_world_size": {"tests/x.py": 0}}, "min_world_size"),
        ({"min_world_size": {"tests/x.py": "8"}}, "min_world_size"),
    ],
)
def test_bad_specs_are_refused_naming_the_field(changes: dict[str, object], field: str) -> None:
    with pytest.raises(ContractError) as caught:
        JobSpec.from_dict(_spec_dict(**changes))
    assert caught.value.field == field
    assert field in str(caught.value)


def test_a_newer_minor_version_may_carry_fields_this_node_does_not_know() -> None:
    spec = JobSpec.from_dict(_spec_dict(schema_version="1.7", priority="high"))
    assert spec.job_id == full_spec().job_id


def test_invalid_json_is_refused_clearly() -> None:
    with pytest.raises(ContractError, match="not valid JSON"):
        JobSpec.from_json("{")


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"status": "green"}, "status"),
        ({"tests": [{"nodeid": "a", "outcome": "weird"}]}, "tests[0].outcome"),
        (
            {"tests": [{"nodeid": "a", "outcome": "passed", "ranks": {"r0": "passed"}}]},
            "tests[0].ranks",
        ),
        ({"counts": {"passed": "3"}}, "counts.passed"),
        ({"schema_version": "3.1"}, "schema_version"),
        ({"failed_ranks": ["0"]}, "failed_ranks"),
    ],
)
def test_bad_results_are_refused_naming_the_field(changes: dict[str, object], field: str) -> None:
    data = full_result().to_dict()
    data.update(changes)
    with pytest.raises(ContractError) as caught:
        JobResult.from_dict(data)
    assert caught.value.field == field


def test_job_handles_survive_a_string_round_trip() -> None:
    handle = JobHandle("slurm", "job-1", "/shared/jobs/job-1", {"slurm_job_id": "42"})
    assert JobHandle.from_str(handle.to_str()) == handle
    for damaged in ("slurm:{", "pbs:{}", 'local:{"out_dir": "/x"}'):
        with pytest.raises(ContractError):
            JobHandle.from_str(damaged)


def test_a_stored_result_may_be_partial_but_a_nodes_result_may_not() -> None:
    stored = {
        "status": "failed",
        "tests": [
            {"nodeid": "t.py::a", "outcome": "passed"},
            {"nodeid": "t.py::b", "outcome": "passed"},  # rank 0
            {"nodeid": "t.py::b", "outcome": "failed"},  # rank 1
        ],
        "note": "written by hand",
    }
    result = JobResult.from_stored(stored)
    assert (result.job_id, result.status) == ("", "failed")
    assert result.outcomes() == {"t.py::a": "passed", "t.py::b": "failed"}
    assert result.counts == Counts(passed=1, failed=1)  # no counts given: the tests, once each
    with pytest.raises(ContractError) as caught:
        JobResult.from_dict(stored)
    assert caught.value.field == "schema_version"
    assert JobResult.from_stored(full_result().to_dict()) == full_result()


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"status": "passed", "counts": {"passed": -1}}, "counts.passed"),
        ({"status": "passed", "counts": [1]}, "counts"),
        ({"status": "passed", "tests": [{"outcome": "passed"}]}, "tests[0].nodeid"),
        ({"status": "passed", "schema_version": "2.0"}, "schema_version"),
        ({"tests": []}, "status"),
    ],
)
def test_a_stored_result_still_has_the_contracts_shape(data: object, field: str) -> None:
    with pytest.raises(ContractError) as caught:
        JobResult.from_stored(data)
    assert caught.value.field == field


def test_the_conventions_round_trip_and_say_which_targets_lack_ranks() -> None:
    spec = JobSpec.from_dict(
        _spec_dict(
            shape="1x4",
            markers="not internal",
            tolerated_markers=["flaky", "flaky_in_dev"],
            min_world_size={"tests/unit_tests/test_parallel_state.py": 8, "tests/small": 2},
        )
    )
    assert JobSpec.from_json(spec.to_json()) == spec
    state = "tests/unit_tests/test_parallel_state.py"
    assert spec.needed_world_size(f"{state}::test_x[tp-pp]") == (state, 8)
    assert spec.needed_world_size(f"{state}x.py::test_x") is None  # another file
    assert spec.needed_world_size("tests/small/test_a.py::test_b") is None  # 2 <= 4 ranks
