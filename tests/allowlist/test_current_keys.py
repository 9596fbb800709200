"""Current generation: KEYs, what belongs to the enclosing scope, annotations, files, errors."""

from __future__ import annotations

import pytest

from stackbot.domain.allowlist import is_scanned_path, scan_current
from tests.allowlist.scanning import accessor, current, shim

DP = "get_data_parallel_group"
IMPORT = "from megatron.core import parallel_state as ps"


def test_key_is_the_chain_of_enclosing_defs_and_classes() -> None:
    source = f"""
        {IMPORT}
        from .process_groups_config import ProcessGroupCollection
        class TEGroupedLinear:
            def __init__(self):
                ps.get_data_parallel_group()
            class Inner:
                class Deeper:
                    def f(self):
                        ProcessGroupCollection.use_mpu_process_groups()
            async def fetch(self):
                def helper():
                    ps.get_data_parallel_group()
        ps.get_data_parallel_group()
    """
    # Sorted as strings: "I" < "_" < "f".
    assert current(source) == [
        accessor("<module>", DP),
        shim("TEGroupedLinear.Inner.Deeper.f"),
        accessor("TEGroupedLinear.__init__", DP),
        accessor("TEGroupedLinear.fetch.helper", DP),
    ]


def test_decorators_belong_to_the_enclosing_scope() -> None:
    source = """
        class A:
            from megatron.core import parallel_state as ps
            @ps.get_data_parallel_group()
            def method(self):
                pass
        def outer():
            from megatron.core import parallel_state as ps
            @ps.get_data_parallel_rank()
            class Local:
                pass
    """
    assert current(source) == [accessor("A", DP), accessor("outer", "get_data_parallel_rank")]


def test_default_values_belong_to_the_enclosing_scope() -> None:
    source = """
        class A:
            from megatron.core import parallel_state as ps
            def method(self, group=ps.get_data_parallel_group(), *, rank=ps.get_data_parallel_rank()):
                return ps.get_data_parallel_group()
        def f():
            from megatron.core import parallel_state as ps
            return lambda g=ps.get_data_parallel_src_rank(): g
    """
    assert current(source) == [
        accessor("A", DP),
        accessor("A", "get_data_parallel_rank"),
        accessor("f", "get_data_parallel_src_rank"),
    ]


def test_class_bases_and_keywords_belong_to_the_enclosing_scope() -> None:
    source = f"""
        {IMPORT}
        class A(ps.get_data_parallel_group(), metaclass=ps.get_data_parallel_rank()):
            class B(ps.get_data_parallel_src_rank()):
                pass
    """
    assert current(source) == [
        accessor("<module>", DP),
        accessor("<module>", "get_data_parallel_rank"),
        accessor("A", "get_data_parallel_src_rank"),
    ]


def test_function_argument_and_return_annotations_are_not_scanned() -> None:
    source = f"""
        {IMPORT}
        def f(a: ps.get_data_parallel_group(), *b: ps.get_data_parallel_group(),
              c: ps.get_data_parallel_group() = None, **d: ps.get_data_parallel_group()
        ) -> ps.get_data_parallel_group():
            pass
        async def g(a: ps.get_data_parallel_group()) -> ps.get_data_parallel_group():
            pass
    """
    assert current(source) == []


def test_variable_annotations_in_a_body_are_scanned() -> None:
    source = f"""
        {IMPORT}
        def f():
            x: ps.get_data_parallel_group() = None
    """
    assert current(source) == [accessor("f", DP)]


def test_file_without_reads_has_no_entries() -> None:
    assert current("import torch\n\ndef f():\n    return torch.zeros(1)\n") == []


@pytest.mark.parametrize(
    ("path", "scanned"),
    [
        ("megatron/core/model.py", True),
        ("megatron/core/transformer/moe/router.py", True),
        ("megatron/core/transformer/parallel_state.py", True),
        ("megatron/core/parallel_state.py", False),
        ("megatron/core/process_groups_config.py", False),
        ("megatron/core/README.md", False),
        ("megatron/core/model.pyi", False),
        ("megatron/training/arguments.py", False),
        ("tests/unit_tests/megatron/core/test_x.py", False),
        ("megatron/core_ext/model.py", False),
        ("megatron/model.py", False),
    ],
)
def test_scanned_paths(path: str, scanned: bool) -> None:
    assert is_scanned_path(path) is scanned


def test_syntax_error_is_reported_with_its_line() -> None:
    outcome = scan_current("megatron/core/broken.py", b"def f(:\n    pass\n")
    assert outcome.entries == ()
    assert outcome.error is not None
    assert outcome.error.startswith("line 1: ")


def test_null_bytes_are_an_error_not_a_crash() -> None:
    outcome = scan_current("megatron/core/broken.py", b"x = 1\x00\n")
    assert outcome.entries == ()
    assert outcome.error


def test_utf8_bom_stops_the_scan_as_it_stops_the_checker() -> None:
    # The checker reads files as UTF-8 text, which keeps the BOM, and Python's parser rejects
    # U+FEFF in text: the current checker stops on such a file, so it is unparsed.
    source = f"{IMPORT}\nps.get_data_parallel_group()\n".encode()
    outcome = scan_current("megatron/core/bom.py", b"\xef\xbb\xbf" + source)
    assert outcome.entries == ()
    assert outcome.error is not None
    assert "U+FEFF" in outcome.error


def test_coding_cookie_is_ignored_as_the_checker_ignores_it() -> None:
    ascii_only = f"# -*- coding: latin-1 -*-\n{IMPORT}\nps.get_data_parallel_group()\n"
    outcome = scan_current("megatron/core/latin.py", ascii_only.encode("latin-1"))
    assert outcome.entries == (accessor("<module>", DP),)
    not_utf8 = f"# -*- coding: latin-1 -*-\n# caf\xe9\n{IMPORT}\n".encode("latin-1")
    outcome = scan_current("megatron/core/latin.py", not_utf8)
    assert outcome.entries == ()
    assert outcome.error is not None
    assert "not valid UTF-8" in outcome.error


def test_invalid_utf8_is_an_error() -> None:
    outcome = scan_current("megatron/core/bad.py", b"x = '\xff'\n")
    assert outcome.entries == ()
    assert outcome.error


def test_windows_and_old_mac_newlines_keep_line_numbers() -> None:
    crlf = f"{IMPORT}\r\n\r\nps.get_data_parallel_group()\r\n".encode()
    assert scan_current("megatron/core/crlf.py", crlf).lines == (3,)
    cr = f"{IMPORT}\r\rps.get_data_parallel_group()\r".encode()
    assert scan_current("megatron/core/cr.py", cr).lines == (3,)


def test_text_source_is_accepted_and_lines_are_kept() -> None:
    outcome = scan_current("megatron/core/x.py", f"{IMPORT}\n\n\nps.get_data_parallel_group()\n")
    assert outcome.entries == (accessor("<module>", DP),)
    assert outcome.lines == (4,)
