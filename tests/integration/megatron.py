"""Megatron-like content for the test repositories: modules that read parallel_state, and the
allowlist in the checker's JSON form."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from stackbot.config import DEFAULT_ALLOWLIST_PATH

ALLOWLIST = DEFAULT_ALLOWLIST_PATH
CHECKER = "tools/check_process_group_usage.py"
COMMENT = "Global process-group reads still allowed in megatron/core (test fixture)."

TP = "get_tensor_model_parallel_group"
DP = "get_data_parallel_rank"
PP = "get_pipeline_model_parallel_world_size"
CP = "get_context_parallel_group"


def module(functions: Mapping[str, Sequence[str]]) -> str:
    """A module whose function ``name`` calls each listed accessor through parallel_state."""
    lines = ["from megatron.core import parallel_state", ""]
    for name, accessors in functions.items():
        lines.append(f"def {name}():")
        lines += [f"    parallel_state.{accessor}()" for accessor in accessors] or [
            "    return None"
        ]
        lines.append("")
    return "\n".join(lines)


def entry(scope: str, accessor: str) -> str:
    return f"{scope}:accessor:parallel_state.{accessor}"


def allowlist(
    allowed: Mapping[str, Sequence[str]], *, total: int | None = None, comment: str = COMMENT
) -> str:
    """The checker's form (sorted entries, sorted keys, indent 2); ``total`` may be given wrong
    on purpose, as hand merges leave it."""
    entries = {path: sorted(listed) for path, listed in allowed.items() if listed}
    count = sum(len(listed) for listed in entries.values())
    document = {"_comment": comment, "allowed": entries, "total": count if total is None else total}
    return json.dumps(document, indent=2, sort_keys=True) + "\n"
