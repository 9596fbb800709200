"""Driving the stand-in from tests and the demo: what users, maintainers and GitHub itself do.

Everything here happens "on GitHub's side": creating repositories, pushing branches, opening
and merging PRs (real git merges), commenting as a user, stacking PRs, installing the App,
injecting faults. Each change sends the webhook deliveries GitHub would send. The same calls
are served over HTTP under ``/_standin/...`` (see :mod:`stackbot.standin.routes_control`).

The API is split by subject: :class:`~stackbot.standin.control_people.PeopleControl`
(accounts, the App, the webhook), :class:`~stackbot.standin.control_repos.RepoControl`
(repositories, pushes, faults, read-back) and, here, pull requests, issues and comments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stackbot.standin import hosting, merge_queue, merging, payloads
from stackbot.standin.auth import Caller, StandinHTTPError
from stackbot.standin.control_repos import RepoControl, StandinError
from stackbot.standin.routes_issues import add_comment, edit_comment
from stackbot.standin.routes_merge import submit_review
from stackbot.standin.routes_pulls import create_stack
from stackbot.standin.state import Issue, IssueComment, Protection, Pull, Stack, StandinState

__all__ = ["StandinControl", "StandinError"]


class StandinControl(RepoControl):
    def __init__(self, state: StandinState) -> None:
        super().__init__(state)

    # -- pull requests and issues ----------------------------------------------------------

    def open_pull(
        self,
        repo_name: str,
        *,
        author: str,
        head: str,
        title: str,
        base: str | None = None,
        body: str = "",
        draft: bool = False,
        number: int | None = None,
        files: Mapping[str, str | bytes | None] | None = None,
        message: str | None = None,
    ) -> Pull:
        """Open a PR from branch ``head``; with ``files``, first commit them onto ``head``
        (branched from ``base`` if ``head`` does not exist yet)."""
        repo = self.repo(repo_name)
        base_ref = base or repo.default_branch
        base_sha = hosting.resolve(repo.bare_path, f"refs/heads/{base_ref}")
        if base_sha is None:
            raise StandinError(f"{repo_name} has no base branch {base_ref!r}")
        if files is not None:
            parent = hosting.resolve(repo.bare_path, f"refs/heads/{head}") or base_sha
            self.commit(
                repo_name, head, files, message=message or title, author=author, parent=parent
            )
        head_sha = hosting.resolve(repo.bare_path, f"refs/heads/{head}")
        if head_sha is None:
            raise StandinError(f"{repo_name} has no branch {head!r}: push it first or give files")
        state = self.state
        with state.lock:
            chosen = number if number is not None else repo.next_number()
            if chosen in repo.pulls or chosen in repo.issues:
                raise StandinError(f"#{chosen} already exists in {repo_name}")
            if any(
                p.state == "open" and p.head_ref == head and p.base_ref == base_ref
                for p in repo.pulls.values()
            ):
                raise StandinError(f"a pull request already exists for {head} into {base_ref}")
            self.ensure_user(author)
            now = state.now()
            pull = Pull(
                chosen,
                state.new_id(),
                title,
                body,
                author,
                head,
                head_sha,
                base_ref,
                base_sha,
                now,
                now,
                draft=draft,
            )
            repo.pulls[chosen] = pull
            hosting.update_ref(repo.bare_path, f"refs/pull/{chosen}/head", head_sha)
            event = payloads.pull_request_event(state, repo, pull, "opened", author)
        self._send([("pull_request", event, repo.full_name)])
        return pull

    def edit_pull(
        self,
        repo_name: str,
        number: int,
        *,
        title: str | None = None,
        body: str | None = None,
        base: str | None = None,
        editor: str | None = None,
    ) -> Pull:
        state = self.state
        with state.lock:
            repo = self.repo(repo_name)
            pull = self.pull(repo_name, number)
            changes: dict[str, Any] = {}
            if title is not None and title != pull.title:
                changes["title"] = {"from": pull.title}
                pull.title = title
            if body is not None and body != pull.body:
                changes["body"] = {"from": pull.body or ""}
                pull.body = body
            if base is not None and base != pull.base_ref:
                new_sha = hosting.resolve(repo.bare_path, f"refs/heads/{base}")
                if new_sha is None:
                    raise StandinError(f"{repo_name} has no branch {base!r}")
                changes["base"] = {"ref": {"from": pull.base_ref}, "sha": {"from": pull.base_sha}}
                pull.base_ref, pull.base_sha = base, new_sha
            if not changes:
                return pull
            pull.updated_at = state.now()
            event = payloads.pull_request_event(
                state, repo, pull, "edited", editor or pull.author, changes=changes
            )
        self._send([("pull_request", event, repo.full_name)])
        return pull

    def set_draft(
        self, repo_name: str, number: int, draft: bool, *, sender: str | None = None
    ) -> Pull:
        return self._change_pull(
            repo_name, number, "converted_to_draft" if draft else "ready_for_review", sender
        )

    def close_pull(self, repo_name: str, number: int, *, sender: str | None = None) -> Pull:
        return self._change_pull(repo_name, number, "closed", sender)

    def reopen_pull(self, repo_name: str, number: int, *, sender: str | None = None) -> Pull:
        return self._change_pull(repo_name, number, "reopened", sender)

    def _change_pull(self, repo_name: str, number: int, action: str, sender: str | None) -> Pull:
        state = self.state
        with state.lock:
            repo = self.repo(repo_name)
            pull = self.pull(repo_name, number)
            if (
                action in ("closed", "converted_to_draft", "ready_for_review")
                and pull.state != "open"
            ):
                raise StandinError(f"#{number} is not open")
            if action == "reopened" and (pull.state != "closed" or pull.merged):
                raise StandinError(f"#{number} is not a closed, unmerged pull request")
            now = state.now()
            if action == "closed":
                pull.state, pull.closed_at = "closed", now
                pull.base_sha = (
                    hosting.resolve(repo.bare_path, f"refs/heads/{pull.base_ref}") or pull.base_sha
                )
            elif action == "reopened":
                pull.state, pull.closed_at = "open", None
            else:
                pull.draft = action == "converted_to_draft"
            pull.updated_at = now
            event = payloads.pull_request_event(state, repo, pull, action, sender or pull.author)
        self._send([("pull_request", event, repo.full_name)])
        return pull

    def merge_pull(
        self,
        repo_name: str,
        number: int,
        *,
        merger: str,
        message: str | None = None,
        squash: bool = False,
        method: str | None = None,
        sha: str | None = None,
    ) -> str:
        """``merger`` merges the PR as with GitHub's merge button (:mod:`.merging`: its method,
        ``sha`` check and branch protection); returns the new tip of the base branch."""
        state = self.state
        with state.lock:
            repo = self.repo(repo_name)
            pull = self.pull(repo_name, number)
            if pull.state != "open":
                raise StandinError(f"#{number} is not open")
            try:
                merged, events = merging.merge_pull(
                    state,
                    repo,
                    pull,
                    caller=Caller("user", login=merger),
                    merger=merger,
                    method=method or ("squash" if squash else "merge"),
                    sha=sha,
                    title=message.split("\n", 1)[0] if message else None,
                    message=message.split("\n", 1)[1].strip()
                    if message and "\n" in message
                    else None,
                )
            except merging.Unmergeable as conflict:
                paths = ", ".join(conflict.paths)
                raise StandinError(f"#{number} does not merge cleanly: {paths}") from None
            except StandinHTTPError as refused:
                raise StandinError(f"#{number} cannot be merged: {refused.message}") from None
        self._send(events)
        return merged

    def approve(
        self, repo_name: str, number: int, reviewer: str, *, state: str = "APPROVED"
    ) -> int:
        """``reviewer`` submits a review (``APPROVED`` by default) on the PR's head; returns its
        id (a ``pull_request_review`` ``submitted`` delivery goes out)."""
        with self.state.lock:
            repo = self.repo(repo_name)
            pull = self.pull(repo_name, number)
            review, payload = submit_review(self.state, repo, pull, reviewer, state, "")
        self._send([("pull_request_review", payload, repo.full_name)])
        return review.id

    def protect_branch(
        self,
        repo_name: str,
        branch: str,
        *,
        required_checks: list[str] | None = None,
        approvals: int | None = None,
        dismiss_stale_reviews: bool = False,
    ) -> None:
        """Protect ``branch``: these check contexts must pass, this many approvals are needed."""
        with self.state.lock:
            self.repo(repo_name).protections[branch] = Protection(
                required_contexts=required_checks,
                required_approving_review_count=approvals,
                dismiss_stale_reviews=dismiss_stale_reviews,
            )

    def require_merge_queue(
        self, repo_name: str, branch: str, *, method: str | None = "MERGE"
    ) -> None:
        """``branch`` requires GitHub's merge queue, merging by ``method`` (``MERGE``,
        ``SQUASH``, ``REBASE``; None: the requirement goes, and with it the queue)."""
        if method is not None and method not in merge_queue.QUEUE_METHODS:
            raise StandinError(
                f"merge queue method must be MERGE, SQUASH or REBASE, not {method!r}"
            )
        with self.state.lock:
            repo = self.repo(repo_name)
            if method is None:
                repo.merge_queues.pop(branch, None)
                repo.queue = [e for e in repo.queue if e.base_ref != branch]
            else:
                repo.merge_queues[branch] = method

    def set_merge_settings(
        self,
        repo_name: str,
        *,
        allow: tuple[str, ...] = ("merge", "squash", "rebase"),
        delete_branch_on_merge: bool = False,
    ) -> None:
        """The repository's merge button: which methods it offers, whether it deletes heads."""
        with self.state.lock:
            repo = self.repo(repo_name)
            repo.allow_merge_commit = "merge" in allow
            repo.allow_squash_merge = "squash" in allow
            repo.allow_rebase_merge = "rebase" in allow
            repo.delete_branch_on_merge = delete_branch_on_merge

    def open_issue(
        self, repo_name: str, *, author: str, title: str, body: str = "", number: int | None = None
    ) -> Issue:
        state = self.state
        with state.lock:
            repo = self.repo(repo_name)
            chosen = number if number is not None else repo.next_number()
            if chosen in repo.pulls or chosen in repo.issues:
                raise StandinError(f"#{chosen} already exists in {repo_name}")
            self.ensure_user(author)
            now = state.now()
            issue = Issue(chosen, state.new_id(), title, body, author, now, now)
            repo.issues[chosen] = issue
        return issue

    def comment(self, repo_name: str, number: int, author: str, body: str) -> IssueComment:
        """``author`` comments on issue or PR ``number`` (an ``issue_comment`` delivery)."""
        state = self.state
        with state.lock:
            repo = self.repo(repo_name)
            if number not in repo.pulls and number not in repo.issues:
                raise StandinError(f"{repo_name} has no issue or pull request #{number}")
            self.ensure_user(author)
            comment = add_comment(state, repo, number, author, body)
            event = payloads.issue_comment_event(state, repo, comment, "created", author)
        self._send([("issue_comment", event, repo.full_name)])
        return comment

    def edit_comment(
        self, repo_name: str, comment_id: int, body: str, *, editor: str | None = None
    ) -> IssueComment:
        state = self.state
        with state.lock:
            repo = self.repo(repo_name)
            comment = repo.comments.get(comment_id)
            if comment is None:
                raise StandinError(f"{repo_name} has no comment {comment_id}")
            event = edit_comment(state, repo, comment, body, editor or comment.author)
        if event is not None:
            self._send([("issue_comment", event, repo.full_name)])
        return comment

    def create_stack(self, repo_name: str, numbers: list[int]) -> Stack:
        """Stack PRs natively, bottom first (each must be based on the previous one's head)."""
        with self.state.lock:
            repo = self.repo(repo_name)
            try:
                return create_stack(self.state, repo, list(numbers))
            except StandinHTTPError as error:
                detail = (
                    "; ".join(
                        e if isinstance(e, str) else str(e.get("message", ""))
                        for e in error.errors or []
                    )
                    or error.message
                )
                raise StandinError(f"cannot stack {numbers}: {detail}") from None

    def rerequest_check_run(self, repo_name: str, run_id: int, *, sender: str) -> None:
        """A user clicks "Re-run" on a completed check run (a ``check_run.rerequested`` delivery)."""
        state = self.state
        with state.lock:
            repo = self.repo(repo_name)
            run = repo.check_runs.get(run_id)
            if run is None or run.status != "completed":
                raise StandinError(f"check run {run_id} does not exist or has not completed")
            event = payloads.check_run_event(state, repo, run, "rerequested", sender)
        self._send([("check_run", event, repo.full_name)])
