"""Infrastructure signatures (issue 26 point 3): the list as data in the test-sets file (Megatron's
by default, extended or trimmed by a deployment's file), matched against realistic rank output,
and carried in the job spec."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_jobs.infra_signatures import InfraSignature, find_signature
from gpu_jobs.spec import SPEC_SCHEMA_VERSION, JobSpec, Shape
from gpu_jobs.testsets import (
    BUILTIN_TEST_SETS,
    TestSetError,
    builtin_infra_signatures,
    load_own_tests,
    parse_test_sets,
)

BUILTIN = builtin_infra_signatures()
TOP = 'schema_version = "1.0"\n'
SETS = '[test_sets.a]\nshapes = ["1x4"]\nmegatron_targets = ["t.py"]\n'

# What ranks really write when the machine fails (trimmed to the lines that matter).
NCCL_WATCHDOG = [
    "tests/unit_tests/test_parallel_state.py .",
    "[rank3]:[E1204 17:02:11.201934 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=1121, OpType=ALLREDUCE, NumelIn=4096, "
    "NumelOut=4096, Timeout(ms)=600000) ran for 600047 milliseconds before timing out.",
    "[rank3]:[E1204 17:02:11.202110 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) "
    "Rank 3] Exception (either an error before or asyncWork timed out) at watchdog ",
]
NCCL_ABORT = [
    "[rank1]:[E1204 17:02:12.000001 ProcessGroupNCCL.cpp:630] [Rank 1] Some NCCL operations "
    "have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU "
    "operations might run on corrupted/incomplete data.",
    "[rank1]:[E1204 17:02:12.000002 ProcessGroupNCCL.cpp:636] [Rank 1] To avoid data "
    "inconsistency, we are taking the entire process down.",
]
ECC = [
    "E       RuntimeError: CUDA error: uncorrectable ECC error encountered",
    "E       CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.",
]
XID = ["NVRM: Xid (PCI:0000:87:00): 79, pid=31244, GPU has fallen off the bus."]
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total "
    "capacity of 79.11 GiB of which 1.12 GiB is free. Including non-PyTorch memory, this process "
    "has 77.98 GiB memory in use."
)
NCCL_SEGFAULT = [
    "Fatal Python error: Segmentation fault",
    "",
    "Thread 0x00007f2b5effd640 (most recent call first):",
    '  File "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", line 2501 '
    "in all_reduce",
    "#3 0x00007f2c1a9e2b10 in ncclProxyService() from /usr/lib/x86_64-linux-gnu/libnccl.so.2",
]
PLAIN_SEGFAULT = [
    "Fatal Python error: Segmentation fault",
    "",
    "Current thread 0x00007f2b5effd640 (most recent call first):",
    '  File "/ckpt/megatron/core/fusions/fused_bias_gelu.py", line 41 in bias_gelu',
]
HUB = [
    "E   OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't "
    "find it in the cached files and it looks like gpt2 is not the path to a directory "
    "containing a file named config.json.",
]
DATA_HUB = [
    "E   requests.exceptions.ConnectionError: HTTPSConnectionPool(host='github.com', port=443): "
    "Max retries exceeded with url: /NVIDIA/Megatron-LM/releases/download/v2.5/assets.tar.gz "
    "(Caused by NameResolutionError(\"Failed to resolve 'github.com' ([Errno -3] Temporary "
    'failure in name resolution)"))',
]
QUOTA = [
    "E   OSError: [Errno 122] Disk quota exceeded: '/lustre/ci/ckpt/iter_0000010/__0_0.distcp'"
]
FULL = ["E   OSError: [Errno 28] No space left on device: '/tmp/pytest-of-ci/pytest-3/ckpt'"]
ASSERTION = ["E       AssertionError: assert tensor(0.2500) == tensor(0.5000)"]


@pytest.mark.parametrize(
    ("lines", "name", "kind"),
    [
        (NCCL_WATCHDOG, "nccl-watchdog-timeout", "nccl"),
        (NCCL_ABORT, "megatron-nccl-failed-or-timed-out", "nccl"),
        (ECC, "megatron-ecc", "gpu"),
        (XID, "gpu-xid", "gpu"),
        (NCCL_SEGFAULT, "megatron-segmentation-fault", "nccl"),
        (HUB, "megatron-huggingface-unreachable", "hub"),
        (DATA_HUB, "hub-unreachable", "hub"),
        (QUOTA, "megatron-disk-quota", "disk"),
        (FULL, "disk-full", "disk"),
    ],
)
def test_each_class_is_found_with_its_line(lines: list[str], name: str, kind: str) -> None:
    found = find_signature({0: ["ok"], 2: ["tests/unit_tests/test_a.py .F", *lines]}, BUILTIN)
    assert found is not None
    assert (found.signature.name, found.signature.kind, found.rank) == (name, kind, 2)
    assert found.line in [line.strip() for line in lines]
    assert found.message().startswith(f"infra signature {name} ({kind}) on rank 2: ")
    assert found.excerpt.startswith(f"rank 2, matched {name}:\n")


def test_a_segfault_outside_nccl_and_a_plain_failure_are_not_infra() -> None:
    assert find_signature({0: PLAIN_SEGFAULT, 1: ASSERTION}, BUILTIN) is None


def test_a_segfault_counts_only_with_nccl_in_the_same_ranks_output() -> None:
    # NCCL named by another rank does not make rank 0's segfault NCCL's.
    assert (
        find_signature({0: PLAIN_SEGFAULT, 1: ["NCCL INFO Bootstrap : Using eth0"]}, BUILTIN)
        is None
    )


def test_cuda_out_of_memory_counts_only_on_an_otherwise_passing_test() -> None:
    output = {1: [f"E       {OOM}"]}
    found = find_signature(output, BUILTIN, failure_messages=[OOM])
    assert found is not None and found.signature.name == "cuda-out-of-memory"
    assert found.rank == 1 and "CUDA out of memory" in found.line
    # A real failure beside it: the job's failures are not all the machine's.
    assert find_signature(output, BUILTIN, failure_messages=[OOM, ASSERTION[0]]) is None
    # Without failing tests (a crash) the scope has nothing to stand on.
    assert find_signature(output, BUILTIN) is None


def test_the_first_signature_in_list_order_wins_and_ansi_colours_are_ignored() -> None:
    coloured = ["\x1b[31mE   OSError: [Errno 122] Disk quota exceeded: '/x'\x1b[0m"]
    found = find_signature({0: coloured, 3: NCCL_WATCHDOG}, BUILTIN)
    assert found is not None and found.signature.name == "megatron-disk-quota"
    assert found.line == "E   OSError: [Errno 122] Disk quota exceeded: '/x'"


def test_the_builtin_list_is_megatrons_plus_the_missing_classes() -> None:
    names = [s.name for s in BUILTIN]
    megatron = [n for n in names if n.startswith("megatron-")]
    assert len(megatron) == 23 and names[:23] == megatron  # launch_jet_workload.is_flaky_failure
    assert {s.kind for s in BUILTIN} >= {"nccl", "gpu", "memory", "hub", "disk", "network"}


def test_a_deployment_file_extends_replaces_and_disables() -> None:
    text = (
        TOP + 'disabled_infra_signatures = ["megatron-nan"]\n'
        "[[infra_signatures]]\n"
        'name = "lustre-stale"\nclass = "disk"\npattern = "Stale file handle"\n'
        "[[infra_signatures]]\n"
        'name = "megatron-disk-quota"\nclass = "disk"\npattern = "quota exceeded on /lustre"\n'
    ) + SETS
    [test_set] = parse_test_sets(text, Path("deploy.toml")).values()
    signatures = test_set.infra_signatures
    assert signatures is not None
    by_name = {s.name: s for s in signatures}
    assert "megatron-nan" not in by_name
    assert by_name["lustre-stale"].pattern == "Stale file handle"
    assert by_name["megatron-disk-quota"].pattern == "quota exceeded on /lustre"
    assert len(signatures) == len(BUILTIN)  # one added, one replaced, one disabled
    found = find_signature({0: ["OSError: [Errno 116] Stale file handle"]}, signatures)
    assert found is not None and found.signature.name == "lustre-stale"
    assert find_signature({0: ["found NaN in local grad norm"]}, signatures) is None
    assert find_signature({0: ["found NaN in local grad norm"]}, BUILTIN) is not None


def test_the_builtin_file_gives_its_list_to_test_sets_and_own_tests() -> None:
    from gpu_jobs.testsets import load_test_sets

    assert load_test_sets()["amax-group"].infra_signatures == BUILTIN
    own = load_own_tests()
    assert own is not None and own.test_set(("t.py",), "1x4").infra_signatures == BUILTIN
    assert BUILTIN_TEST_SETS.is_file()


@pytest.mark.parametrize(
    ("body", "field", "problem"),
    [
        (
            '[[infra_signatures]]\nname = "x"\nclass = "nccl"\n',
            "infra_signatures[0].pattern",
            "required",
        ),
        (
            '[[infra_signatures]]\nname = "Bad Name"\nclass = "nccl"\npattern = "x"\n',
            "infra_signatures[0].name",
            "lowercase words",
        ),
        (
            '[[infra_signatures]]\nname = "x"\nclass = "cosmic"\npattern = "x"\n',
            "infra_signatures[0].class",
            "is not one of",
        ),
        (
            '[[infra_signatures]]\nname = "x"\nclass = "nccl"\npattern = "(unclosed"\n',
            "infra_signatures[0].pattern",
            "is not a regular expression",
        ),
        (
            '[[infra_signatures]]\nname = "x"\nclass = "nccl"\npattern = "x"\nscope = "all"\n',
            "infra_signatures[0].scope",
            "is not one of",
        ),
        (
            '[[infra_signatures]]\nname = "x"\nclass = "nccl"\npattern = "x"\npatern = "y"\n',
            "infra_signatures[0].patern",
            "not a known field",
        ),
        (
            'disabled_infra_signatures = ["no-such"]\n',
            "disabled_infra_signatures",
            "is not the name",
        ),
    ],
)
def test_errors_name_the_file_and_the_field(body: str, field: str, problem: str) -> None:
    with pytest.raises(TestSetError) as caught:
        parse_test_sets(TOP + body + SETS, Path("deploy.toml"))
    assert caught.value.field == field, caught.value
    assert problem in caught.value.problem
    assert str(caught.value).startswith(f"deploy.toml: {field}: ")


def test_the_spec_carries_the_list_and_an_older_spec_means_the_nodes_own() -> None:
    mine = (InfraSignature("lustre-stale", "disk", "Stale file handle"),)
    spec = JobSpec(job_id="j", test_set="a", targets=("t.py",), shape=Shape(1, 4), checkout="/t")
    assert spec.infra_signatures is None
    data = spec.to_dict()
    data["infra_signatures"] = [s.to_dict() for s in mine]
    again = JobSpec.from_dict(data)
    assert again.infra_signatures == mine and again.schema_version == SPEC_SCHEMA_VERSION
    old = {k: v for k, v in data.items() if k != "infra_signatures"}
    assert JobSpec.from_dict({**old, "schema_version": "1.2"}).infra_signatures is None


def test_source_code_quoted_in_a_traceback_is_not_a_signature() -> None:
    """pytest quotes the failing test's source: a test that mentions an out-of-memory message
    (to check it is handled) is no machine failure."""
    traceback = [
        "    def test_oom_message_is_reported():",
        '        text = "CUDA out of memory. Tried to allocate 2.00 GiB"',
        ">       assert format_error(text) == 'out of GPU memory'",
        "E       AssertionError: assert 'CUDA out of memory' == 'out of GPU memory'",
    ]
    message = "AssertionError: assert 'CUDA out of memory' == 'out of GPU memory'"
    assert find_signature({0: traceback}, BUILTIN, failure_messages=[message]) is None
    # The same quoted source beside a real out-of-memory error: the error's line is the match.
    real = [*traceback[:3], f"E       {OOM}"]
    found = find_signature({0: real}, BUILTIN, failure_messages=[OOM])
    assert found is not None and found.line == f"E       {OOM}"
