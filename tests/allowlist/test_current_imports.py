"""Current generation: what each kind of import binds, and which resolved names are reads."""

from __future__ import annotations

from tests.allowlist.scanning import accessor, current, shim

TP = "get_tensor_model_parallel_group"
M = "<module>"


def test_import_module_as_alias() -> None:
    source = """
        import megatron.core.parallel_state as ps
        ps.get_tensor_model_parallel_group()
    """
    assert current(source) == [accessor(M, TP)]


def test_from_core_import_parallel_state() -> None:
    source = """
        from megatron.core import parallel_state
        parallel_state.get_data_parallel_rank()
    """
    assert current(source) == [accessor(M, "get_data_parallel_rank")]


def test_from_core_import_mpu_reports_parallel_state_detail() -> None:
    source = """
        from megatron.core import mpu
        mpu.get_pipeline_model_parallel_world_size()
    """
    assert current(source) == [accessor(M, "get_pipeline_model_parallel_world_size")]


def test_from_parallel_state_import_accessor_as_alias_uses_the_real_name() -> None:
    source = """
        from megatron.core.parallel_state import get_expert_model_parallel_group as g
        g()
    """
    assert current(source) == [accessor(M, "get_expert_model_parallel_group")]


def test_from_dot_import_parallel_state() -> None:
    source = """
        from . import parallel_state
        parallel_state.get_context_parallel_group()
    """
    assert current(source) == [accessor(M, "get_context_parallel_group")]


def test_relative_core_modules_resolve_whatever_their_depth() -> None:
    source = """
        from .... import parallel_state as deep
        from ..parallel_state import get_context_parallel_group
        from ... import mpu
        deep.get_data_parallel_group()
        get_context_parallel_group()
        mpu.get_tensor_model_parallel_rank()
    """
    assert current(source) == [
        accessor(M, "get_context_parallel_group"),
        accessor(M, "get_data_parallel_group"),
        accessor(M, "get_tensor_model_parallel_rank"),
    ]


def test_relative_import_of_another_module_drops_the_dots() -> None:
    # `from .mpu import x` is "mpu.x" and `from .other import parallel_state` is
    # "other.parallel_state": neither is megatron.core's.
    source = """
        from .mpu import get_tensor_model_parallel_group
        from .other import parallel_state
        get_tensor_model_parallel_group()
        parallel_state.get_data_parallel_group()
    """
    assert current(source) == []


def test_absolute_import_of_a_top_level_parallel_state_is_not_megatron_core() -> None:
    source = """
        from parallel_state import get_tensor_model_parallel_group
        from process_groups_config import ProcessGroupCollection
        import parallel_state
        get_tensor_model_parallel_group()
        ProcessGroupCollection.use_mpu_process_groups()
        parallel_state.get_data_parallel_group()
    """
    assert current(source) == []


def test_shim_through_relative_process_groups_config() -> None:
    source = """
        from .process_groups_config import ProcessGroupCollection
        ProcessGroupCollection.use_mpu_process_groups()
    """
    assert current(source) == [shim(M)]


def test_shim_through_absolute_import_and_module_alias() -> None:
    source = """
        from megatron.core.process_groups_config import ProcessGroupCollection
        from megatron.core import process_groups_config as pgc
        ProcessGroupCollection.use_mpu_process_groups(required_pgs=["tp"])
        pgc.ProcessGroupCollection.use_mpu_process_groups()
    """
    assert current(source) == [shim(M), shim(M)]


def test_shim_needs_exactly_process_groups_config() -> None:
    source = """
        from .other import ProcessGroupCollection
        from megatron.core.process_groups_config import ModelCommProcessGroups
        ProcessGroupCollection.use_mpu_process_groups()
        ModelCommProcessGroups.use_mpu_process_groups()
    """
    assert current(source) == []


def test_spelled_out_call_counts_without_any_import() -> None:
    source = """
        megatron.core.parallel_state.get_tensor_model_parallel_group()
        megatron.core.mpu.get_data_parallel_world_size()
        megatron.core.process_groups_config.ProcessGroupCollection.use_mpu_process_groups()
    """
    assert current(source) == [
        accessor(M, "get_data_parallel_world_size"),
        accessor(M, TP),
        shim(M),
    ]


def test_import_of_dotted_module_binds_its_first_name() -> None:
    source = """
        import megatron.core.parallel_state
        megatron.core.parallel_state.get_tensor_model_parallel_group()
        parallel_state.get_tensor_model_parallel_group()
    """
    # `import x.y` binds only `x`; the unbound `parallel_state` stands for itself.
    assert current(source) == [accessor(M, TP)]


def test_from_megatron_import_core() -> None:
    source = """
        from megatron import core
        core.parallel_state.get_tensor_model_parallel_group()
    """
    assert current(source) == [accessor(M, TP)]


def test_unimported_parallel_state_name_is_not_a_read() -> None:
    source = """
        parallel_state.get_tensor_model_parallel_group()
        ps.get_tensor_model_parallel_group()
        mpu.get_data_parallel_rank()
    """
    assert current(source) == []


def test_other_module_under_a_familiar_alias_is_not_a_read() -> None:
    source = """
        import os as ps
        ps.get_tensor_model_parallel_group()
    """
    assert current(source) == []


def test_excluded_and_non_accessor_names_are_not_reads() -> None:
    source = """
        from megatron.core import parallel_state as ps
        ps.get_nccl_options()
        ps.get_all_ranks()
        ps.get_global_memory_buffer()
        ps.get_virtual_pipeline_model_parallel_rank()
        ps.get_virtual_pipeline_model_parallel_world_size()
        ps.initialize_model_parallel()
        ps.is_pipeline_first_stage()
    """
    assert current(source) == []


def test_gloo_and_ranks_accessors_count_in_the_current_generation() -> None:
    source = """
        from megatron.core import parallel_state as ps
        ps.get_data_parallel_group_gloo()
        ps.get_context_parallel_global_ranks()
    """
    assert current(source) == [
        accessor(M, "get_context_parallel_global_ranks"),
        accessor(M, "get_data_parallel_group_gloo"),
    ]


def test_reference_without_a_call_is_not_a_read() -> None:
    source = """
        from megatron.core import parallel_state as ps
        callback = ps.get_tensor_model_parallel_group
        group_of = getattr(ps, "get_tensor_model_parallel_group")
    """
    assert current(source) == []


def test_aliases_made_by_assignment_are_not_seen() -> None:
    source = """
        from megatron.core import parallel_state
        grid = parallel_state
        grid.get_tensor_model_parallel_group()
    """
    assert current(source) == []


def test_call_roots_that_are_not_plain_names_are_not_reads() -> None:
    source = """
        from megatron.core import parallel_state as ps
        self.ps.get_tensor_model_parallel_group()
        super().get_tensor_model_parallel_group()
        modules[0].get_tensor_model_parallel_group()
    """
    assert current(source) == []


def test_each_call_counts_including_nested_and_chained_calls() -> None:
    source = """
        from megatron.core import parallel_state as ps
        ps.get_tensor_model_parallel_group()
        ps.get_tensor_model_parallel_group()
        reduce(x, group=ps.get_tensor_model_parallel_group())
        ps.get_data_parallel_group().size()
    """
    assert current(source) == [
        accessor(M, "get_data_parallel_group"),
        accessor(M, TP),
        accessor(M, TP),
        accessor(M, TP),
    ]
