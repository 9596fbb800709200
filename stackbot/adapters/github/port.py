"""``GitHubPort``: what the services and the worker ask of GitHub, as a ``Protocol``.

:class:`~stackbot.adapters.github.client.GitHubClient` is the implementation (against GitHub or
the stand-in); tests may pass anything with these methods. Only the calls the services make are
here: a method the client has and no service calls (``list_stacks``, ``get_comment``...) is left
out, so a fake need not write it.

This module imports no PyGithub: the worker imports it at start and builds the client only when
a handler first asks for it. Listings are typed as ``Sequence`` because callers only iterate
them; the client returns lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from stackbot.domain.records import (
    CommentRecord,
    CommitRecord,
    MergeRules,
    PrRecord,
    ReviewRecord,
)
from stackbot.domain.types import PrNumber, RepoName

if TYPE_CHECKING:
    from stackbot.adapters.github.client import GitHubClient


class GitHubPort(Protocol):
    # -- pull requests --------------------------------------------------------------------------

    def get_pull(self, repo: RepoName, number: PrNumber) -> PrRecord:
        """The PR with its native stack, without commits or comments."""
        ...

    def list_open_pulls(self, repo: RepoName) -> Sequence[PrRecord]:
        """Every open PR of ``repo``, oldest first."""
        ...

    def list_pull_commits(self, repo: RepoName, number: PrNumber) -> Sequence[CommitRecord]:
        """The PR's commits, oldest first."""
        ...

    def create_pull(
        self, repo: RepoName, *, head: str, base: str, title: str, body: str, draft: bool = False
    ) -> PrNumber:
        """Open a pull request from branch ``head`` into ``base``; returns its number."""
        ...

    def update_pull_base(self, repo: RepoName, number: PrNumber, base: str) -> None:
        """Change PR ``number``'s base branch."""
        ...

    def clone_url(self, repo: RepoName) -> str:
        """Where git fetches ``repo`` from (a ``file://`` path on the stand-in)."""
        ...

    # -- comments -------------------------------------------------------------------------------

    def list_issue_comments(
        self, repo: RepoName, number: PrNumber, *, since: str | None = None
    ) -> Sequence[CommentRecord]:
        """The comments on PR or issue ``number``, oldest first; ``since`` (ISO 8601): only
        those updated at or after it."""
        ...

    def create_comment(self, repo: RepoName, number: PrNumber, body: str) -> int:
        """Post a comment on PR or issue ``number``; returns its id."""
        ...

    def edit_comment(self, repo: RepoName, comment_id: int, body: str) -> None:
        """Replace a comment's body (raises ``NotFound`` when it was deleted)."""
        ...

    # -- people ---------------------------------------------------------------------------------

    def collaborator_permission(self, repo: RepoName, user: str) -> str:
        """``admin|maintain|write|triage|read|none``; an unknown user is ``none``."""
        ...

    def is_org_member(self, org: str, user: str) -> bool:
        """Whether ``user`` belongs to ``org`` (publicly, if we cannot see private members)."""
        ...

    # -- check runs and statuses ----------------------------------------------------------------

    def create_check_run(
        self,
        repo: RepoName,
        head_sha: str,
        name: str,
        *,
        status: str,
        conclusion: str | None = None,
        title: str,
        summary: str,
        text: str | None = None,
        details_url: str | None = None,
        external_id: str | None = None,
    ) -> int:
        """Create a check run on ``head_sha``; returns its id (``ChecksNotPermitted`` if barred)."""
        ...

    def update_check_run(
        self,
        repo: RepoName,
        check_run_id: int,
        *,
        status: str,
        conclusion: str | None = None,
        title: str,
        summary: str,
        text: str | None = None,
        details_url: str | None = None,
    ) -> None:
        """Set a check run's status, conclusion and output."""
        ...

    def create_commit_status(
        self,
        repo: RepoName,
        sha: str,
        *,
        state: str,
        context: str,
        description: str,
        target_url: str | None = None,
    ) -> None:
        """Set the commit status ``context`` on ``sha`` (where check runs are not permitted)."""
        ...

    # -- landing --------------------------------------------------------------------------------

    def merge_pull(self, repo: RepoName, number: PrNumber, *, sha: str, method: str) -> str:
        """Merge the PR at head ``sha`` with ``method``; the base's new tip (``GitHubRejected``
        409: the head moved; 405: GitHub will not merge it, with its reason)."""
        ...

    def enqueue_pull(self, repo: RepoName, number: PrNumber, *, expected_head: str) -> int:
        """Put the PR into its base's merge queue if its head is still ``expected_head``; its
        position (``GitHubRejected``: GitHub will not queue it, with its reason)."""
        ...

    def dequeue_pull(self, repo: RepoName, number: PrNumber) -> None:
        """Take the PR out of the merge queue."""
        ...

    def branch_sha(self, repo: RepoName, branch: str) -> str:
        """Where ``branch`` points now."""
        ...

    def commit_tree(self, repo: RepoName, sha: str) -> str:
        """The tree of commit ``sha``."""
        ...

    def merge_rules(self, repo: RepoName, branch: str) -> MergeRules:
        """What ``branch``'s protection requires of a PR before it merges."""
        ...

    def list_reviews(self, repo: RepoName, number: PrNumber) -> Sequence[ReviewRecord]:
        """The PR's reviews, oldest first."""
        ...

    def check_outcomes(self, repo: RepoName, sha: str) -> dict[str, str]:
        """Check runs' and commit statuses' outcomes on ``sha`` by name."""
        ...


if TYPE_CHECKING:

    def _client_is_a_port(client: GitHubClient) -> GitHubPort:
        """Checked by mypy only: the real client satisfies the port."""
        return client
