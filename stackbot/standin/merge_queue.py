"""GitHub's merge queue, as far as a branch that requires it behaves (GraphQL
``enqueuePullRequest`` / ``dequeuePullRequest``, ``MergeQueue``, ``MergeQueueEntry``; the
``merge_group`` webhook).

- A branch requires the queue (:attr:`Repo.merge_queues`, a ruleset's merge-queue rule with its
  merge method): ``pulls/merge`` on a PR into it answers 405 (:data:`merging.ONLY_THROUGH_QUEUE`).
- Enqueueing asks what merging asks of the PR (open, not a draft, ``expectedHeadOid`` is its
  head, branch protection's reviews and required checks on its head), then builds its merge
  group: a commit on ``gh-readonly-queue/<base>/pr-<N>-<head sha>`` whose tree is the base (or
  the group ahead of it) with the PR merged by the queue's method, and sends ``merge_group``
  ``checks_requested``. A PR that does not merge onto the group ahead is taken out again (no
  group was made, so no ``destroyed``). ``jump`` puts it at the front (every group rebuilt).
- When every required check passes on a group's head, the base is fast-forwarded to it (a
  group holds every PR ahead of it: they merge with it), each PR is closed as merged (``push``, ``pull_request`` ``closed`` with ``merged: true``, the
  head branch deleted where the repository does that) and ``destroyed`` ``merged`` is sent.
- A required check failing on a group takes its PR out (``destroyed`` ``dequeued``, the
  schema's "removed from the queue") and every group behind it is rebuilt without it
  (``destroyed`` ``invalidated``, "invalidated by an earlier queue entry being dequeued", then
  ``checks_requested`` for the new group). ``dequeuePullRequest`` and a push to a queued PR's
  head do the same. The base moving under the queue rebuilds every group (``invalidated``).

Left out: batching several PRs into one group (``maximumEntriesToMerge`` is 1), the check
response timeout, ``push`` deliveries for the ``gh-readonly-queue`` branches.
"""

from __future__ import annotations

from typing import Any

from stackbot.standin import hosting, merging, payloads
from stackbot.standin.pull_bases import Event
from stackbot.standin.state import Pull, QueueEntry, Repo, StandinState

QUEUE_METHODS = {"MERGE": "merge", "SQUASH": "squash", "REBASE": "rebase"}
QUEUE_SENDER = "github-merge-queue[bot]"


class QueueError(Exception):
    """What GraphQL answers in ``errors`` (HTTP 200), with GitHub's ``type``."""

    def __init__(self, message: str, kind: str = "UNPROCESSABLE") -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind


def queue_ref(base: str, number: int, head_sha: str) -> str:
    return f"gh-readonly-queue/{base}/pr-{number}-{head_sha}"


def entries_of(repo: Repo, base: str) -> list[QueueEntry]:
    return [e for e in repo.queue if e.base_ref == base]


def entry_of(repo: Repo, number: int) -> QueueEntry | None:
    return next((e for e in repo.queue if e.pull_number == number), None)


def state_of(repo: Repo, entry: QueueEntry) -> str:
    """The entry's ``MergeQueueEntryState``."""
    if entry.group_sha is None:
        return "QUEUED"
    outcome = _group_outcome(repo, entry)
    return "MERGEABLE" if outcome == "pass" else "AWAITING_CHECKS"


def enqueue(
    state: StandinState,
    repo: Repo,
    pull: Pull,
    *,
    enqueuer: str,
    expected_head: str | None,
    jump: bool = False,
) -> tuple[QueueEntry, list[Event]]:
    """Queue ``pull``; the entry (the existing one when it is queued already) and the
    deliveries. The caller holds the lock."""
    if pull.base_ref not in repo.merge_queues:
        raise QueueError(f"Pull request's base branch {pull.base_ref} has no merge queue")
    if pull.state != "open" or pull.merged:
        raise QueueError("Pull request is closed")
    if pull.draft:
        raise QueueError("Pull request is still a draft")
    if expected_head is not None and expected_head != pull.head_sha:
        raise QueueError(
            f"Pull request head ref has changed: expected {expected_head}, got {pull.head_sha}"
        )
    existing = entry_of(repo, pull.number)
    if existing is not None:
        return existing, []
    problems = merging.protection_problems(state, repo, pull)
    if problems:
        raise QueueError("\n".join(problems))
    entry = QueueEntry(
        state.new_id(), pull.number, pull.base_ref, pull.head_sha, enqueuer, state.now(), jump
    )
    queued = entries_of(repo, pull.base_ref)
    if jump and queued:
        repo.queue.insert(repo.queue.index(queued[0]), entry)
        events = _rebuild(state, repo, pull.base_ref, 0)
    else:
        repo.queue.append(entry)
        events = _rebuild(state, repo, pull.base_ref, len(queued))
    return entry, events + advance(state, repo)


