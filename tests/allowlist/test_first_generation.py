"""First generation: a whole-file walk, line-number KEYs, literal prefixes, deduplicated."""

from __future__ import annotations

from stackbot.domain.allowlist import scan_first_generation
from tests.allowlist.scanning import first


def test_bare_name_imported_from_parallel_state() -> None:
    source = """
        from megatron.core.parallel_state import get_tensor_model_parallel_group
        get_tensor_model_parallel_group()
    """
    assert first(source) == ["3:accessor:get_tensor_model_parallel_group"]


def test_bare_name_detail_is_the_alias() -> None:
    source = """
        from megatron.core.parallel_state import get_data_parallel_rank as dp_rank
        dp_rank()
        get_data_parallel_rank()
    """
    assert first(source) == ["3:accessor:dp_rank"]


def test_relative_module_containing_parallel_state_qualifies() -> None:
    source = """
        from ..parallel_state import get_context_parallel_group
        get_context_parallel_group()
    """
    assert first(source) == ["3:accessor:get_context_parallel_group"]


def test_from_dot_import_never_qualifies_for_bare_names() -> None:
    source = """
        from . import get_tensor_model_parallel_group
        from .. import get_data_parallel_group as dp
        get_tensor_model_parallel_group()
        dp()
    """
    assert first(source) == []


def test_modules_without_parallel_state_in_their_name_do_not_qualify() -> None:
    source = """
        from megatron.core.mpu import get_tensor_model_parallel_group
        from megatron.core import get_data_parallel_group
        get_tensor_model_parallel_group()
        get_data_parallel_group()
    """
    assert first(source) == []


def test_bare_name_must_be_an_accessor() -> None:
    source = """
        from megatron.core.parallel_state import get_nccl_options, initialize_model_parallel
        get_nccl_options()
        initialize_model_parallel()
    """
    assert first(source) == []


def test_literal_prefixes_count_whatever_they_are_bound_to() -> None:
    source = """
        import os as ps
        parallel_state.get_tensor_model_parallel_group()
        mpu.get_data_parallel_rank()
        ps.get_pipeline_model_parallel_world_size()
    """
    assert first(source) == [
        "3:accessor:parallel_state.get_tensor_model_parallel_group",
        "4:accessor:mpu.get_data_parallel_rank",
        "5:accessor:ps.get_pipeline_model_parallel_world_size",
    ]


def test_other_prefixes_do_not_count() -> None:
    source = """
        import megatron.core.parallel_state as grid
        grid.get_tensor_model_parallel_group()
        megatron.core.parallel_state.get_tensor_model_parallel_group()
        self.parallel_state.get_tensor_model_parallel_group()
    """
    assert first(source) == []


def test_from_dot_import_parallel_state_counts_through_the_literal_prefix() -> None:
    source = """
        from . import parallel_state
        parallel_state.get_data_parallel_group()
    """
    assert first(source) == ["3:accessor:parallel_state.get_data_parallel_group"]


def test_gloo_and_ranks_are_not_accessors_in_the_first_generation() -> None:
    source = """
        from megatron.core.parallel_state import get_data_parallel_group_gloo
        ps.get_data_parallel_group_gloo()
        ps.get_context_parallel_global_ranks()
        get_data_parallel_group_gloo()
    """
    assert first(source) == []


def test_shim_is_any_call_of_an_attribute_named_use_mpu_process_groups() -> None:
    source = """
        ProcessGroupCollection.use_mpu_process_groups()
        ModelCommProcessGroups.use_mpu_process_groups()
        a.b.use_mpu_process_groups(["tp"])
        factory().use_mpu_process_groups()
        use_mpu_process_groups()
    """
    assert first(source) == [
        "2:shim:use_mpu_process_groups",
        "3:shim:use_mpu_process_groups",
        "4:shim:use_mpu_process_groups",
        "5:shim:use_mpu_process_groups",
    ]


def test_no_scopes_local_values_and_import_positions_do_not_matter() -> None:
    source = """
        def f(ps):
            ps.get_data_parallel_group()
            get_tensor_model_parallel_group()
        def g():
            from megatron.core.parallel_state import get_tensor_model_parallel_group
    """
    assert first(source) == [
        "3:accessor:ps.get_data_parallel_group",
        "4:accessor:get_tensor_model_parallel_group",
    ]


def test_annotations_are_part_of_the_whole_file_walk() -> None:
    source = """
        def f(a: ps.get_data_parallel_group()) -> mpu.get_data_parallel_rank():
            pass
    """
    assert first(source) == [
        "2:accessor:mpu.get_data_parallel_rank",
        "2:accessor:ps.get_data_parallel_group",
    ]


def test_entries_are_deduplicated_per_line_and_sorted_as_strings() -> None:
    source = "\n".join(
        [
            "ps.get_data_parallel_group(); ps.get_data_parallel_group()",
            *["pass"] * 7,
            "ps.get_data_parallel_group()",
            "ps.get_data_parallel_group()",
        ]
    )
    # Lines 1, 9 and 10; "10:" sorts before "9:" as a string.
    assert first(source) == [
        "10:accessor:ps.get_data_parallel_group",
        "1:accessor:ps.get_data_parallel_group",
        "9:accessor:ps.get_data_parallel_group",
    ]


def test_file_that_does_not_parse_is_skipped_but_reported() -> None:
    outcome = scan_first_generation("megatron/core/broken.py", b"ps.get_data_parallel_group(\n")
    assert outcome.entries == ()
    assert outcome.error is not None


def test_bom_file_is_skipped_as_the_first_checker_skips_it() -> None:
    source = b"\xef\xbb\xbfps.get_data_parallel_group()\n"
    outcome = scan_first_generation("megatron/core/bom.py", source)
    assert outcome.entries == ()
    assert outcome.error is not None
