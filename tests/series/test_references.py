"""Parsing ``Depends on``, ``Part of``, ``Superseded by`` and merge wording out of text."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stackbot.domain.references import (
    BranchMerge,
    Reference,
    depends_on_refs,
    merged_branches,
    merged_head_refs,
    part_of_refs,
    prose,
    superseded_by_refs,
)


def texts(refs: list[Reference]) -> list[str]:
    return [ref.text for ref in refs]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("Depends on #8034", ["#8034"]),
        ("depends on #8034", ["#8034"]),
        ("DEPENDS ON #8034", ["#8034"]),
        ("Depends on #8034, which adds the group accessor and a keyword.", ["#8034"]),
        ("Depends on #1 and #2", ["#1", "#2"]),
        ("Depends on #1, #2, and #3.", ["#1", "#2", "#3"]),
        ("Depends on #1,#2 & #3", ["#1", "#2", "#3"]),
        ("Depends on PR #4 and PR #5", ["#4", "#5"]),
        ("Depends on: #7", ["#7"]),
        ("**Depends on**: #7", ["#7"]),
        ("Depends-On: #7", ["#7"]),
        ("This change depends on #7 because it needs the new helper.", ["#7"]),
        ("- depends on #1\n- Depends on #2\n* depends on #3", ["#1", "#2", "#3"]),
        ("depends on NVIDIA/Megatron-LM#8034", ["NVIDIA/Megatron-LM#8034"]),
        ("Depends on https://github.com/NVIDIA/Megatron-LM/pull/8034", ["NVIDIA/Megatron-LM#8034"]),
        (
            "Depends on https://github.com/NVIDIA/Megatron-LM/pull/8034/files.",
            ["NVIDIA/Megatron-LM#8034"],
        ),
        ("Depends on [#12](https://github.com/o/r/pull/12) and #13", ["#12", "#13"]),
        ("Depends on NVIDIA#8035", ["NVIDIA#8035"]),
        ("Depends on:\n- #1\n- #2\n\nDepends on #3", ["#1", "#2", "#3"]),
        ("Depends on #1\n#2 is unrelated", ["#1"]),
        # Hard-wrapped lines: a break after the phrase or a connective keeps the list going.
        ("This work depends on\n#1 and the follow-up", ["#1"]),
        ("Depends on #1 and\n#2, which", ["#1", "#2"]),
        ("Depends on #1,\n#2 and #3", ["#1", "#2", "#3"]),
        ("Depends on #1\nand #2", ["#1", "#2"]),
        ("Depends on\n- #1\n- #2", ["#1", "#2"]),
        ("Depends on\n\n#1 is not in the list", []),
    ],
)
def test_depends_on_forms(body: str, expected: list[str]) -> None:
    assert texts(depends_on_refs(body)) == expected


@pytest.mark.parametrize(
    "body",
    [
        "Depends on #8034abc",
        "depends on &#8034;",
        "dependson #5",
        "independs on #5",
        "Depends on the migration finishing",
        "no longer depends on #5",
        "This does not depend on #5",
        "> Depends on #5 (quoting the old description)",
        "`Depends on #5` is the syntax stackbot reads",
        "```\nDepends on #5\n```",
        "<!-- Write 'Depends on #N' here -->",
        "Part of #6307.",
        "Superseded by #8893",
    ],
)
def test_depends_on_ignores(body: str) -> None:
    assert depends_on_refs(body) == []


def test_part_of_is_a_tracking_issue_not_a_dependency() -> None:
    body = "Depends on #8034.\n\nPart of #6307."
    assert texts(part_of_refs(body)) == ["#6307"]
    assert texts(depends_on_refs(body)) == ["#8034"]
    assert part_of_refs("part of the migration effort") == []


def test_superseded_by_in_a_sentence() -> None:
    comment = "Superseded by #8893, which carries this change under the same title. Closing."
    assert texts(superseded_by_refs(comment)) == ["#8893"]
    assert texts(superseded_by_refs("superseded by NVIDIA/Megatron-LM#9")) == [
        "NVIDIA/Megatron-LM#9"
    ]


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("Merge NVIDIA#8035's head (which contains NVIDIA#8034)", ["NVIDIA#8035"]),
        ("Merge #8035", ["#8035"]),
        ("Explain why, so merge NVIDIA#8035 here.", ["NVIDIA#8035"]),
        ("The contexts change, so merge\nNVIDIA#8035 here.", ["NVIDIA#8035"]),
        ("Merge pull request #77 from someone/branch", ["#77"]),
        ("Merge #1 and #2 into this branch", ["#1", "#2"]),
        ("Merging them keeps NVIDIA#8035's total", []),
        ("The merges of NVIDIA#8017 and NVIDIA#8035 took one side", []),
        ("NVIDIA#8748 brings NVIDIA#8017 and NVIDIA#8035", []),
        ("Merge branch 'main' into feature", []),
    ],
)
def test_merged_head_wording(message: str, expected: list[str]) -> None:
    assert texts(merged_head_refs(message)) == expected


def test_merged_branches() -> None:
    message = (
        "Merge branch 'yx/amax' of https://github.com/fork/repo into yx/callers\n"
        "Merge remote-tracking branch 'origin/yx/base' into yx/callers\n"
        "Merge branches 'a', 'b' and 'c'"
    )
    assert merged_branches(message) == [
        BranchMerge("yx/amax"),
        BranchMerge("origin/yx/base", remote_tracking=True),
        BranchMerge("a"),
        BranchMerge("b"),
        BranchMerge("c"),
    ]
    assert BranchMerge("origin/yx/base", remote_tracking=True).candidate_names == (
        "origin/yx/base",
        "yx/base",
    )
    assert BranchMerge("yx/base").candidate_names == ("yx/base",)


@pytest.mark.parametrize(
    ("ref", "repo", "local"),
    [
        (Reference(5), None, True),
        (Reference(5), "NVIDIA/Megatron-LM", True),
        (Reference(5, "NVIDIA"), "NVIDIA/Megatron-LM", True),
        (Reference(5, "nvidia"), "NVIDIA/Megatron-LM", True),
        (Reference(5, "other"), "NVIDIA/Megatron-LM", False),
        (Reference(5, "NVIDIA"), None, True),
        (Reference(5, "NVIDIA", "Megatron-LM"), "nvidia/megatron-lm", True),
        (Reference(5, "NVIDIA", "apex"), "NVIDIA/Megatron-LM", False),
        (Reference(5, "NVIDIA", "Megatron-LM"), None, False),
    ],
)
def test_locality(ref: Reference, repo: str | None, local: bool) -> None:
    assert ref.is_local(repo) is local


def test_prose_keeps_line_structure() -> None:
    text = "a\n```\ncode\n```\n> quote\nb `x` c"
    # Blanks of the same length: a position in the prose is the same position in the text.
    assert prose(text).splitlines() == ["a", "   ", "    ", "   ", "       ", "b     c"]
    assert len(prose(text)) == len(text)


numbers = st.lists(st.integers(min_value=1, max_value=99999), min_size=1, max_size=6)
ref_forms = st.sampled_from(
    [
        "#{n}",
        "o#{n}",
        "o/r#{n}",
        "https://github.com/o/r/pull/{n}",
        "PR #{n}",
        "[#{n}](https://x/o/r/pull/{n})",
    ]
)
separators = st.sampled_from([", ", " and ", ", and ", " & ", " ", ","])
phrases = st.sampled_from(["Depends on ", "depends on: ", "DEPENDS ON ", "- depends on "])
tails = st.sampled_from(
    ["", ".", ", which adds a helper.", " (see the review)", "\n\nMore text #99."]
)


@given(numbers, ref_forms, separators, phrases, tails)
def test_any_list_form_names_exactly_its_numbers(
    values: list[int], form: str, separator: str, phrase: str, tail: str
) -> None:
    body = "Intro line.\n" + phrase + separator.join(form.format(n=n) for n in values) + tail
    assert [ref.number for ref in depends_on_refs(body)] == values


@given(st.text())
def test_arbitrary_text_never_crashes(text: str) -> None:
    for parse in (depends_on_refs, part_of_refs, superseded_by_refs, merged_head_refs):
        assert all(ref.number >= 0 for ref in parse(text))
    assert all(branch.name for branch in merged_branches(text))
