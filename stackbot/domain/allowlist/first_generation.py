"""The first checker generation: a whole-file walk with no scopes, keyed by line number."""

from __future__ import annotations

import ast

from stackbot.domain.allowlist.accessors import is_accessor
from stackbot.domain.allowlist.model import Generation

# The spellings of parallel_state the first checker recognised in ``B.get_x_group()``.
LITERAL_BASES = frozenset({"parallel_state", "mpu", "ps"})


def _bare_accessor_names(module: ast.Module) -> set[str]:
    """Names bound by ``from X import accessor [as alias]`` where X (without its leading dots)
    contains ``parallel_state``; ``from . import`` has no X and never qualifies."""
    names: set[str] = set()
    for node in ast.walk(module):
        if isinstance(node, ast.ImportFrom) and node.module and "parallel_state" in node.module:
            for alias in node.names:
                if is_accessor(alias.name, Generation.LINE):
                    names.add(alias.asname or alias.name)
    return names


def _read_of(func: ast.expr, bare_names: set[str]) -> tuple[str, str] | None:
    if isinstance(func, ast.Attribute) and is_accessor(func.attr, Generation.LINE):
        base = func.value
        if isinstance(base, ast.Name) and base.id in LITERAL_BASES:
            return "accessor", f"{base.id}.{func.attr}"
        return None
    if isinstance(func, ast.Name) and func.id in bare_names:
        return "accessor", func.id
    if isinstance(func, ast.Attribute) and func.attr == "use_mpu_process_groups":
        return "shim", "use_mpu_process_groups"
    return None


def first_generation_reads(module: ast.Module) -> list[tuple[int, str]]:
    """(line, ``LINE:KIND:DETAIL``) for every read in ``module``, duplicates included."""
    bare_names = _bare_accessor_names(module)
    reads: list[tuple[int, str]] = []
    for node in ast.walk(module):
        if isinstance(node, ast.Call):
            read = _read_of(node.func, bare_names)
            if read is not None:
                reads.append((node.lineno, f"{node.lineno}:{read[0]}:{read[1]}"))
    return reads
