"""Driving the stand-in: repositories, pushes, faults, and reading back what happened."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_args

from stackbot.standin import deliveries, hosting, merge_queue, payloads, pull_bases
from stackbot.standin.control_people import PeopleControl
from stackbot.standin.state import (
    CheckRun,
    CommitStatus,
    Delivery,
    Fault,
    FaultKind,
    IssueComment,
    Pull,
    Repo,
    RequestRecord,
    StandinState,
)

Event = tuple[str, dict[str, Any], str | None]  # (event name, payload, repo full name)


class StandinError(ValueError):
    """A control call that cannot be done; the message says what is wrong."""


class RepoControl(PeopleControl):
    def __init__(self, state: StandinState) -> None:
        super().__init__(state)

    # -- repositories and pushes ------------------------------------------------------------

    def create_repo(
        self,
        full_name: str,
        *,
        source: Path | str | None = None,
        files: Mapping[str, str | bytes | None] | None = None,
        default_branch: str = "main",
        author: str | None = None,
    ) -> Repo:
        """A repository hosted as a bare git repo: copied from ``source`` or made from ``files``."""
        owner, sep, name = full_name.partition("/")
        if not sep or not owner or not name or "/" in name:
            raise StandinError(f"repository names are 'owner/name', got {full_name!r}")
        state = self.state
        with state.lock:
            if state.repo(full_name) is not None:
                raise StandinError(f"repository {full_name} already exists")
            self.ensure_account(owner)
            bare = state.root / "repos" / owner / f"{name}.git"
            hosting.init_bare(bare, default_branch)
            now = state.now()
            repo = Repo(state.new_id(), owner, name, bare, default_branch, now, now)
            state.repos[full_name.lower()] = repo
        if source is not None:
            hosting.import_branches(bare, source)
        if files is not None:
            self.commit(
                full_name, default_branch, files, message="Initial commit", author=author or owner
            )
        if hosting.resolve(bare, f"refs/heads/{default_branch}") is None:
            raise StandinError(
                f"{full_name} has no branch {default_branch!r}: give files or a source that has it"
            )
        return repo

    def commit(
        self,
        repo_name: str,
        branch: str,
        files: Mapping[str, str | bytes | None],
        *,
        message: str,
        author: str,
        parent: str | None = None,
    ) -> str:
        """Commit ``files`` (None deletes) on top of ``parent`` or the branch tip and push it."""
        repo = self.repo(repo_name)
        base = parent or hosting.resolve(repo.bare_path, f"refs/heads/{branch}")
        sha = hosting.commit_files(
            repo.bare_path,
            parent=base,
            files=files,
            message=message,
            author=self.signature(author),
            timestamp=self.state.now(),
        )
        self.set_branch(repo_name, branch, sha, pusher=author)
        return sha

    def push_from(
        self,
        repo_name: str,
        source: Path | str,
        branch: str,
        *,
        pusher: str,
        source_ref: str | None = None,
    ) -> str:
        """Push ``source_ref`` (default: ``branch``) of a local repository to ``branch``."""
        repo = self.repo(repo_name)
        staging = f"refs/standin-incoming/{branch}"
        hosting.git(
            repo.bare_path, "fetch", "--quiet", str(source), f"+{source_ref or branch}:{staging}"
        )
        sha = hosting.resolve(repo.bare_path, staging)
        hosting.delete_ref(repo.bare_path, staging)
        if sha is None:
            raise StandinError(f"{source} has no {source_ref or branch}")
        self.set_branch(repo_name, branch, sha, pusher=pusher)
        return sha

    def set_branch(self, repo_name: str, branch: str, sha: str | None, *, pusher: str) -> None:
        """Move (or delete, with None) a branch; PRs whose head it is are synchronized."""
        state = self.state
        events: list[Event] = []
        with state.lock:
            repo = self.repo(repo_name)
            ref = f"refs/heads/{branch}"
            before = hosting.resolve(repo.bare_path, ref)
            if before == sha:
                return
            if sha is None:
                hosting.delete_ref(repo.bare_path, ref)
            else:
                hosting.update_ref(repo.bare_path, ref, sha)
            repo.pushed_at = state.now()
            events.append(
                ("push", payloads.push_event(state, repo, ref, before, sha, pusher), repo.full_name)
            )
            for pull in repo.pulls.values():
                if pull.state == "open" and pull.head_ref == branch and sha is not None:
                    events.append(self._synchronize(repo, pull, sha, pusher))
                    events += merge_queue.take_out_if_queued(state, repo, pull)
            if sha is None:  # GitHub closes the PRs based on a deleted branch
                events += pull_bases.close_pulls_based_on(state, repo, branch, pusher)
            elif branch in repo.merge_queues:  # the queue's groups are rebuilt on the new base
                events += merge_queue.base_moved(state, repo, branch)
        self._send(events)

    def _synchronize(self, repo: Repo, pull: Pull, sha: str, sender: str) -> Event:
        before = pull.head_sha
        pull.head_sha = sha
        pull.updated_at = self.state.now()
        hosting.update_ref(repo.bare_path, f"refs/pull/{pull.number}/head", sha)
        payload = payloads.pull_request_event(
            self.state, repo, pull, "synchronize", sender, before=before, after=sha
        )
        return ("pull_request", payload, repo.full_name)

    # -- faults -----------------------------------------------------------------------------

    def inject_fault(
        self,
        kind: FaultKind,
        *,
        method: str = ".*",
        path: str = ".*",
        count: int = 1,
        retry_after: float | None = None,
        reset_in: float | None = None,
        status: int = 503,
    ) -> Fault:
        """The next ``count`` requests matching ``method``/``path`` (regexes) fail this way."""
        if kind not in get_args(FaultKind):
            raise StandinError(
                f"unknown fault kind {kind!r}; use one of {', '.join(get_args(FaultKind))}"
            )
        if kind == "server_error" and not 500 <= status <= 599:
            raise StandinError(f"a server_error fault needs a 5xx status, not {status}")
        for pattern in (method, path):
            try:
                re.compile(pattern)
            except re.error as error:
                raise StandinError(
                    f"fault pattern {pattern!r} is not a regular expression: {error}"
                ) from None
        fault = Fault(kind, method, path, count, retry_after, reset_in, status)
        with self.state.lock:
            self.state.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        with self.state.lock:
            self.state.faults.clear()

    # -- reading back -----------------------------------------------------------------------

    def repo(self, repo_name: str) -> Repo:
        repo = self.state.repo(repo_name)
        if repo is None:
            raise StandinError(f"no repository {repo_name} on the stand-in")
        return repo

    def pull(self, repo_name: str, number: int) -> Pull:
        pull = self.repo(repo_name).pulls.get(number)
        if pull is None:
            raise StandinError(f"{repo_name} has no pull request #{number}")
        return pull

    def comments(self, repo_name: str, number: int) -> list[IssueComment]:
        with self.state.lock:
            found = self.repo(repo_name).comments.values()
            return sorted((c for c in found if c.issue_number == number), key=lambda c: c.id)

    def check_runs(self, repo_name: str, sha: str | None = None) -> list[CheckRun]:
        with self.state.lock:
            runs = self.repo(repo_name).check_runs.values()
            return sorted((r for r in runs if sha is None or r.head_sha == sha), key=lambda r: r.id)

    def statuses(self, repo_name: str, sha: str | None = None) -> list[CommitStatus]:
        with self.state.lock:
            return [s for s in self.repo(repo_name).statuses if sha is None or s.sha == sha]

    def deliveries(self, event: str | None = None, action: str | None = None) -> list[Delivery]:
        with self.state.lock:
            return [
                d
                for d in self.state.deliveries
                if (event is None or d.event == event) and (action is None or d.action == action)
            ]

    def requests(
        self, method: str | None = None, path_contains: str | None = None
    ) -> list[RequestRecord]:
        with self.state.lock:
            return [
                r
                for r in self.state.requests
                if (method is None or r.method == method)
                and (path_contains is None or path_contains in r.path)
            ]

    def flush_deliveries(self) -> list[Delivery]:
        """Send the queued deliveries now (mode "queue")."""
        return deliveries.flush(self.state)

    def wait_for_deliveries(self, timeout_s: float = 30.0) -> None:
        """Wait until the deliveries of mode "send" have all gone out."""
        deliveries.wait_until_sent(self.state, timeout_s)

    def _send(self, events: list[Event]) -> None:
        for event, payload, repo in events:
            deliveries.deliver(self.state, event, payload, repo=repo)
