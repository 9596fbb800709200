"""The demo's story, played on the GitHub stand-in: a repository, people, and the pull requests
of a ``parallel_state`` deprecation series.

- main, then #8893 (HybridStack passes its collection; it superseded #8040) merged into main;
- #8034 (adds ``amax_reduction_group``) → #8035 (the FP8/FP4 contexts use the owner's
  collection; *depends on #8034*) → #8748 (TE wrappers; its base branch is #8035's branch), all
  *part of #6307*; #8034 and #8035 were branched before #8893 merged, so their allowlists
  conflict with main's (resolved by regeneration);
- #8050 edits the same lines of ``transformer_layer.py`` as #8035: a real conflict;
- #8040, superseded by #8893 and closed.

main is protected (one approving review, the check ``stackbot/tests: amax-group 1x4``) and
deletes a PR's branch when it merges. Once the series is tested, ``maintainer-p`` reviews it and
lands it with ``/stackbot land`` (:mod:`stackbot.demo.landing` follows that); #8050 stays open.

People: ``connor-xy`` is a trusted author (tested automatically), ``maintainer-p`` a vetter
(write access), ``contributor-z`` neither: its ``/ok to test`` is refused, the vetter's accepted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from stackbot.demo import megatron_files as mf
from stackbot.domain.allowlist import Allowlist, is_scanned_path, render_allowlist, scan_current

REPO = "NVIDIA/Megatron-LM"
TRUSTED = "connor-xy"
VETTER = "maintainer-p"
OUTSIDER = "contributor-z"
TRACKING_ISSUE = 6307
SERIES_KEY = "#6307"
# PRs the demo expects a final report on (open at the end).
REPORTED_PRS = (8034, 8035, 8748, 8050)
TESTED_PRS = (8034, 8035, 8748)  # the series the demo ends by landing
# What main's branch protection asks of a PR before it merges (besides one approving review by
# someone with write access): a check stackbot posts on every PR of a tested tree.
REQUIRED_CHECK = "stackbot/tests: amax-group 1x4"

Say = Callable[[str], None]


def with_allowlist(files: Mapping[str, str]) -> dict[str, str]:
    """``files`` plus the allowlist its checker would write (the PR 'refreshed' it)."""
    reads = {}
    for path, text in files.items():
        if is_scanned_path(path):
            outcome = scan_current(path, text)
            if outcome.error is None and outcome.entries:
                reads[path] = outcome.entries
    allowlist = Allowlist.from_reads(mf.CHECKER_COMMENT, reads)
    return {**files, mf.ALLOWLIST_PATH: render_allowlist(allowlist).decode()}


@dataclass(frozen=True)
class DemoPr:
    number: int
    author: str
    branch: str
    title: str
    body: str
    changes: Mapping[str, str]
    base: str = "main"
    start_from: str | None = None  # branch the head branch starts from (stacked work)


def _tree(*layers: Mapping[str, str]) -> dict[str, str]:
    tree: dict[str, str] = {}
    for layer in layers:
        tree.update(layer)
    return tree


MAIN = mf.main_files()
CHANGES_8893 = {"megatron/core/ssm/hybrid_stack.py": mf.HYBRID_STACK_8893}
CHANGES_8034 = {
    "megatron/core/fp8_utils.py": mf.FP8_UTILS_8034,
    "tests/unit_tests/test_amax_reduction_group.py": mf.TEST_AMAX_GROUP,
}
CHANGES_8035 = {
    "megatron/core/transformer/transformer_layer.py": mf.TRANSFORMER_LAYER_8035,
    # its own test file: compared with main's version of it in #8035's comment
    "tests/unit_tests/transformer/test_quantization_context_amax_group.py": (
        mf.TEST_QUANT_CONTEXT_8035
    ),
}
CHANGES_8748 = {
    "megatron/core/extensions/transformer_engine.py": mf.TE_EXTENSION_8748,
    "tests/unit_tests/extension/__init__.py": "",
    "tests/unit_tests/extension/test_te_amax_reduction_group.py": mf.TEST_TE_AMAX,
}
CHANGES_8050 = {"megatron/core/transformer/transformer_layer.py": mf.TRANSFORMER_LAYER_8050}


def _refreshed(*layers: Mapping[str, str]) -> dict[str, str]:
    """The last layer's changes plus the allowlist of the whole tree they make."""
    whole = with_allowlist(_tree(MAIN, *layers))
    return {**layers[-1], mf.ALLOWLIST_PATH: whole[mf.ALLOWLIST_PATH]}


