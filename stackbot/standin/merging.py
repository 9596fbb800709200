"""Merging a pull request as GitHub does (``pulls/merge``) and what branch protection asks first.

GitHub's answers, from its REST description and its behaviour:

- 409 ``Head branch was modified. Review and try the merge again.`` when ``sha`` is given and is
  not the PR's head;
- 405 when the merge cannot be performed: the PR is closed, merged, a draft or conflicts
  (``Pull Request is not mergeable``), the method is switched off for the repository
  (``Merge commits are not allowed on this repository.``), the base branch requires the merge
  queue (``Changes must be made through the merge queue``), or its protection is not satisfied
  (``Required status check "X" is expected.``, ``At least 1 approving review is required by
  reviewers with write access.``);
- 422 for a ``merge_method`` that is none of ``merge``, ``squash``, ``rebase``.

What each method writes on the base branch: ``merge`` a two-parent merge commit titled
``Merge pull request #N from owner/branch`` with the PR title as body; ``squash`` one commit
with the merged tree, titled ``<PR title> (#N)``, authored by the PR's author; ``rebase`` each
PR commit replayed onto the base (authors kept, the merger as committer). Then a ``push`` of the
base branch and ``pull_request`` ``closed`` with ``merged: true``; where the repository deletes
head branches on merge, the head branch goes too, and with it every open PR based on it.

An admin merges past protection unless ``enforce_admins`` is set; an App never is an admin.
"""

from __future__ import annotations

from stackbot.standin import hosting, payloads
from stackbot.standin.auth import Caller, StandinHTTPError, role_of, unprocessable
from stackbot.standin.pull_bases import Event, close_pulls_based_on
from stackbot.standin.shapes import ensure_user
from stackbot.standin.shapes_git import latest_statuses
from stackbot.standin.state import Protection, Pull, Repo, StandinState, permission_at_least

MERGE_METHODS = ("merge", "squash", "rebase")
HEAD_MOVED = "Head branch was modified. Review and try the merge again."
NOT_MERGEABLE = "Pull Request is not mergeable"
# The base branch requires the merge queue (a ruleset's merge-queue rule): pulls/merge is refused.
ONLY_THROUGH_QUEUE = "Changes must be made through the merge queue"
_NOT_ALLOWED = {
    "merge": "Merge commits are not allowed on this repository.",
    "squash": "Squash merges are not allowed on this repository.",
    "rebase": "Rebase merges are not allowed on this repository.",
}
PASSING_CHECKS = frozenset({"success", "neutral", "skipped"})


class Unmergeable(StandinHTTPError):
    """405 for a PR whose head does not merge into its base; ``paths`` conflict."""

    def __init__(self, paths: list[str]) -> None:
        super().__init__(405, NOT_MERGEABLE)
        self.paths = paths


def not_allowed(message: str) -> StandinHTTPError:
    return StandinHTTPError(405, message)


def method_allowed(repo: Repo, method: str) -> bool:
    return {
        "merge": repo.allow_merge_commit,
        "squash": repo.allow_squash_merge,
        "rebase": repo.allow_rebase_merge,
    }[method]


def protection_problems(state: StandinState, repo: Repo, pull: Pull) -> list[str]:
    """What the base branch's protection still asks of ``pull``, in GitHub's words (empty:
    nothing)."""
    rule = repo.protections.get(pull.base_ref)
    if rule is None:
        return []
    problems = _check_problems(state, repo, pull, rule)
    if rule.required_approving_review_count:
        approvals = approving_reviewers(state, repo, pull, rule)
        needed = rule.required_approving_review_count
        if len(approvals) < needed:
            noun = "review is" if needed == 1 else "reviews are"
            problems.append(
                f"At least {needed} approving {noun} required by reviewers with write access."
            )
    return problems


def _check_problems(state: StandinState, repo: Repo, pull: Pull, rule: Protection) -> list[str]:
    if rule.required_contexts is None:
        return []
    problems: list[str] = []
    if rule.strict:
        base_sha = hosting.resolve(repo.bare_path, f"refs/heads/{pull.base_ref}")
        if base_sha and not hosting.is_ancestor(repo.bare_path, base_sha, pull.head_sha):
            problems.append("Head branch is out of date with the base branch.")
    conclusions = check_conclusions(repo, pull.head_sha)
    for context in rule.required_contexts:
        conclusion = conclusions.get(context)
        if conclusion is None or conclusion == "pending":
            problems.append(f'Required status check "{context}" is expected.')
        elif conclusion not in PASSING_CHECKS:
            problems.append(f'Required status check "{context}" is failing.')
    return problems


def check_conclusions(repo: Repo, sha: str) -> dict[str, str]:
    """Each context's outcome on ``sha``: the newest check run of that name (``pending`` while
    it runs), else the newest commit status."""
    found = {s.context: s.state for s in latest_statuses(repo, sha)}
    for run in sorted(repo.check_runs.values(), key=lambda r: r.id):
        if run.head_sha == sha:
            done = run.status == "completed" and run.conclusion is not None
            found[run.name] = run.conclusion if done and run.conclusion else "pending"
    return found


