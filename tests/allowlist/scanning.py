"""Small helpers for the allowlist tests: scan a dedented snippet as one megatron/core file."""

from __future__ import annotations

import textwrap

from stackbot.domain.allowlist import scan_current, scan_first_generation

PATH = "megatron/core/transformer/layer.py"


def current(source: str) -> list[str]:
    """The current generation's entries for ``source``, which must parse."""
    outcome = scan_current(PATH, textwrap.dedent(source).encode())
    assert outcome.error is None, outcome.error
    return list(outcome.entries)


def first(source: str) -> list[str]:
    """The first generation's entries for ``source``, which must parse."""
    outcome = scan_first_generation(PATH, textwrap.dedent(source).encode())
    assert outcome.error is None, outcome.error
    return list(outcome.entries)


def accessor(key: str, name: str) -> str:
    """A current-generation accessor entry: DETAIL is always ``parallel_state.<name>``."""
    return f"{key}:accessor:parallel_state.{name}"


def shim(key: str) -> str:
    return f"{key}:shim:use_mpu_process_groups"