SERIES_PRS = (
    DemoPr(
        8034,
        TRUSTED,
        "yx/pstate-b1-amax-group",
        "Take the FP8/FP4 amax reduction group from a process-group collection",
        "Adds `amax_reduction_group(pg_collection, tp_only_amax_red)`: `tp_cp` when only TP "
        "reduces, else `tp_dp_cp`, and a `ValueError` naming a missing field.\n\nPart of #6307.",
        CHANGES_8034,
    ),
    DemoPr(
        8035,
        TRUSTED,
        "yx/pstate-b2-amax-callers",
        "Pass the owner's collection to FP8/FP4 quantization contexts",
        "Depends on #8034, which adds `amax_reduction_group`.\n\n"
        "On 4 GPUs a layer whose own TP×DP×CP ranks are [0, 2] reduces over the global "
        "group on main; with this change it reduces over its own ranks.\n\nPart of #6307.",
        _refreshed(CHANGES_8034, CHANGES_8035),
        start_from="yx/pstate-b1-amax-group",
    ),
    DemoPr(
        8748,
        OUTSIDER,
        "cz/te-linear-collections",
        "Pass owners' process-group collections to the TE linears they build",
        "- Depends on #8035\n- TELinear keeps its collection as `_pg_collection`.\n\nPart of #6307.",
        _refreshed(CHANGES_8034, CHANGES_8035, CHANGES_8748),
        base="yx/pstate-b2-amax-callers",
        start_from="yx/pstate-b2-amax-callers",
    ),
    DemoPr(
        8050,
        OUTSIDER,
        "cz/layer-recipe-argument",
        "Let TransformerLayer.fp8_context take a recipe",
        "A small refactor of the layer's FP8 context.\n\nPart of #6307.",
        CHANGES_8050,
    ),
)


