"""Infrastructure signatures in real runs (``python -m gpu_jobs run``, torchrun with gloo on the
CPU): ranks that write what a failing machine writes make the job ``infra``, with the matched
line as its cause; the same failure without it stays the tree's."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_jobs.spec import JobResult
from tests.gpu_jobs.throwaway import result_of, run_cli, spec_file

pytestmark = pytest.mark.torchrun

CPU = {"device": "cpu"}
WATCHDOG = (
    "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1121, "
    "OpType=ALLREDUCE, NumelIn=4096, NumelOut=4096, Timeout(ms)=600000) ran for 600047 "
    "milliseconds before timing out."
)
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total "
    "capacity of 79.11 GiB of which 1.12 GiB is free."
)
SUITES = {
    "nccl_timeout": {
        "test_allreduce.py": (
            "import os, sys\n\n\ndef test_ok():\n    pass\n\n\n"
            "def test_allreduce():\n"
            "    if os.environ['RANK'] == '3':\n"
            f"        print({WATCHDOG!r}, file=sys.stderr)\n"
            "        raise RuntimeError('DistBackendError: NCCL communicator was aborted on rank 3')\n"
        ),
    },
    "oom_only": {
        "test_memory.py": (
            "import os\n\n\ndef test_ok():\n    pass\n\n\n"
            "def test_big_batch():\n"
            "    if os.environ['RANK'] == '1':\n"
            f"        raise RuntimeError({OOM!r})\n"
        ),
    },
    "oom_and_a_real_failure": {
        "test_memory.py": (
            "import os\n\n\ndef test_wrong():\n    assert 0.25 == 0.5\n\n\n"
            "def test_big_batch():\n"
            "    if os.environ['RANK'] == '1':\n"
            f"        raise RuntimeError({OOM!r})\n"
        ),
    },
    "hub_unreachable": {
        "conftest.py": (
            "raise OSError(\"We couldn't connect to 'https://huggingface.co' to load this file, "
            "couldn't find it in the cached files and it looks like gpt2 is not the path to a "
            'directory containing a file named config.json.")\n'
        ),
        "test_model.py": "def test_model():\n    pass\n",
    },
    "nccl_segfault": {
        "test_crash.py": (
            "import os, signal, sys\n\n\ndef test_allreduce():\n"
            "    if os.environ['RANK'] == '2':\n"
            "        print('#3 0x00007f2c1a9e2b10 in ncclProxyService() from "
            "/usr/lib/x86_64-linux-gnu/libnccl.so.2', file=sys.stderr, flush=True)\n"
            "        os.kill(os.getpid(), signal.SIGSEGV)\n"
        ),
    },
}


def run(tmp_path: Path, suite: str, **fields: object) -> JobResult:
    tree = tmp_path / "tree"
    tree.mkdir()
    for name, text in SUITES[suite].items():
        (tree / name).write_text(text)
    targets = [name for name in SUITES[suite] if name.startswith("test_")]
    spec = spec_file(
        tmp_path / "spec.json",
        job_id=suite.replace("_", "-"),
        targets=targets,
        checkout=str(tree),
        node_check=False,
        launcher=CPU,
        **fields,
    )
    run_cli("run", str(spec), "--out", str(tmp_path / "out"))
    return result_of(tmp_path / "out")


def test_an_nccl_watchdog_timeout_is_infra_with_the_line(tmp_path: Path) -> None:
    result = run(tmp_path, "nccl_timeout")
    assert (result.status, result.error_of) == ("infra", "node"), result.message
    assert result.message.startswith(
        "infra signature nccl-watchdog-timeout (nccl) on rank 3: [Rank 3] Watchdog caught"
    )
    assert "not counted (1 of 2 tests failed" in result.message  # what it would have been
    assert WATCHDOG in result.cause and result.cause.startswith("rank 3, matched")
    assert result.tests == () and result.counts.total == 0  # infra counts nothing


def test_a_deployment_without_the_signature_keeps_the_failure(tmp_path: Path) -> None:
    """The list travels in the spec: an empty one (every signature disabled) finds nothing."""
    result = run(tmp_path, "nccl_timeout", schema_version="1.3", infra_signatures=[])
    assert result.status == "failed" and result.counts.failed == 1, result.message


def test_cuda_out_of_memory_on_an_otherwise_passing_test_is_infra(tmp_path: Path) -> None:
    result = run(tmp_path, "oom_only")
    assert result.status == "infra", result.message
    assert result.message.startswith("infra signature cuda-out-of-memory (memory) on rank 1: ")
    assert "CUDA out of memory. Tried to allocate 2.00 GiB" in result.message


def test_cuda_out_of_memory_beside_a_real_failure_is_a_failure(tmp_path: Path) -> None:
    result = run(tmp_path, "oom_and_a_real_failure")
    assert result.status == "failed", result.message
    assert result.counts.failed == 2


def test_an_unreachable_hub_while_importing_conftest_is_infra_not_the_trees_error(
    tmp_path: Path,
) -> None:
    result = run(tmp_path, "hub_unreachable")
    assert (result.status, result.error_of) == ("infra", "node"), result.message
    assert result.message.startswith(
        "infra signature megatron-huggingface-unreachable (hub) on rank 0: "
    )
    assert "We couldn't connect to 'https://huggingface.co'" in result.cause
    # What it was before the signature: the conftest error, kept in the message.
    assert "while importing conftest.py" in result.message


def test_a_segfault_inside_nccl_is_infra(tmp_path: Path) -> None:
    result = run(tmp_path, "nccl_segfault", env={"PYTEST_ADDOPTS": "-s"})
    assert (result.status, result.error_of) == ("infra", "node"), result.message
    assert result.message.startswith(
        "infra signature megatron-segmentation-fault (nccl) on rank 2: "
    )
    assert "Segmentation fault" in result.message
