"""Reading what stopped a rank from its output: pytest's reports of a conftest that cannot be
imported, a file that cannot be collected, a usage or internal error, and plain crashes."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_jobs.causes import find_cause, no_tests_summary, rank_output

ROOT = "/lustre/ci/checkouts/8e7567a"

CONFTEST = f"""\
ImportError while loading conftest '{ROOT}/tests/unit_tests/conftest.py'.
tests/unit_tests/conftest.py:13: in <module>
    from tests.unit_tests.dist_checkpointing import TempNamedDir
tests/unit_tests/dist_checkpointing/utils.py:22: in <module>
    from megatron.training.arguments import parse_args
E   ModuleNotFoundError: No module named 'megatron.training'
"""

COLLECTING = """\
==================================== ERRORS ====================================
_______________ ERROR collecting tests/unit_tests/test_fused.py ________________
ImportError while importing test module '/x/tests/unit_tests/test_fused.py'.
Hint: make sure your test modules/packages have valid Python names.
Traceback:
tests/unit_tests/test_fused.py:1: in <module>
    import apex
E   ModuleNotFoundError: No module named 'apex'
=========================== short test summary info ============================
ERROR tests/unit_tests/test_fused.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
"""

NOT_FOUND = f"""\
no tests ran in 0.41s
ERROR: not found: {ROOT}/tests/unit_tests/test_fp8.py::test_blockwise_recipe
(no match in any of [<Module test_fp8.py>])

"""

INTERNAL = """\
INTERNALERROR> Traceback (most recent call last):
INTERNALERROR>   File "/usr/lib/python3/site-packages/_pytest/main.py", line 285, in wrap_session
INTERNALERROR>     session.exitstatus = doit(config, session) or 0
INTERNALERROR> RuntimeError: a plugin broke
"""

CRASH = """\
tests/unit_tests/test_a.py ..
Traceback (most recent call last):
  File "/x/megatron/core/parallel_state.py", line 10, in f
    raise torch.distributed.DistBackendError("NCCL error: unhandled system error")
torch.distributed.DistBackendError: NCCL error: unhandled system error
"""


@pytest.mark.parametrize(
    ("output", "summary", "from_pytest"),
    [
        (
            CONFTEST,
            "ModuleNotFoundError: No module named 'megatron.training' while importing "
            "tests/unit_tests/conftest.py",
            True,
        ),
        (
            COLLECTING,
            "ModuleNotFoundError: No module named 'apex' while collecting "
            "tests/unit_tests/test_fused.py",
            True,
        ),
        (
            NOT_FOUND,
            "not found: tests/unit_tests/test_fp8.py::test_blockwise_recipe "
            "(no match in any of [<Module test_fp8.py>])",
            True,
        ),
        (INTERNAL, "pytest internal error: RuntimeError: a plugin broke", True),
        (
            CRASH,
            "torch.distributed.DistBackendError: NCCL error: unhandled system error",
            False,
        ),
        (
            "Fatal Python error: Segmentation fault\n\nThread 0x1:\n",
            "Fatal Python error: Segmentation fault",
            False,
        ),
    ],
)
def test_the_cause_is_the_line_naming_the_error(
    output: str, summary: str, from_pytest: bool
) -> None:
    cause = find_cause(output.splitlines(), ROOT)
    assert cause is not None
    assert cause.summary == summary
    assert cause.from_pytest is from_pytest
    assert ROOT not in cause.excerpt  # the node's paths stay on the node


def test_the_excerpt_is_the_lines_a_user_reads_to_fix_it() -> None:
    cause = find_cause(CONFTEST.splitlines(), ROOT)
    assert cause is not None
    assert cause.excerpt.splitlines() == [
        "ImportError while loading conftest 'tests/unit_tests/conftest.py'.",
        *CONFTEST.splitlines()[1:],
    ]


def test_output_without_an_error_has_no_cause() -> None:
    assert find_cause(["tests/unit_tests/test_a.py ..", "2 passed in 0.1s"]) is None


def test_the_closing_line_when_nothing_ran() -> None:
    lines = ["", "82 deselected, 55 warnings in 3.29s", ""]
    assert no_tests_summary(lines) == "82 deselected, 55 warnings in 3.29s"
    assert no_tests_summary(["no tests ran in 0.01s"]) == "no tests ran in 0.01s"


def test_a_ranks_lines_come_from_the_console_log_else_its_own_files(tmp_path: Path) -> None:
    console = tmp_path / "torchrun-node1.log"
    console.write_text(
        "[default0]:from rank 4\n[default1]:E   ImportError: rank 5's\n"
        "W1203 torch launcher noise\n[rank1]:more of rank 5\n"
    )
    assert rank_output(tmp_path, console, 1, 1) == ["E   ImportError: rank 5's", "more of rank 5"]
    files = tmp_path / "torchrun-logs" / "node1" / "run_x" / "attempt_0" / "0"
    files.mkdir(parents=True)
    (files / "stderr.log").write_text("E   ModuleNotFoundError: No module named 'x'\n")
    console.write_text("no prefixed lines at all\n")
    assert rank_output(tmp_path, console, 1, 0) == ["E   ModuleNotFoundError: No module named 'x'"]


def test_a_line_run_into_by_the_next_prefixed_one_is_split(tmp_path: Path) -> None:
    # pytest's progress dot has no newline, so the rank's next line follows it on the same
    # console line, torchrun's prefix repeated; another rank's may follow as well.
    console = tmp_path / "torchrun-node0.log"
    console.write_text(
        "[default2]:.[default2]:Fatal Python error: Segmentation fault\n"
        "[default0]:..[default2]:Current thread 0x1 (most recent call first):\n"
    )
    lines = rank_output(tmp_path, console, 0, 2)
    assert lines == [
        ".",
        "Fatal Python error: Segmentation fault",
        "Current thread 0x1 (most recent call first):",
    ]
    cause = find_cause(lines)
    assert cause is not None and cause.summary == "Fatal Python error: Segmentation fault"
    assert rank_output(tmp_path, console, 0, 0) == [".."]