class DemoScenario:
    """Plays the story on a running stand-in (``control`` is its control API)."""

    def __init__(self, control: Any, say: Say) -> None:
        self.c = control
        self.say = say

    def setup(self) -> None:
        c = self.c
        for login in (TRUSTED, VETTER, OUTSIDER):
            c.add_user(login, email=f"{login}@users.noreply.github.com")
        c.create_repo(REPO, files=with_allowlist(MAIN), author=VETTER)
        # As on GitHub with "automatically delete head branches": a PR still based on a merged
        # PR's branch would be closed by GitHub, so the landing retargets it first.
        c.set_merge_settings(REPO, delete_branch_on_merge=True)
        c.set_permission(REPO, VETTER, "write")
        c.set_permission(REPO, TRUSTED, "write")
        c.set_permission(REPO, OUTSIDER, "read")
        c.open_issue(
            REPO,
            number=TRACKING_ISSUE,
            author=VETTER,
            title="[TRACKING] Deprecate parallel_state: explicit process groups in megatron/core",
        )
        self.say(f"created {REPO}: a Megatron-like main branch with its allowlist, issue #6307")

    def branch_before_main_moves(self) -> None:
        """#8034 and #8035 are written on main before #8893 merges: their allowlists will
        conflict with main's."""
        c = self.c
        first, second = SERIES_PRS[0], SERIES_PRS[1]
        c.commit(
            REPO,
            first.branch,
            dict(first.changes),
            message=first.title,
            author=first.author,
            parent=self._sha("main"),
        )
        c.commit(
            REPO,
            second.branch,
            dict(second.changes),
            message=second.title,
            author=second.author,
            parent=self._sha(first.branch),
        )

    def merge_superseding_change(self) -> None:
        c = self.c
        change = _refreshed(CHANGES_8893)
        c.open_pull(
            REPO,
            author=OUTSIDER,
            head="cz/hybrid-stack-collection",
            title="Pass the collection to HybridStack",
            body="Part of #6307.",
            number=8040,
            files=change,
        )
        c.open_pull(
            REPO,
            author=VETTER,
            head="mp/hybrid-stack-collection",
            title="HybridStack reduces amaxes over its own collection",
            body="Carries #8040's change with review fixes.\n\nPart of #6307.",
            number=8893,
            files=change,
        )
        c.comment(
            REPO,
            8040,
            OUTSIDER,
            "Superseded by #8893, which carries this change. Closing so review happens in one place.",
        )
        c.close_pull(REPO, 8040, sender=OUTSIDER)
        c.merge_pull(REPO, 8893, merger=VETTER)
        self.say("#8040 superseded by #8893; #8893 merged into main (main's allowlist moved)")

    def protect_main(self) -> None:
        """main's branch protection, as a maintained repository has it: merging needs one
        approving review by someone with write access and stackbot's test check passed."""
        self.c.protect_branch(REPO, "main", required_checks=[REQUIRED_CHECK], approvals=1)
        self.say(
            f"main is protected: a PR merges with 1 approving review by someone with write "
            f"access and the check `{REQUIRED_CHECK}` passed"
        )

    def open_series(self) -> dict[int, str]:
        c = self.c
        heads = {}
        for pr in SERIES_PRS:
            if pr.number in (8748, 8050):
                start = self._sha(pr.start_from or "main")
                c.commit(
                    REPO,
                    pr.branch,
                    dict(pr.changes),
                    message=pr.title,
                    author=pr.author,
                    parent=start,
                )
            pull = c.open_pull(
                REPO,
                author=pr.author,
                head=pr.branch,
                base=pr.base,
                title=pr.title,
                body=pr.body,
                number=pr.number,
            )
            heads[pr.number] = pull.head_sha
            self.say(f"opened #{pr.number} by {pr.author}: {pr.title}")
        return heads

    def vet(self, heads: Mapping[int, str]) -> None:
        c = self.c
        short = heads[8748][:7]
        c.comment(REPO, 8748, OUTSIDER, f"/ok to test {short}")
        self.say(f"{OUTSIDER} (not a vetter) commented `/ok to test {short}` on #8748")
        c.comment(REPO, 8748, VETTER, f"/ok to test {short}")
        self.say(f"{VETTER} (a vetter) commented `/ok to test {short}` on #8748")

    def refresh_branches(self) -> dict[int, str]:
        """Before landing, the authors bring their branches up to date and refresh the
        allowlist, as Megatron-LM's checker asks: GitHub's merge button cannot regenerate a
        generated file. Without it GitHub refuses #8035 (its allowlist conflicts with main's
        since #8893) and merges #8748 textually, leaving a stale allowlist on main: not the tree
        stackbot tested. With it each merge writes exactly the tested tree. Returns the new
        heads (the series tree is unchanged: its results are reused)."""
        from stackbot.standin import hosting

        c = self.c
        bare = c.repo(REPO).bare_path
        main = self._sha("main")
        second, third = SERIES_PRS[1], SERIES_PRS[2]
        updates = (
            (second, main, "main", (CHANGES_8034, CHANGES_8035)),
            (third, None, second.branch, (CHANGES_8034, CHANGES_8035, CHANGES_8748)),
        )
        heads: dict[int, str] = {}
        for pr, other, other_name, layers in updates:
            other = other or heads[second.number]
            whole = with_allowlist(_tree(MAIN, CHANGES_8893, *layers))
            sha = hosting.commit_files(
                bare,
                parent=self._sha(pr.branch),
                files={**CHANGES_8893, mf.ALLOWLIST_PATH: whole[mf.ALLOWLIST_PATH]},
                message=f"Merge branch '{other_name}' into {pr.branch}\n\n"
                f"Refresh {mf.ALLOWLIST_PATH}.\n",
                author=c.signature(pr.author),
                timestamp=c.state.now(),
                extra_parents=(other,),
            )
            c.set_branch(REPO, pr.branch, sha, pusher=pr.author)
            heads[pr.number] = sha
            self.say(
                f"{pr.author} merged {other_name} into #{pr.number}'s branch and refreshed its "
                f"allowlist ({sha[:7]}): GitHub's merge cannot regenerate it"
            )
        return heads

    def vet_head(self, number: int, sha: str) -> None:
        self.c.comment(REPO, number, VETTER, f"/ok to test {sha[:7]}")
        self.say(f"{VETTER} (a vetter) commented `/ok to test {sha[:7]}` on #{number}")

    def review(self) -> None:
        """The vetter reviews the tested series and approves each PR (main's protection asks
        for one approving review; none of the three is the vetter's own)."""
        for number in TESTED_PRS:
            self.c.approve(REPO, number, VETTER)
        names = ", ".join(f"#{n}" for n in TESTED_PRS[:-1]) + f" and #{TESTED_PRS[-1]}"
        self.say(f"{VETTER} reviewed {names} and approved each (what main's protection asks)")

    def land(self) -> None:
        top = TESTED_PRS[-1]
        self.c.comment(REPO, top, VETTER, "/stackbot land")
        self.say(f"{VETTER} commented `/stackbot land` on #{top}: land the tested series")

    def _sha(self, branch: str) -> str:
        from stackbot.standin import hosting

        sha = hosting.resolve(self.c.repo(REPO).bare_path, f"refs/heads/{branch}")
        if sha is None:
            raise RuntimeError(f"the demo repository has no branch {branch!r}")
        return str(sha)
