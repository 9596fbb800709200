"""Which ``parallel_state`` functions read the global process-group grid."""

from __future__ import annotations

from stackbot.domain.allowlist.model import Generation

# The current checker added the Gloo group accessors and the rank-list accessors.
_ENDINGS = {
    Generation.SCOPE: ("_group", "_groups", "_gloo", "_rank", "_ranks", "_world_size", "_src_rank"),
    Generation.LINE: ("_group", "_groups", "_rank", "_world_size", "_src_rank"),
}

# The intended long-term surface and the globals with no replacement yet.
NOT_ACCESSORS = frozenset(
    {
        "get_nccl_options",
        "get_all_ranks",
        "get_global_memory_buffer",
        "get_virtual_pipeline_model_parallel_rank",
        "get_virtual_pipeline_model_parallel_world_size",
    }
)


def is_accessor(name: str, generation: Generation) -> bool:
    if name in NOT_ACCESSORS:
        return False
    return name.startswith("get_") and name.endswith(_ENDINGS[generation])
