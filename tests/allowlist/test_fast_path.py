"""Files that cannot read are only checked to parse (``compile``, no AST): their outcome must be
exactly the full scan's, parse errors included."""

from __future__ import annotations

import pytest

from stackbot.domain.allowlist import Generation, scanner
from stackbot.domain.allowlist.scanner import may_read, scan_sources

SOURCES = [
    b"import torch\ndef f(x):\n    return torch.relu(x)\n",  # no read, parses
    b"def (:\n",  # no read, does not parse
    b"return 1\n",  # compile refuses ('return' outside function), ast.parse accepts
    b"def f():\n    nonlocal x\n",  # the same, from the symbol table
    b'x = "\\d"\nassert (x, 1)\nx is 1\n',  # compile warns; warnings are not errors here
    b"x = 1\0\n",  # a NUL byte
    b"\xef\xbb\xbfx = 1\n",  # a UTF-8 BOM, which the checker keeps in the text
    b"\xff\xfe not utf-8\n",
    b"x = (" * 300 + b")" * 300 + b"\n",  # too deep for the parser
    b"",
    # Reads, directly, through an alias whose call site names no accessor, and full-width.
    b"from megatron.core import parallel_state as ps\ndef f():\n    ps.get_data_parallel_rank()\n",
    b"from megatron.core.parallel_state import get_tensor_model_parallel_group as g\ng()\n",
    "from megatron.core import parallel_state\n"
    "def f():\n    parallel_state.ｇet_data_parallel_rank()\n".encode(),
    b"from megatron.core.process_groups_config import ProcessGroupCollection as P\n"
    b"P.use_mpu_process_groups()\n",
    # Near misses: accessor-like names that read nothing.
    b"def get_config_rank_group2():\n    pass\nget_config()\n",
]


def test_only_files_naming_an_accessor_or_the_shim_may_read() -> None:
    assert [may_read(s) for s in SOURCES[10:]] == [True, True, True, True, False]
    assert may_read("x = 'é'\n".encode()) is False  # non-ASCII elsewhere is no reason


@pytest.mark.parametrize("generation", list(Generation))
def test_the_fast_path_gives_the_full_scans_outcomes(
    generation: Generation, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = scan_sources(generation, SOURCES)
    monkeypatch.setattr(scanner, "may_read", lambda source: True)
    full = scan_sources(generation, SOURCES)
    assert fast == full
    assert [o.error is None for o in fast[:4]] == [True, False, True, True]
    assert [len(o.entries) for o in fast[10:]] == [1, 1, 1, 1, 0]
