"""Which names are accessors, in each generation."""

from __future__ import annotations

import pytest

from stackbot.domain.allowlist.accessors import is_accessor
from stackbot.domain.allowlist.model import Generation

SCOPE, LINE = Generation.SCOPE, Generation.LINE


@pytest.mark.parametrize(
    ("name", "in_current", "in_first"),
    [
        ("get_tensor_model_parallel_group", True, True),
        ("get_expert_model_parallel_groups", True, True),
        ("get_data_parallel_rank", True, True),
        ("get_pipeline_model_parallel_world_size", True, True),
        ("get_data_parallel_src_rank", True, True),
        ("get_data_parallel_group_gloo", True, False),
        ("get_expert_data_parallel_group_gloo", True, False),
        ("get_context_parallel_global_ranks", True, False),
        ("get_pipeline_model_parallel_first_ranks", True, False),
        # the five exclusions
        ("get_nccl_options", False, False),
        ("get_all_ranks", False, False),
        ("get_global_memory_buffer", False, False),
        ("get_virtual_pipeline_model_parallel_rank", False, False),
        ("get_virtual_pipeline_model_parallel_world_size", False, False),
        # a name must start with get_ and end with one of the endings
        ("tensor_model_parallel_group", False, False),
        ("set_tensor_model_parallel_rank", False, False),
        ("get_tensor_model_parallel_group_size", False, False),
        ("get_grouped", False, False),
        ("initialize_model_parallel", False, False),
        ("get_rank", True, True),
        ("is_pipeline_first_stage", False, False),
        ("get_pipeline_model_parallel_next_rank", True, True),
        ("get_virtual_pipeline_model_parallel_split_rank", True, True),
    ],
)
def test_accessor_names(name: str, in_current: bool, in_first: bool) -> None:
    assert is_accessor(name, SCOPE) is in_current
    assert is_accessor(name, LINE) is in_first
