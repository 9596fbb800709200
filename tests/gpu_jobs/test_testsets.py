"""Test sets from TOML: the built-in ones, and errors naming the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_jobs.checkout import package_dir
from gpu_jobs.spec import ContractError, Shape
from gpu_jobs.testsets import (
    NODE_CHECK_TARGET,
    TestSetError,
    get_test_set,
    load_test_sets,
)


def test_built_in_test_sets_match_the_issue() -> None:
    sets = load_test_sets()
    assert set(sets) == {"amax-group", "blockwise-recipe"}
    amax, blockwise = sets["amax-group"], sets["blockwise-recipe"]
    assert amax.shapes == (Shape(1, 4), Shape(2, 4))
    assert blockwise.shapes == (Shape(1, 4),)
    assert "tests/unit_tests/ssm/test_hybrid_stack_amax_group.py" in amax.megatron_targets
    assert len(amax.megatron_targets) == 5
    assert blockwise.megatron_targets == (
        "tests/unit_tests/determinism/correctness/test_fp8_determinism.py"
        "::test_blockwise_recipe_guards_zero_backward_blocks",
    )


def test_reference_targets_and_the_node_check_exist_in_the_package() -> None:
    for test_set in load_test_sets().values():
        for target in test_set.reference_targets:
            assert (package_dir() / target).is_file(), target
    assert (package_dir() / NODE_CHECK_TARGET).is_file()


def test_job_spec_from_a_test_set() -> None:
    spec = get_test_set("amax-group").job_spec(job_id="j", shape="2x4", checkout="/tmp")
    assert spec.targets == get_test_set("amax-group").megatron_targets
    assert spec.timeout_s == 1800 and not spec.reference
    with pytest.raises(ContractError) as caught:
        get_test_set("blockwise-recipe").job_spec(job_id="j", shape="2x4", checkout="/tmp")
    assert caught.value.field == "shape" and "runs on 1x4" in str(caught.value)


def test_an_unknown_test_set_is_named() -> None:
    with pytest.raises(ContractError) as caught:
        get_test_set("amax-groups")
    assert caught.value.field == "test_set"
    assert "amax-group, blockwise-recipe" in str(caught.value)


GOOD = """
[test_sets.mine]
shapes = ["1x2"]
megatron_targets = ["tests/a.py"]
"""


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (GOOD.replace('"1x2"', '"1by2"'), "test_sets.mine.shapes[0]"),
        (GOOD.replace('shapes = ["1x2"]', "shapes = []"), "test_sets.mine.shapes"),
        (GOOD.replace('megatron_targets = ["tests/a.py"]', ""), "test_sets.mine.megatron_targets"),
        (GOOD + "timeout_s = -5\n", "test_sets.mine.timeout_s"),
        (GOOD + "timout_s = 5\n", "test_sets.mine.timout_s"),
        (GOOD + "env = { A = 1 }\n", "test_sets.mine.env"),
        ('schema_version = "2.0"\n' + GOOD, "schema_version"),
        ("[sets.mine]\n", "test_sets"),
        ("test_sets = [", "<toml>"),
        (GOOD + 'markers = ""\n', "test_sets.mine.markers"),
        (GOOD + 'tolerated_markers = ["not-a-marker"]\n', "test_sets.mine.tolerated_markers"),
        (GOOD + 'min_world_size = { "tests/a.py" = 0 }\n', "test_sets.mine.min_world_size"),
        (
            GOOD + 'min_world_size = { "tests/b.py" = 8 }\n',
            "test_sets.mine.min_world_size.tests/b.py",
        ),
    ],
)
def test_bad_test_set_files_name_the_file_and_field(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "sets.toml"
    path.write_text(text)
    with pytest.raises(TestSetError) as caught:
        load_test_sets(path)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{path}: {field}: ")


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(TestSetError, match="cannot be read"):
        load_test_sets(tmp_path / "nope.toml")


def test_a_custom_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "sets.toml"
    path.write_text(GOOD + 'env = { A = "1" }\nsetup_commands = ["true"]\n')
    mine = load_test_sets(path)["mine"]
    assert mine.env == {"A": "1"} and mine.setup_commands == ("true",)


def test_megatron_conventions_in_a_test_set_reach_the_job_spec(tmp_path: Path) -> None:
    path = tmp_path / "sets.toml"
    path.write_text(
        GOOD
        + 'markers = "not internal"\n'
        + 'tolerated_markers = ["flaky", "flaky_in_dev"]\n'
        + 'min_world_size = { "tests/a.py::test_tp8" = 8 }\n'
        + 'env = { NEMO_TEST_DATA_ROOT = "/lustre/TestData", HF_HUB_OFFLINE = "1" }\n'
    )
    mine = load_test_sets(path)["mine"]
    spec = mine.job_spec(job_id="j", shape="1x2", checkout="/tree")
    assert spec.markers == "not internal"
    assert spec.tolerated_markers == ("flaky", "flaky_in_dev")
    assert spec.min_world_size == {"tests/a.py::test_tp8": 8}
    assert spec.env["NEMO_TEST_DATA_ROOT"] == "/lustre/TestData"
    assert mine.conventions() == {
        "markers": "not internal",
        "tolerated_markers": ["flaky", "flaky_in_dev"],
        "min_world_size": {"tests/a.py::test_tp8": 8},
    }


def test_the_built_in_test_sets_follow_megatrons_conventions() -> None:
    for test_set in load_test_sets().values():
        assert test_set.markers == "not internal"
        assert set(test_set.tolerated_markers) == {"flaky", "flaky_in_dev"}
        assert test_set.env["HF_HUB_OFFLINE"] == "1"