def dequeue(
    state: StandinState, repo: Repo, pull: Pull, *, reason: str = "dequeued"
) -> tuple[QueueEntry, list[Event]]:
    entry = entry_of(repo, pull.number)
    if entry is None:
        raise QueueError("Pull request is not in the merge queue")
    return entry, _take_out(state, repo, entry, reason)


def take_out_if_queued(state: StandinState, repo: Repo, pull: Pull) -> list[Event]:
    """A push to a queued PR's head takes it out of the queue (as on GitHub)."""
    entry = entry_of(repo, pull.number)
    if entry is None or entry.head_sha == pull.head_sha:
        return []
    return _take_out(state, repo, entry, "dequeued")


def base_moved(state: StandinState, repo: Repo, base: str) -> list[Event]:
    """``base`` was pushed to (not by the queue): every group is rebuilt on it."""
    queued = entries_of(repo, base)
    if not queued or queued[0].group_base_sha == hosting.resolve(
        repo.bare_path, f"refs/heads/{base}"
    ):
        return []
    return _rebuild(state, repo, base, 0) + advance(state, repo)


def advance(state: StandinState, repo: Repo) -> list[Event]:
    """What the checks on the groups decide now: merge the front group(s) that passed, take
    out one that failed (rebuilding those behind it). The caller holds the lock."""
    events: list[Event] = []
    for base in list(repo.merge_queues):
        while True:
            queued = entries_of(repo, base)
            if not queued:
                break
            failed = next((e for e in queued if _group_outcome(repo, e) == "fail"), None)
            if failed is not None:
                events += _take_out(state, repo, failed, "dequeued")
                continue
            passed = [i for i, e in enumerate(queued) if _group_outcome(repo, e) == "pass"]
            if not passed:
                break
            tip = hosting.resolve(repo.bare_path, f"refs/heads/{base}")
            if tip != queued[0].group_base_sha:
                events += _rebuild(state, repo, base, 0)  # the base moved under the queue
                continue
            # A passing group holds every PR ahead of it: they merge with it (GitHub merges
            # the entries ahead of a group whose checks pass).
            events += _merge_through(state, repo, queued[: passed[-1] + 1])
    return events


# -- groups ---------------------------------------------------------------------------------------


def _group_outcome(repo: Repo, entry: QueueEntry) -> str:
    """``pass``, ``fail`` or ``pending``: the base's required checks on the group's head."""
    if entry.group_sha is None:
        return "pending"
    rule = repo.protections.get(entry.base_ref)
    required = (rule.required_contexts or []) if rule is not None else []
    found = merging.check_conclusions(repo, entry.group_sha)
    outcomes = [found.get(context) for context in required]
    if any(o is not None and o != "pending" and o not in merging.PASSING_CHECKS for o in outcomes):
        return "fail"
    if all(o in merging.PASSING_CHECKS for o in outcomes):
        return "pass"
    return "pending"


