"""A PR stacked on the CI bot's mirror branch ``pull-request/N``: a failing ``stackbot/base``
check and one comment until its base is changed, through the stand-in (SQLite and
PostgreSQL)."""

from __future__ import annotations

import subprocess

from tests.sync.pipeline import Pipeline, open_pr, push


def base_checks(pipeline: Pipeline, sha: str) -> list[tuple[str | None, str | None]]:
    runs = pipeline.control.check_runs(pipeline.repo, sha)
    return [(r.conclusion, r.title) for r in runs if r.name == "stackbot/base"]


def test_a_pr_based_on_a_ci_mirror_branch_fails_its_base_check_until_retargeted(
    stack_pipeline: Pipeline,
) -> None:
    pipeline = stack_pipeline
    control, repo = pipeline.control, pipeline.repo
    parent = open_pr(pipeline, author="carol", branch="carol/base", title="Base")
    mirror = f"pull-request/{parent}"
    control.set_branch(repo, mirror, pipeline.head(parent), pusher="copy-pr-bot")
    child = open_pr(pipeline, author="carol", branch="carol/top", title="Top", base=mirror)
    pipeline.deliver()
    assert base_checks(pipeline, pipeline.head(child)) == [
        ("failure", "Retarget to main before merging")
    ]
    assert base_checks(pipeline, pipeline.head(parent)) == []  # based on main: no check at all
    assert pipeline.replies(parent) == []
    [said] = pipeline.replies(child)
    assert said.body == (
        "<!-- stackbot:base -->\n"
        f"**Retarget to `main` before merging.** `{mirror}` is the branch NVIDIA's CI bot "
        f"mirrors #{parent} to after `/ok to test`. Stacking on it is right while #{parent} is "
        "reviewed, but merging this pull request would land its squash in the bot's branch, "
        "not in `main`. Change this pull request's base to `main` (Edit, next to the title) "
        f"once #{parent} has merged; the `stackbot/base` check fails until then."
    )
    # A new push: the new head fails too; still one comment.
    new_head = push(pipeline, child, author="carol")
    pipeline.deliver()
    assert base_checks(pipeline, new_head) == [("failure", "Retarget to main before merging")]
    assert len(pipeline.replies(child)) == 1
    # Retargeted: the check passes on the head and the comment says it is done.
    control.edit_pull(repo, child, base="main", editor="carol")
    pipeline.deliver()
    assert base_checks(pipeline, new_head)[-1] == ("success", "Base is main")
    [said] = pipeline.replies(child)
    assert said.body == (
        "<!-- stackbot:base -->\n~~Retarget to `main` before merging.~~ Done: this pull request's "
        "base is `main` now, and the `stackbot/base` check passes."
    )
    # Nothing more once done.
    control.edit_pull(repo, child, title="Top, retitled", editor="carol")
    pipeline.deliver()
    assert len(base_checks(pipeline, new_head)) == 2


def test_the_patterns_are_a_setting(stack_pipeline: Pipeline) -> None:
    pipeline = stack_pipeline
    pipeline.worker.settings = pipeline.settings.model_copy(
        update={"protected_base_patterns": ["release/*"]}
    )
    control, repo = pipeline.control, pipeline.repo
    control.set_branch(repo, "release/1.0", _main(pipeline), pusher="bob")
    child = open_pr(pipeline, author="carol", branch="carol/rel", title="Rel", base="release/1.0")
    pipeline.deliver()
    assert base_checks(pipeline, pipeline.head(child)) == [
        ("failure", "Retarget to main before merging")
    ]
    [said] = pipeline.replies(child)
    assert "`release/1.0` is a branch pull requests must not be merged into." in said.body


def _main(pipeline: Pipeline) -> str:
    bare = pipeline.control.repo(pipeline.repo).bare_path
    return subprocess.run(
        ["git", "-C", str(bare), "rev-parse", "refs/heads/main"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
