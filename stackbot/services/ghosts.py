"""Ghost commits: commits of an open PR whose change (patch-id) is already on its base under
another SHA, as after a parent was squash-merged. The PR gets one sticky note (its own marker,
edited in place) offering ``/stackbot restack``, and the note says so once they are gone.
Run by the ``check_base`` task, on the PR events that can bring ghosts (opened, pushed,
retargeted, reopened)."""

from __future__ import annotations

from collections.abc import Sequence

from stackbot.adapters.git import GitMirror
from stackbot.adapters.git_replay import read_commit
from stackbot.adapters.github.port import GitHubPort
from stackbot.config import Settings
from stackbot.domain.records import CommentRecord, PrRecord
from stackbot.domain.restack import GHOST_MARKER, ghost_comment, ghosts_gone_comment
from stackbot.domain.types import RepoName
from stackbot.services.restack import ghost_commits


def check_ghosts(
    settings: Settings,
    client: GitHubPort,
    repo: RepoName,
    pr: PrRecord,
    comments: Sequence[CommentRecord],
) -> None:
    said = next((c for c in comments if c.body.startswith(GHOST_MARKER) and c.id), None)
    mirror = GitMirror.open_or_clone(
        client.clone_url(repo), settings.mirrors_dir, timeout=settings.git_fetch_timeout_s
    )
    with mirror:
        mirror.fetch([f"refs/heads/{pr.base_ref}", f"refs/pull/{pr.number}/head"])
        head = mirror.rev_parse(f"refs/pull/{pr.number}/head")
        base = mirror.rev_parse(f"refs/heads/{pr.base_ref}")
        found = ghost_commits(mirror, head, base)
        ghosts = tuple((sha, read_commit(mirror, sha).subject) for sha in found)
    if ghosts:
        body = ghost_comment(pr.number, pr.base_ref, ghosts)
        if said is None:
            client.create_comment(repo, pr.number, body)
        elif said.body != body and said.id is not None:
            client.edit_comment(repo, said.id, body)
    elif said is not None and said.id is not None and "~~" not in said.body:
        client.edit_comment(repo, said.id, ghosts_gone_comment(pr.base_ref))