def _rebuild(state: StandinState, repo: Repo, base: str, start: int) -> list[Event]:
    """Build the groups of ``base``'s queue from position ``start`` on (those built already
    are destroyed first, ``invalidated``); a PR that no longer merges is taken out."""
    events: list[Event] = []
    queued = entries_of(repo, base)
    parent = (
        queued[start - 1].group_sha
        if start > 0
        else hosting.resolve(repo.bare_path, f"refs/heads/{base}")
    )
    for entry in queued[start:]:
        if entry.group_sha is not None:
            events.append(_destroy(state, repo, entry, "invalidated"))
        pull = repo.pulls[entry.pull_number]
        if parent is None:
            repo.queue.remove(entry)
            continue
        try:
            group = merging.write_merge(
                state, repo, pull, parent, QUEUE_METHODS[repo.merge_queues[base]], entry.enqueuer
            )
        except merging.Unmergeable:
            repo.queue.remove(entry)  # conflicts with the groups ahead: out of the queue
            continue
        entry.group_ref = queue_ref(base, pull.number, entry.head_sha)
        entry.group_sha, entry.group_base_sha = group, parent
        hosting.update_ref(repo.bare_path, f"refs/heads/{entry.group_ref}", group)
        events.append(_event(state, repo, entry, "checks_requested"))
        parent = group
    return events


def _take_out(state: StandinState, repo: Repo, entry: QueueEntry, reason: str) -> list[Event]:
    queued = entries_of(repo, entry.base_ref)
    position = queued.index(entry)
    events = [_destroy(state, repo, entry, reason)] if entry.group_sha is not None else []
    repo.queue.remove(entry)
    return events + _rebuild(state, repo, entry.base_ref, position)


def _destroy(state: StandinState, repo: Repo, entry: QueueEntry, reason: str) -> Event:
    event = _event(state, repo, entry, "destroyed", reason=reason)
    if entry.group_ref is not None:
        hosting.delete_ref(repo.bare_path, f"refs/heads/{entry.group_ref}")
    entry.group_ref = entry.group_sha = entry.group_base_sha = None
    return event


def _merge_through(state: StandinState, repo: Repo, entries: list[QueueEntry]) -> list[Event]:
    """Fast-forward the base to the last of ``entries``' groups; each PR is merged."""
    last = entries[-1]
    assert last.group_sha is not None and entries[0].group_base_sha is not None
    ref = f"refs/heads/{last.base_ref}"
    before = entries[0].group_base_sha
    hosting.update_ref(repo.bare_path, ref, last.group_sha)
    events: list[Event] = [
        (
            "push",
            payloads.push_event(state, repo, ref, before, last.group_sha, QUEUE_SENDER),
            repo.full_name,
        )
    ]
    for entry in entries:
        events += _merged(state, repo, entry)
    return events


def _merged(state: StandinState, repo: Repo, entry: QueueEntry) -> list[Event]:
    pull = repo.pulls[entry.pull_number]
    assert entry.group_sha is not None and entry.group_base_sha is not None
    before, group = entry.group_base_sha, entry.group_sha
    now = state.now()
    pull.state, pull.merged, pull.merged_at, pull.closed_at = "closed", True, now, now
    pull.merged_by, pull.merge_commit_sha, pull.base_sha, pull.updated_at = (
        entry.enqueuer,
        group,
        before,
        now,
    )
    repo.pushed_at = now
    events: list[Event] = [
        (
            "pull_request",
            payloads.pull_request_event(state, repo, pull, "closed", entry.enqueuer),
            repo.full_name,
        ),
    ]
    events.append(_destroy(state, repo, entry, "merged"))
    repo.queue.remove(entry)
    if repo.delete_branch_on_merge:
        events += merging.delete_head(state, repo, pull, entry.enqueuer)
    return events


def _event(
    state: StandinState, repo: Repo, entry: QueueEntry, action: str, reason: str | None = None
) -> Event:
    assert entry.group_sha is not None and entry.group_ref is not None
    info = hosting.commit_info(repo.bare_path, entry.group_sha)
    payload: dict[str, Any] = {"action": action}
    if reason is not None:
        payload["reason"] = reason
    payload["merge_group"] = {
        "head_sha": entry.group_sha,
        "head_ref": f"refs/heads/{entry.group_ref}",
        "base_sha": entry.group_base_sha,
        "base_ref": f"refs/heads/{entry.base_ref}",
        "head_commit": {
            "id": info.sha,
            "tree_id": info.tree,
            "message": info.message,
            "timestamp": info.committer.date,
            "author": {"name": info.author.name, "email": info.author.email},
            "committer": {"name": info.committer.name, "email": info.committer.email},
        },
    }
    payload.update(payloads.repository_context(state, repo, QUEUE_SENDER))
    return ("merge_group", payload, repo.full_name)
