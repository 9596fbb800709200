"""Small synthetic trees that behave as Megatron-LM's test tree does in the ways gpu_jobs must
report: a ``tests/unit_tests/conftest.py`` importing ``megatron.training`` (absent here), a
test file that cannot be collected, tests marked ``internal`` and ``flaky_in_dev``, and tests
written for 4 ranks. They import no torch, so their ranks start quickly on CPU."""

from __future__ import annotations

from pathlib import Path

CONFTEST = (
    "import megatron.core\n"
    "from megatron.training.argument_utils import gpt_config_from_args  # noqa: F401\n"
)

CONVENTIONS = """import os

import pytest

WORLD = int(os.environ["WORLD_SIZE"])


def test_plain():
    pass


@pytest.mark.internal
def test_internal_needs_nvidia_resources():
    raise AssertionError("internal tests must be deselected")


@pytest.mark.flaky
@pytest.mark.flaky_in_dev
def test_flaky_in_dev():
    assert os.environ["RANK"] != "1", "rank 1 loses the race today"
"""

FOUR_RANKS = """import os

WORLD = int(os.environ["WORLD_SIZE"])


def test_runs_anywhere():
    pass


def test_tensor_parallel_four():
    assert WORLD % 4 == 0, f"tensor parallel size 4 does not divide world size {WORLD}"


def test_pipeline_parallel_four():
    assert WORLD >= 4, f"pipeline parallel size 4 needs 4 ranks, world size is {WORLD}"
"""

ORDINARY_FAILURE = "def test_wrong():\n    assert 1 + 1 == 3, 'arithmetic'\n"


def megatron_tree(root: Path, *, training: bool) -> Path:
    """``megatron/core`` always; ``megatron/training`` only with ``training``."""
    (root / "megatron" / "core").mkdir(parents=True, exist_ok=True)
    (root / "megatron" / "__init__.py").write_text("")
    (root / "megatron" / "core" / "__init__.py").write_text("")
    if training:
        (root / "megatron" / "training").mkdir(exist_ok=True)
        (root / "megatron" / "training" / "__init__.py").write_text("")
        (root / "megatron" / "training" / "argument_utils.py").write_text(
            "def gpt_config_from_args():\n    pass\n"
        )
    unit = root / "tests" / "unit_tests"
    unit.mkdir(parents=True, exist_ok=True)
    (root / "tests" / "__init__.py").write_text("")
    (unit / "__init__.py").write_text("")
    (unit / "conftest.py").write_text(CONFTEST)
    (unit / "test_conventions.py").write_text(CONVENTIONS)
    (unit / "test_four_ranks.py").write_text(FOUR_RANKS)
    (unit / "test_ordinary.py").write_text(ORDINARY_FAILURE)
    (unit / "test_uncollectable.py").write_text(
        "from megatron.legacy_fused_kernels import fused  # noqa: F401\n\n\n"
        "def test_never_collected():\n    pass\n"
    )
    return root
