"""``/stackbot restack`` after a squash-merged parent and ``/stackbot port <branch>``, through the
stand-in and real git (SQLite and PostgreSQL)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.sync.pipeline import Pipeline, open_pr


def bare_git(pipeline: Pipeline, *args: str, stdin: str | None = None) -> str:
    bare: Path = pipeline.control.repo(pipeline.repo).bare_path
    return subprocess.run(
        ["git", "-C", str(bare), *args], input=stdin, capture_output=True, text=True, check=True
    ).stdout


def test_restack_after_a_squash_merge_replays_only_the_childs_commit(
    stack_pipeline: Pipeline,
) -> None:
    pipeline = stack_pipeline
    control, repo = pipeline.control, pipeline.repo
    parent = open_pr(pipeline, author="carol", branch="carol/base", title="Base")
    child = open_pr(pipeline, author="carol", branch="carol/top", title="Top", base="carol/base")
    pipeline.deliver()
    old_head = pipeline.head(child)
    control.merge_pull(repo, parent, merger="bob", squash=True)
    pipeline.deliver()
    assert control.pull(repo, child).base_ref == "main"  # retargeted first
    control.comment(repo, child, "erin", "/stackbot restack")  # neither author nor vetter
    control.comment(repo, child, "carol", "/stackbot restack --push")
    pipeline.deliver()
    replies = [c.body for c in pipeline.replies(child)]
    assert "@erin, only the author or a vetter can ask for a restack." in replies
    [answer] = [r for r in replies if r.startswith("**stackbot restack**")]
    main = bare_git(pipeline, "rev-parse", "refs/heads/main").strip()
    assert answer.startswith(f"**stackbot restack** of #{child} onto `main` (`{main[:7]}`): clean.")
    assert (
        f"1 own commit (not in `{pipeline.head(parent)[:7]}`, the last head of #{parent}" in answer
    )
    assert f"- `{old_head[:7]}` Top (0): clean → `" in answer
    new_head = bare_git(pipeline, "rev-parse", "refs/heads/carol/top").strip()
    assert new_head != old_head and f"Pushed `{new_head[:7]}` to `carol/top`." in answer
    # The child's own commit alone, on main, with its author and message.
    assert bare_git(pipeline, "rev-parse", f"{new_head}^").strip() == main
    assert bare_git(pipeline, "log", "-1", "--format=%an|%s", new_head).strip() == "carol|Top (0)"
    files = set(bare_git(pipeline, "ls-tree", "-r", "--name-only", new_head).split())
    assert {"carol/base/0.txt", "carol/top/0.txt"} <= files


def test_restack_without_leave_to_push_only_reports(stack_pipeline: Pipeline) -> None:
    pipeline = stack_pipeline
    control, repo = pipeline.control, pipeline.repo
    parent = open_pr(pipeline, author="carol", branch="carol/base", title="Base")
    child = open_pr(pipeline, author="carol", branch="carol/top", title="Top", base="carol/base")
    pipeline.deliver()
    old_head = pipeline.head(child)
    control.merge_pull(repo, parent, merger="bob", squash=True)
    pipeline.deliver()
    control.comment(repo, child, "dave", "/stackbot restack --push")  # a vetter, not the author
    control.comment(repo, child, "dave", "/stackbot restack")
    pipeline.deliver()
    replies = [c.body for c in pipeline.replies(child)]
    assert "Only the pull request's author can allow a push to its branch (`--push`)." in replies
    [answer] = [r for r in replies if r.startswith("**stackbot restack**")]
    assert "nothing was pushed (the author can allow it with `/stackbot restack --push`" in answer
    assert bare_git(pipeline, "rev-parse", "refs/heads/carol/top").strip() == old_head
    # The sticky note about ghost commits offers the restack...
    [note] = [r for r in replies if r.startswith("<!-- stackbot:ghosts -->")]
    assert note == (
        "<!-- stackbot:ghosts -->\n**1 commit of this pull request is already on `main`** under "
        "another SHA (a parent that was squash- or rebase-merged), so it shows again in this "
        "pull request's diff and can conflict:\n\n"
        f"- `{pipeline.head(parent)[:7]}` Base (0)\n\n"
        "Comment `/stackbot restack` to replay only this pull request's own commits onto `main` "
        "(the author or a vetter; add `--push` as the author to let stackbot push the result to "
        "the branch)."
    )
    # ... and says the ghosts are gone once the author pushes the restacked branch.
    [mirror] = (pipeline.settings.mirrors_dir).iterdir()
    control.push_from(
        repo, mirror, "carol/top", source_ref=f"refs/stackbot/restack/{child}", pusher="carol"
    )
    pipeline.deliver()
    [note] = [c.body for c in pipeline.replies(child) if c.body.startswith("<!-- stackbot:ghosts")]
    assert note.endswith("None any more: this pull request holds only its own commits.")


def test_port_to_a_branch_pushes_a_commit_with_trailers_or_opens_a_draft_pr_on_conflict(
    stack_pipeline: Pipeline,
) -> None:
    pipeline = stack_pipeline
    control, repo = pipeline.control, pipeline.repo
    main = bare_git(pipeline, "rev-parse", "refs/heads/main").strip()
    control.set_branch(repo, "dev", main, pusher="bob")
    control.commit(repo, "dev", {"dev-only.txt": "dev\n"}, message="dev work", author="bob")
    number = open_pr(pipeline, author="carol", branch="carol/feat", title="Feature")
    pipeline.deliver()
    control.comment(repo, number, "carol", "/stackbot port dev")  # not a vetter
    control.comment(repo, number, "dave", "/stackbot port dev")
    pipeline.deliver()
    replies = [c.body for c in pipeline.replies(number)]
    assert any(r.startswith("@carol, only vetters") and "ask for a port" in r for r in replies)
    [answer] = [r for r in replies if r.startswith("**stackbot port**")]
    assert ": every file applied." in answer
    branch = f"stackbot/port-{number}-dev"
    assert f"Pushed as branch `{branch}`: open a pull request from it into `dev`." in answer
    ported = bare_git(pipeline, "rev-parse", f"refs/heads/{branch}").strip()
    assert (
        bare_git(pipeline, "rev-parse", f"{ported}^").strip()
        == bare_git(pipeline, "rev-parse", "refs/heads/dev").strip()
    )
    message = bare_git(pipeline, "log", "-1", "--format=%B", ported)
    assert "Applied verbatim (1):\n- carol/feat/0.txt\n" in message
    trailers = bare_git(pipeline, "interpret-trailers", "--parse", stdin=message)
    head = pipeline.head(number)
    assert (
        trailers
        == f"Upstream-PR: #{number}\nUpstream-Base: {main[:7]}\nUpstream-Head: {head[:7]}\n"
    )
    # dev writes the same file differently: the port conflicts; the bot opens a draft pull
    # request into dev from the port branch, the conflicting file holding conflict markers.
    control.commit(repo, "dev", {"carol/feat/0.txt": "dev's\n"}, message="dev", author="bob")
    dev = bare_git(pipeline, "rev-parse", "refs/heads/dev").strip()
    control.comment(repo, number, "dave", "/stackbot port dev")
    pipeline.deliver()
    answer = [c.body for c in pipeline.replies(number)][-1]
    assert answer.startswith(f"**stackbot port** of #{number}")
    hunk = (
        "- `carol/feat/0.txt` (contents)\n  at line 1:\n  ```\n  <<<<<<< dev\n  dev's\n"
        f"  =======\n  carol 0\n  >>>>>>> #{number}\n  ```"
    )
    assert hunk in answer
    drafts = [p for p in control.repo(repo).pulls.values() if p.head_ref == branch]
    [draft] = drafts
    assert (draft.draft, draft.state, draft.base_ref) == (True, "open", "dev")
    assert draft.author.endswith("[bot]")
    assert (
        f"conflicts; opened draft pull request #{draft.number} from `{branch}` with the "
        "conflicting files marked, to resolve there."
    ) in answer
    assert draft.body is not None and hunk in draft.body
    assert draft.body.startswith(f"Draft port of #{number} (")
    drafted = bare_git(pipeline, "rev-parse", f"refs/heads/{branch}").strip()
    assert bare_git(pipeline, "rev-parse", f"{drafted}^").strip() == dev
    marked = bare_git(pipeline, "show", f"{drafted}:carol/feat/0.txt")
    assert marked.startswith("<<<<<<< ") and "dev's\n=======\ncarol 0\n>>>>>>> " in marked
    message = bare_git(pipeline, "log", "-1", "--format=%B", drafted)
    assert "- carol/feat/0.txt (contents)\n" in message
    trailers = bare_git(pipeline, "interpret-trailers", "--parse", stdin=message)
    assert (
        trailers
        == f"Upstream-PR: #{number}\nUpstream-Base: {main[:7]}\nUpstream-Head: {head[:7]}\n"
    )
    # Asked again, the bot answers with the same draft pull request instead of a second one.
    control.comment(repo, number, "dave", "/stackbot port dev")
    pipeline.deliver()
    answer = [c.body for c in pipeline.replies(number)][-1]
    assert f"opened draft pull request #{draft.number} from `{branch}`" in answer
    assert [p.number for p in control.repo(repo).pulls.values() if p.head_ref == branch] == [
        draft.number
    ]
