"""Which children of a merged PR are retargeted, and which closed PRs were closed by their base
branch going (pure)."""

from __future__ import annotations

from stackbot.domain.records import PrRecord
from stackbot.domain.retarget import children_to_retarget, closed_children
from stackbot.domain.types import PrNumber

REPO = "NVIDIA/Megatron-LM"


def pr(number: int, **fields: object) -> PrRecord:
    return PrRecord(PrNumber(number), **fields)  # type: ignore[arg-type]


PARENT = pr(8034, merged=True, state="closed", head_ref="a/base", head_sha="1" * 40,
            base_ref="main", head_repo=REPO)  # fmt: skip


def test_open_children_of_the_merged_head_branch_are_chosen() -> None:
    pulls = [
        pr(8035, base_ref="a/base"),
        pr(8748, base_ref="a/base", state="closed"),
        pr(8800, base_ref="main"),
        pr(8801, base_ref="a/base", draft=True),
    ]
    assert children_to_retarget(REPO, PARENT, pulls) == [8035, 8801]


def test_a_fork_parent_or_an_unmerged_one_has_no_children_here() -> None:
    pulls = [pr(8035, base_ref="a/base")]
    fork = pr(8034, merged=True, state="closed", head_ref="a/base", head_repo="someone/fork")
    assert children_to_retarget(REPO, fork, pulls) == []
    assert children_to_retarget(REPO, pr(8034, head_ref="a/base", head_repo=REPO), pulls) == []


def test_children_closed_with_their_base_get_a_recovery_command() -> None:
    pulls = [PARENT, pr(8035, state="closed", base_ref="a/base", title="Mid"),
             pr(8036, state="closed", merged=True, base_ref="a/base"), pr(8037, base_ref="a/base")]  # fmt: skip
    [closed] = closed_children(REPO, pulls)
    assert (closed.number, closed.parent, closed.base_ref) == (8035, 8034, "a/base")
    assert closed.recovery_command() == (
        f"git push origin {'1' * 40}:refs/heads/a/base && gh pr reopen 8035 && "
        "gh pr edit 8035 --base main && git push origin --delete a/base"
    )
