"""The allowlist file: parsing, the checker's exact rendering, and its generation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stackbot.domain.allowlist import (
    Allowlist,
    AllowlistFormatError,
    Generation,
    detect_generation,
    parse_allowlist,
    render_allowlist,
)
from stackbot.errors import BadInput

GOLDEN = Path(__file__).parent / "golden"
SCOPE_COMMENT = (
    "Grandfathered reads of global process-group state in megatron/core. "
    "Entries are scope:kind:detail; duplicates count separate calls."
)
ROUTER_INIT = "TopKRouter.__init__:accessor:parallel_state.get_tensor_model_parallel_group"


def test_render_matches_the_golden_scope_file_from_unsorted_input() -> None:
    allowlist = Allowlist(
        comment=SCOPE_COMMENT,
        allowed={
            "megatron/core/transformer/moe/router.py": (
                ROUTER_INIT,
                "<module>:shim:use_mpu_process_groups",
                ROUTER_INIT,
            ),
            "megatron/core/empty.py": (),
            "megatron/core/a/b.py": (
                "_private:accessor:parallel_state.get_data_parallel_group",
                "Zeta:accessor:parallel_state.get_data_parallel_group",
            ),
            "megatron/core/a-b.py": ("f:accessor:parallel_state.get_data_parallel_rank",),
        },
        total=99,  # drifted: the rendered file counts its entries
    )
    assert render_allowlist(allowlist) == (GOLDEN / "scope_allowlist.json").read_bytes()


def test_render_matches_the_golden_line_file_with_escaped_comment() -> None:
    allowlist = Allowlist(
        comment=(
            "Grandfathered reads \u2014 regenerate after REMOVING usage, "
            "never to silence a new violation."
        ),
        allowed={
            "megatron/core/utils.py": ("3:accessor:get_pipeline_model_parallel_world_size",),
            "megatron/core/models/gpt/gpt_model.py": (
                "9:accessor:mpu.get_data_parallel_rank",
                "112:shim:use_mpu_process_groups",
                "10:accessor:parallel_state.get_tensor_model_parallel_group",
            ),
        },
        total=4,
    )
    assert render_allowlist(allowlist) == (GOLDEN / "line_allowlist.json").read_bytes()


def test_render_of_an_empty_allowlist() -> None:
    allowlist = Allowlist("Nothing reads global state any more.", {}, 0)
    assert render_allowlist(allowlist) == (GOLDEN / "empty_allowlist.json").read_bytes()


@pytest.mark.parametrize(
    "name", ["scope_allowlist.json", "line_allowlist.json", "empty_allowlist.json"]
)
def test_golden_files_round_trip(name: str) -> None:
    data = (GOLDEN / name).read_bytes()
    assert render_allowlist(parse_allowlist(data)) == data


def test_parse_reads_comment_entries_and_declared_total() -> None:
    allowlist = parse_allowlist((GOLDEN / "scope_allowlist.json").read_bytes())
    assert allowlist.comment == SCOPE_COMMENT
    assert allowlist.total == 6
    assert allowlist.entry_count == 6
    assert allowlist.allowed["megatron/core/transformer/moe/router.py"] == (
        "<module>:shim:use_mpu_process_groups",
        ROUTER_INIT,
        ROUTER_INIT,
    )
    assert allowlist.counts()["megatron/core/transformer/moe/router.py"][ROUTER_INIT] == 2


def test_parse_keeps_a_drifted_total_for_the_check_to_report() -> None:
    data = b'{"_comment": "c", "allowed": {"megatron/core/x.py": ["f:shim:use_mpu_process_groups"]}, "total": 7}'
    allowlist = parse_allowlist(data)
    assert (allowlist.total, allowlist.entry_count) == (7, 1)


def test_from_reads_sorts_drops_empty_files_and_counts() -> None:
    allowlist = Allowlist.from_reads(
        "c", {"megatron/core/b.py": ["g:shim:x", "f:shim:x", "f:shim:x"], "megatron/core/a.py": []}
    )
    assert allowlist.allowed == {"megatron/core/b.py": ("f:shim:x", "f:shim:x", "g:shim:x")}
    assert allowlist.total == 3


CONFLICTED = b"""{
  "_comment": "c",
  "allowed": {
<<<<<<< ours
    "megatron/core/x.py": ["f:shim:use_mpu_process_groups"]
=======
    "megatron/core/y.py": ["g:shim:use_mpu_process_groups"]
>>>>>>> theirs
  },
  "total": 1
}
"""


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (CONFLICTED, "not valid JSON"),
        (b"\xff\xfe\x00", "not valid JSON"),
        (b"[]", "must be a JSON object"),
        (b'{"total": 0}', "'allowed' is missing"),
        (b'{"allowed": [], "total": 0}', "'allowed' is missing or not an object"),
        (b'{"allowed": {}}', "'total' is missing"),
        (b'{"allowed": {}, "total": "3"}', "'total' is missing or not an integer"),
        (b'{"allowed": {}, "total": true}', "'total' is missing or not an integer"),
        (b'{"allowed": {}, "total": 0, "_comment": 5}', "'_comment' must be a string"),
        (b'{"allowed": {}, "total": 0, "extra": 1}', "unknown top-level keys: ['extra']"),
        (b'{"allowed": {"": []}, "total": 0}', "empty file path"),
        (b'{"allowed": {"m/x.py": "f:shim:s"}, "total": 1}', "'m/x.py' must be a list of strings"),
        (b'{"allowed": {"m/x.py": [3]}, "total": 1}', "'m/x.py' must be a list of strings"),
        (
            b'{"allowed": {"m/x.py": ["just-a-name"]}, "total": 1}',
            "not of the form KEY:KIND:DETAIL",
        ),
        (b'{"allowed": {"m/x.py": [":shim:s"]}, "total": 1}', "not of the form KEY:KIND:DETAIL"),
        (b'{"allowed": {"m/x.py": ["f:shim:"]}, "total": 1}', "not of the form KEY:KIND:DETAIL"),
        (b'{"allowed": {"m/x.py": ["f:call:s"]}, "total": 1}', "must be 'accessor' or 'shim'"),
    ],
)
def test_malformed_files_raise_bad_input_naming_the_problem(data: bytes, says: str) -> None:
    with pytest.raises(AllowlistFormatError) as raised:
        parse_allowlist(data)
    assert isinstance(raised.value, BadInput)
    assert says in str(raised.value)


def test_entry_error_names_the_file() -> None:
    with pytest.raises(AllowlistFormatError, match=re.escape("in 'megatron/core/x.py'")):
        parse_allowlist(b'{"allowed": {"megatron/core/x.py": ["f:call:s"]}, "total": 1}')


def test_detail_may_contain_colons_kept_whole() -> None:
    allowlist = parse_allowlist(b'{"allowed": {"m/x.py": ["f:accessor:a:b"]}, "total": 1}')
    assert allowlist.allowed == {"m/x.py": ("f:accessor:a:b",)}


def _with_keys(*keys: str) -> Allowlist:
    return Allowlist.from_reads(
        "c", {"megatron/core/x.py": [f"{k}:shim:use_mpu_process_groups" for k in keys]}
    )


def test_detect_generation_from_keys() -> None:
    assert detect_generation(_with_keys("12", "7"), Generation.SCOPE) is Generation.LINE
    assert detect_generation(_with_keys("<module>", "A.f"), Generation.LINE) is Generation.SCOPE
    assert detect_generation(_with_keys("f"), Generation.LINE) is Generation.SCOPE


def test_detect_generation_of_an_empty_file_is_the_default() -> None:
    empty = Allowlist("c", {}, 0)
    assert detect_generation(empty, Generation.LINE) is Generation.LINE
    assert detect_generation(empty, Generation.SCOPE) is Generation.SCOPE


def test_detect_generation_refuses_a_mix() -> None:
    with pytest.raises(AllowlistFormatError, match="mixes line-number and scope keys"):
        detect_generation(_with_keys("12", "A.f"), Generation.SCOPE)