def approving_reviewers(
    state: StandinState, repo: Repo, pull: Pull, rule: Protection | None = None
) -> list[str]:
    """Who approves ``pull`` now: each reviewer's newest decisive review is ``APPROVED``, they
    have write access, and (``dismiss_stale_reviews``) it was given on the current head."""
    newest: dict[str, str] = {}
    for review in sorted(repo.reviews.values(), key=lambda r: r.id):
        if review.pull_number != pull.number or review.state == "COMMENTED":
            continue
        stale = (
            rule is not None and rule.dismiss_stale_reviews and review.commit_id != pull.head_sha
        )
        newest[review.author] = "STALE" if stale else review.state
    return sorted(
        login
        for login, verdict in newest.items()
        if verdict == "APPROVED"
        and login != pull.author
        and permission_at_least(role_of(state, repo, login), "write")
    )


def merge_pull(
    state: StandinState,
    repo: Repo,
    pull: Pull,
    *,
    caller: Caller,
    merger: str,
    method: str = "merge",
    sha: str | None = None,
    title: str | None = None,
    message: str | None = None,
) -> tuple[str, list[Event]]:
    """Merge ``pull`` into its base as GitHub would; the new base tip and the deliveries to send.
    The caller holds the lock."""
    if method not in MERGE_METHODS:
        raise unprocessable(
            f"merge_method must be one of merge, squash, rebase, not {method!r}",
            field_name="merge_method",
        )
    if pull.state != "open" or pull.draft:
        raise not_allowed(NOT_MERGEABLE if not pull.draft else "Pull Request is still a draft")
    if sha is not None and sha != pull.head_sha:
        raise StandinHTTPError(409, HEAD_MOVED)
    if not method_allowed(repo, method):
        raise not_allowed(_NOT_ALLOWED[method])
    if pull.base_ref in repo.merge_queues:
        raise not_allowed(ONLY_THROUGH_QUEUE)
    rule = repo.protections.get(pull.base_ref)
    bypass = (
        caller.kind == "user"
        and rule is not None
        and not rule.enforce_admins
        and role_of(state, repo, merger) == "admin"
    )
    problems = [] if bypass else protection_problems(state, repo, pull)
    if problems:
        raise not_allowed("\n".join(problems))
    if rule is not None and rule.required_linear_history and method == "merge":
        raise not_allowed("Merge commits are not allowed on this protected branch.")
    ref = f"refs/heads/{pull.base_ref}"
    base_sha = hosting.resolve(repo.bare_path, ref)
    if base_sha is None:
        raise not_allowed(NOT_MERGEABLE)
    merged = write_merge(state, repo, pull, base_sha, method, merger, title, message)
    hosting.update_ref(repo.bare_path, ref, merged)
    now = state.now()
    pull.state, pull.merged, pull.merged_at, pull.closed_at = "closed", True, now, now
    pull.merged_by, pull.merge_commit_sha, pull.base_sha, pull.updated_at = (
        merger,
        merged,
        base_sha,
        now,
    )
    ensure_user(state, merger)
    repo.pushed_at = now
    events: list[Event] = [
        ("push", payloads.push_event(state, repo, ref, base_sha, merged, merger), repo.full_name),
        (
            "pull_request",
            payloads.pull_request_event(state, repo, pull, "closed", merger),
            repo.full_name,
        ),
    ]
    if repo.delete_branch_on_merge:
        events += delete_head(state, repo, pull, merger)
    return merged, events


def write_merge(
    state: StandinState,
    repo: Repo,
    pull: Pull,
    base_sha: str,
    method: str,
    merger: str,
    title: str | None = None,
    message: str | None = None,
) -> str:
    """The commit ``method`` makes of ``pull`` onto ``base_sha`` (the merge button's, and the
    merge queue's for a merge group)."""
    bare, now = repo.bare_path, state.now()
    try:
        if method == "rebase":
            return hosting.rebase(
                bare, base_sha, pull.head_sha, committer=_signature(state, merger), timestamp=now
            )
        if method == "squash":
            commits = hosting.commits_between(
                bare, hosting.merge_base(bare, base_sha, pull.head_sha), pull.head_sha
            )
            body = "\n\n".join(f"* {c.message.strip()}" for c in commits)
            text = f"{title or f'{pull.title} (#{pull.number})'}\n\n{message or body}".strip()
            author = _signature(state, pull.author)
        else:
            default = f"Merge pull request #{pull.number} from {repo.owner}/{pull.head_ref}"
            text = f"{title or default}\n\n{message if message is not None else pull.title}"
            author = _signature(state, merger)
        return hosting.merge(
            bare,
            base_sha,
            pull.head_sha,
            message=text.strip() + "\n",
            author=author,
            timestamp=now,
            squash=method == "squash",
        )
    except hosting.MergeConflict as conflict:
        raise Unmergeable(conflict.paths) from None


def _signature(state: StandinState, login: str) -> tuple[str, str]:
    user = ensure_user(state, login)
    return (user.name or login, user.email or f"{login}@users.noreply.github.com")


def delete_head(state: StandinState, repo: Repo, pull: Pull, merger: str) -> list[Event]:
    ref = f"refs/heads/{pull.head_ref}"
    before = hosting.resolve(repo.bare_path, ref)
    if before is None or any(
        p.state == "open" and p.head_ref == pull.head_ref for p in repo.pulls.values()
    ):
        return []
    hosting.delete_ref(repo.bare_path, ref)
    events: list[Event] = [
        ("push", payloads.push_event(state, repo, ref, before, None, merger), repo.full_name)
    ]
    return events + close_pulls_based_on(state, repo, pull.head_ref, merger)
