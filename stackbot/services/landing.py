"""The ``land`` task: a landing waits for its tree to be tested green on the current main, then
merges its PRs bottom-up, then gives its account on every PR (rules: :mod:`stackbot.domain.landing`,
words: :mod:`stackbot.domain.landing_text`).

A waiting landing looks again every ``settings.landing.recheck_s`` seconds (its own task, queued
with a delay): when main moved or a head changed since it last asked, it asks for the series to
be integrated (the integration reuses every result of an identical tree). Merging is done once
even when the task is redone: each merged PR is written to the landing before the next one is
touched, and a PR GitHub already shows merged is not merged again. A cancel is read before each
merge. Before each merge main must be where the tested tree was made, or where the landing's
own last merge left it: when someone else moved it half-way, the landing goes back to waiting
for the rest (integrated and tested on the new main, an identical tree reusing every result)
instead of leaving an untested tree on main. Nothing here pushes to a contributor's branch.

Behind other landings of the repository (the gate), a landing asks for its speculative tree
(main + the landings ahead + its PRs) as a ``gate`` integration and waits for them to land; when
the head lands, the next one's tree on the new main is the one it was tested on, so the
integration of it reuses every result.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from stackbot.adapters.github.port import GitHubPort
from stackbot.adapters.github_errors import GitHubRejected
from stackbot.db import dashboard_store, github_store, landing_store
from stackbot.db.engine import session_scope
from stackbot.domain.landing import (
    QUEUE_MODE,
    EvidenceState,
    GatePlace,
    LandingEntry,
    LandingState,
    QueueItem,
    TreeEvidence,
    approvers,
    blockers,
    gate_place,
    mark,
    refusal_note,
    stopped_at,
)
from stackbot.domain.landing_text import (
    LANDING_MARKER,
    LandingView,
    landing_comment,
    order_text_of,
)
from stackbot.domain.records import PrRecord
from stackbot.domain.tasks import Integrate, Land
from stackbot.domain.types import PrNumber, RepoName, SeriesKey
from stackbot.services.landing_evidence import tested_tree
from stackbot.services.resources import ServiceContext
from stackbot.taskqueue import TaskRegistry

log = logging.getLogger(__name__)
WRITERS = frozenset({"admin", "maintain", "write"})
QUEUED_NOTE = "in GitHub's merge queue"
TAKEN_OUT_NOTE = "taken out of GitHub's merge queue (the landing ended)"
NEW_PUSH = "a new push: its head is no longer the tested one"
BLOCKED_RECHECK_FACTOR = 4  # a landing blocked on a review looks again less often


@dataclass(frozen=True)
class _Landing:
    id: int
    repo_id: int
    series_key: str
    up_to: int | None
    state: LandingState
    entries: tuple[LandingEntry, ...]
    main_sha: str | None
    merge_method: str


def handle_land(ctx: ServiceContext, task: Land) -> None:
    landing, base_ref = _load(ctx, task.landing)
    if landing is None:
        return
    if not landing.state.active:
        if any(e.state == "pending" and e.note == QUEUED_NOTE for e in landing.entries):
            # cancelled while its PRs wait in GitHub's merge queue: nothing more merges
            entries = take_out_of_queue(ctx.services.github(), task.repo, landing.entries)
            _save(ctx, landing.id, entries=entries)
            publish(ctx, ctx.services.github(), task.repo, task.landing, base_ref)
        return
    client = ctx.services.github()
    if landing.state is LandingState.WAITING:
        delay = _wait_or_start(ctx, client, task, landing, base_ref)
        if delay is not None:
            publish(ctx, client, task.repo, task.landing, base_ref)
            ctx.enqueue_task(task, delay_s=delay)
            return
    publish(ctx, client, task.repo, task.landing, base_ref)
    _merge_all(ctx, client, task.repo, task.landing, base_ref)
    publish(ctx, client, task.repo, task.landing, base_ref)
    after, _ = _load(ctx, task.landing)
    if after is not None and after.state is LandingState.WAITING:  # main moved under it
        ctx.enqueue_task(task)
    elif after is not None and after.state is LandingState.MERGING:  # in GitHub's merge queue
        ctx.enqueue_task(task, delay_s=ctx.settings.landing.recheck_s)


def register_tasks(registry: TaskRegistry) -> None:
    registry.add_task(Land, handle_land)


# -- waiting --------------------------------------------------------------------------------


def _wait_or_start(
    ctx: ServiceContext, client: GitHubPort, task: Land, landing: _Landing, base_ref: str
) -> float | None:
    """Check what the landing waits for; None when it may merge now (state set to merging),
    else the delay before it looks again (or it stopped: nothing to wait for, None is not
    returned then but the state is no longer active).

    The landing's place in its repository's gate decides which tree that is
    (:func:`stackbot.domain.landing.gate_place`): at the head of the gate its own PRs on main;
    behind other landings, main + the non-failing landings ahead + its own PRs (a gate run).
    Only the head merges; a failed tree stops the landing only at the head (behind, a landing
    ahead that fails too is taken out and this one is tested again without it)."""
    recheck = ctx.settings.landing.recheck_s
    # What it merged already stays merged (main moved under it half-way): the rest waits.
    pending = [e for e in landing.entries if e.state == "pending"]
    pulls = {e.number: client.get_pull(task.repo, PrNumber(e.number)) for e in pending}
    gone = [n for n, p in pulls.items() if not p.is_open]
    if gone:
        why = ", ".join(f"#{n} was {'merged' if pulls[n].merged else 'closed'}" for n in gone)
        _stop(ctx, landing.id, f"{why} outside the landing; `/stackbot land` again")
        return None
    heads = {n: p.head_sha for n, p in pulls.items()}
    main_sha = client.branch_sha(task.repo, base_ref)
    entries = [
        LandingEntry(e.number, heads[e.number]) if e.state == "pending" else e
        for e in landing.entries
    ]
    own = tuple(e.number for e in pending)
    # Once its first PRs merged, the rest may be a series of another name (one named after
    # its root PR): the evidence and the integration are asked of the series it is now.
    series_key = _series_now(ctx, landing, list(own))
    queue, known_heads, own_trees = _gate_queue(ctx, landing, own, heads, series_key)

    def judge(prs: tuple[int, ...]) -> EvidenceState:
        return _evidence(ctx, landing, prs, known_heads, main_sha, own_trees).state

    place = gate_place(queue, landing.id, window=ctx.settings.landing.window, judge=judge)
    ahead_text = _ahead_text(queue, place)
    if place.merging_ahead is not None or not place.in_window:
        why = (
            f"the landing ahead of it ({ahead_text}) to finish merging"
            if place.merging_ahead is not None
            else f"its turn in the gate: {place.position} landing(s) ahead ({ahead_text}), "
            f"{ctx.settings.landing.window} tested at once"
        )
        _save(ctx, landing.id, entries=entries, main_sha=main_sha, waiting_for=why)
        return recheck
    evidence = _evidence(ctx, landing, place.prs, known_heads, main_sha, own_trees)
    if evidence.state == "failed":
        if place.at_head:
            _stop(ctx, landing.id, f"the tree to land was not tested green: {evidence.detail}")
            return None
        why = (
            f"the landings ahead of it ({ahead_text}): its tree failed on top of them "
            f"({evidence.detail}); it is taken out once they land, or tested again without "
            "any of them that fails"
        )
        _save(ctx, landing.id, entries=entries, main_sha=main_sha, waiting_for=why)
        return recheck
    if evidence.state != "green":
        if evidence.state == "untested":
            ctx.enqueue_task(
                _integration(ctx, task, landing, place.prs, evidence, main_sha, series_key)
            )
        _save(
            ctx,
            landing.id,
            entries=entries,
            main_sha=main_sha,
            waiting_for=_waiting(evidence, main_sha, base_ref, place, ahead_text),
            series_key=series_key,
        )
        return recheck
    if not place.at_head:
        why = f"the landings ahead of it to land ({ahead_text}); its tree on top of them passed"
        _save(
            ctx,
            landing.id,
            entries=entries,
            main_sha=main_sha,
            waiting_for=why,
            tested_run_id=evidence.run_id,
            tested_tree=evidence.tree,
            series_key=series_key,
        )
        return recheck
    needs = _protection_needs(client, task.repo, base_ref, pulls)
    if needs:
        _save(ctx, landing.id, entries=entries, main_sha=main_sha, waiting_for=needs)
        return recheck * BLOCKED_RECHECK_FACTOR
    _save(
        ctx,
        landing.id,
        state=LandingState.MERGING,
        entries=entries,
        main_sha=main_sha,
        waiting_for=None,
        tested_run_id=evidence.run_id,
        tested_tree=evidence.tree,
    )
    return None


def _gate_queue(
    ctx: ServiceContext,
    landing: _Landing,
    own: tuple[int, ...],
    heads: Mapping[int, str],
    series_key: str,
) -> tuple[list[QueueItem], dict[int, str], dict[tuple[int, ...], tuple[str, bool]]]:
    """The repository's gate (active landings, oldest first) with each one's PRs still to
    merge, the heads they were last seen at (this landing's: now), and each landing's own tree
    → its series and whether it is the whole series."""
    with session_scope(ctx.engine, immediate=False) as session:
        rows = landing_store.active_landings_of_repo(session, repo_id=landing.repo_id)
        queue: list[QueueItem] = []
        known: dict[int, str] = {}
        trees: dict[tuple[int, ...], tuple[str, bool]] = {}
        for row in rows:
            assert row.id is not None
            if row.id == landing.id:
                prs = own
                known.update(heads)
            else:
                pending = [e for e in landing_store.entries_of(row) if e.state != "merged"]
                prs = tuple(e.number for e in pending)
                known.update({e.number: e.head_sha for e in pending})
            trees[prs] = (series_key if row.id == landing.id else row.series_key, row.up_to is None)
            merging = row.state == LandingState.MERGING.value
            queue.append(QueueItem(row.id, prs, merging))
    if all(item.landing_id != landing.id for item in queue):
        queue.append(QueueItem(landing.id, own))  # cancelled meanwhile: judged as the last
        trees[own] = (series_key, landing.up_to is None)
    return queue, known, trees


def _evidence(
    ctx: ServiceContext,
    landing: _Landing,
    prs: tuple[int, ...],
    heads: Mapping[int, str],
    main_sha: str,
    own_trees: Mapping[tuple[int, ...], tuple[str, bool]],
) -> TreeEvidence:
    """The evidence of one tree of the gate: a landing's own PRs alone on main (its series or
    stack run, or a gate run of them), or a speculative tree (a gate run)."""
    series_key, whole = own_trees.get(prs, (landing.series_key, False))
    return tested_tree(
        ctx.engine,
        repo_id=landing.repo_id,
        series_key=series_key,
        numbers=list(prs),
        heads={n: heads[n] for n in prs},
        main_sha=main_sha,
        whole_series=whole,
        gate=prs not in own_trees,
    )


def _own(landing: _Landing) -> tuple[int, ...]:
    return tuple(e.number for e in landing.entries if e.state != "merged")


def _integration(
    ctx: ServiceContext,
    task: Land,
    landing: _Landing,
    prs: tuple[int, ...],
    evidence: TreeEvidence,
    main_sha: str,
    series_key: str,
) -> Integrate:
    """What to integrate for a tree nobody tested: the series, when the landing is the whole
    series alone on main and the series has no run on this main yet (what every integration of
    it makes); else exactly the tree's PRs as a gate run (a tree behind other landings, a
    prefix, or a series whose PRs are no longer the landing's)."""
    series = SeriesKey(series_key)
    if prs == _own(landing) and landing.up_to is None and evidence.run_id is None:
        with session_scope(ctx.engine, immediate=False) as session:
            made = landing_store.has_series_run(
                session, repo_id=landing.repo_id, series_key=series_key, base_sha=main_sha
            )
        if not made:
            return Integrate(task.repo, series, None, reason="landing")
    return Integrate(
        task.repo, series, None, reason="landing", gate=tuple(PrNumber(n) for n in prs)
    )


def _ahead_text(queue: Sequence[QueueItem], place: GatePlace) -> str:
    by_id = {item.landing_id: item for item in queue}
    ahead = [*place.ahead, *place.failing_ahead]
    return "; ".join(order_text_of(by_id[i].prs) for i in ahead if i in by_id) or "none"


def _waiting(
    evidence: TreeEvidence, main_sha: str, base_ref: str, place: GatePlace, ahead_text: str
) -> str:
    where = f"`{base_ref}` at `{main_sha[:10]}`"
    if place.ahead:
        where += f" with the landings ahead of it ({ahead_text})"
    return f"the tree to land to be tested on {where}: {evidence.detail}"


def _series_now(ctx: ServiceContext, landing: _Landing, numbers: Sequence[int]) -> str:
    """The series key the landing's first pending PR is in now (the landing's own when it is
    still one of them)."""
    if not numbers:
        return landing.series_key
    with session_scope(ctx.engine, immediate=False) as session:
        keys = github_store.series_keys_of(session, repo_id=landing.repo_id, number=numbers[0])
    return landing.series_key if landing.series_key in keys or not keys else keys[0]


def _protection_needs(
    client: GitHubPort, repo: RepoName, base_ref: str, pulls: Mapping[int, PrRecord]
) -> str | None:
    """``blocked: needs …`` for each PR branch protection would refuse, or None."""
    rules = client.merge_rules(repo, base_ref)
    if not rules.required_checks and not rules.approvals:
        return None
    found: list[str] = []
    for number, pull in pulls.items():
        approving = approvers(
            client.list_reviews(repo, PrNumber(number)),
            author=pull.author,
            head_sha=pull.head_sha,
            rules=rules,
        )
        writers = sum(
            1 for login in approving if client.collaborator_permission(repo, login) in WRITERS
        )
        checks = client.check_outcomes(repo, pull.head_sha) if rules.required_checks else {}
        needs = blockers(rules=rules, approving_writers=writers, checks=checks)
        if needs:
            found.append(f"#{number} is blocked: needs {'; '.join(needs)}")
    return "; ".join(found) if found else None


# -- merging --------------------------------------------------------------------------------


def _merge_all(
    ctx: ServiceContext, client: GitHubPort, repo: RepoName, landing_id: int, base_ref: str
) -> None:
    landing, _ = _load(ctx, landing_id)
    if landing is not None and landing.merge_method == QUEUE_MODE:
        _queue_all(ctx, client, repo, landing, base_ref)
        return
    while True:
        landing, _ = _load(ctx, landing_id)
        if landing is None or landing.state is not LandingState.MERGING:
            return  # cancelled (or done) between two merges
        pending = [e for e in landing.entries if e.state == "pending"]
        if not pending:
            _finish(ctx, client, repo, landing, base_ref)
            return
        if not _merge_one(ctx, client, repo, landing, pending[0], base_ref):
            return


def _merge_one(
    ctx: ServiceContext,
    client: GitHubPort,
    repo: RepoName,
    landing: _Landing,
    entry: LandingEntry,
    base_ref: str,
) -> bool:
    number = PrNumber(entry.number)
    pull = client.get_pull(repo, number)
    if pull.merged:  # an earlier attempt's merge, answered or not
        _save(ctx, landing.id, entries=mark(landing.entries, entry.number, state="merged"))
        return True
    if pull.head_sha != entry.head_sha:
        _refused(ctx, landing, entry, NEW_PUSH)
        return False
    # main must be where the tested tree was made (or where this landing's last merge left
    # it): merging onto a main moved by someone else would leave an untested tree on it.
    # (main_sha is where its tree was last tested: after a wait, that is after its merges)
    merged = [e.merge_sha for e in landing.entries if e.state == "merged" and e.merge_sha]
    expected = {sha for sha in (landing.main_sha, *merged[-1:]) if sha}
    tip = client.branch_sha(repo, base_ref) if expected else None
    if tip is not None and tip not in expected:
        # Back to waiting: the rest is integrated and tested on the new main (an identical
        # tree reuses every result), then merges; what merged stays merged.
        _save(
            ctx,
            landing.id,
            state=LandingState.WAITING,
            waiting_for=(
                f"the rest to be tested on `{base_ref}` at `{tip[:10]}`: `{base_ref}` moved "
                "while it merged (not by this landing)"
            ),
        )
        return False
    if pull.base_ref != base_ref:
        # Its parent did not land (and so did not retarget it): merging would land it into
        # the parent's branch, not into the tested tree on the base.
        note = f"based on `{pull.base_ref}`, not `{base_ref}`: its parent has not landed"
        _refused(ctx, landing, entry, note)
        return False
    _retarget_children(client, repo, pull)
    try:
        tip = client.merge_pull(repo, number, sha=entry.head_sha, method=landing.merge_method)
    except GitHubRejected as refused:
        if client.get_pull(repo, number).merged:
            _save(ctx, landing.id, entries=mark(landing.entries, entry.number, state="merged"))
            return True
        _refused(ctx, landing, entry, refusal_note(refused.status, refused.detail))
        return False
    log.info("landing %s merged #%s at %s as %s", landing.id, number, entry.head_sha[:12], tip[:12])
    _save(
        ctx,
        landing.id,
        entries=mark(landing.entries, entry.number, state="merged", merge_sha=tip),
    )
    return True


def _queue_all(
    ctx: ServiceContext, client: GitHubPort, repo: RepoName, landing: _Landing, base_ref: str
) -> None:
    """Queue mode (``merge_method = "queue"``): each PR, bottom-up, its children retargeted
    first, is put into GitHub's merge queue at its tested head (``expectedHeadOid``); GitHub
    merges it once its merge group's required checks pass (the ``merge_group`` task answers
    them from the tested tree). Each look marks what GitHub merged meanwhile; the landing is
    landed when all are. A refusal stops it like the merge path's; a PR taken out of the queue
    is the ``merge_group`` task's to account for."""
    entries = list(landing.entries)
    started = any(e.state == "merged" or e.note == QUEUED_NOTE for e in entries)
    for entry in landing.entries:
        if entry.state != "pending":
            continue
        number = PrNumber(entry.number)
        pull = client.get_pull(repo, number)
        if pull.merged:
            entries = mark(entries, entry.number, state="merged", note=None)
            continue
        if pull.head_sha != entry.head_sha:
            entries = take_out_of_queue(client, repo, entries)
            _save(ctx, landing.id, entries=entries)
            _refused(ctx, replace(landing, entries=tuple(entries)), entry, NEW_PUSH)
            return
        if entry.note == QUEUED_NOTE:
            continue
        if not started:
            tip = client.branch_sha(repo, base_ref)
            if landing.main_sha is not None and tip != landing.main_sha:
                _save(
                    ctx,
                    landing.id,
                    state=LandingState.WAITING,
                    waiting_for=f"its tree to be tested on `{base_ref}` at `{tip[:10]}`",
                )
                return
        _retarget_children(client, repo, pull)
        if pull.base_ref != base_ref:
            note = f"based on `{pull.base_ref}`, not `{base_ref}`: its parent has not landed"
            _refused(ctx, replace(landing, entries=tuple(entries)), entry, note)
            return
        try:
            client.enqueue_pull(repo, number, expected_head=entry.head_sha)
        except GitHubRejected as refused:
            entries = take_out_of_queue(client, repo, entries)
            _save(ctx, landing.id, entries=entries)
            _refused(
                ctx,
                replace(landing, entries=tuple(entries)),
                entry,
                refusal_note(refused.status, refused.detail),
            )
            return
        log.info("landing %s queued #%s at %s", landing.id, number, entry.head_sha[:12])
        entries = mark(entries, entry.number, note=QUEUED_NOTE)
        started = True
    _save(ctx, landing.id, entries=entries)
    if all(e.state == "merged" for e in entries):
        _finish(ctx, client, repo, replace(landing, entries=tuple(entries)), base_ref)


def _retarget_children(client: GitHubPort, repo: RepoName, parent: PrRecord) -> None:
    """Move every open PR based on ``parent``'s head branch onto ``parent``'s base before it
    merges: GitHub closes a PR whose base branch is deleted, losing its reviews."""
    for pull in client.list_open_pulls(repo):
        if pull.base_ref == parent.head_ref and pull.number != parent.number:
            client.update_pull_base(repo, pull.number, parent.base_ref)


def take_out_of_queue(
    client: GitHubPort, repo: RepoName, entries: Sequence[LandingEntry]
) -> list[LandingEntry]:
    """Queue mode, a landing that ends without landing everything (stopped, cancelled): its PRs
    still in GitHub's merge queue are taken out (``dequeuePullRequest``), or GitHub would merge
    them anyway; the groups behind a PR hold its commits. Each is taken out once (it is "not
    merged" then), so a PR someone queues again by hand later is left alone. GitHub refuses for
    a PR no longer queued: merged meanwhile (marked merged) or taken out by hand."""
    out = []
    for entry in entries:
        if entry.state == "pending" and entry.note == QUEUED_NOTE:
            try:
                client.dequeue_pull(repo, PrNumber(entry.number))
            except GitHubRejected:
                if client.get_pull(repo, PrNumber(entry.number)).merged:
                    out.append(replace(entry, state="merged", note=None))
                    continue
            entry = replace(entry, state="not merged", note=TAKEN_OUT_NOTE)
        out.append(entry)
    return out


def _refused(ctx: ServiceContext, landing: _Landing, entry: LandingEntry, note: str) -> None:
    _save(
        ctx,
        landing.id,
        state=LandingState.STOPPED,
        entries=stopped_at(landing.entries, entry.number, note),
        reason=f"#{entry.number} did not merge: {note}",
    )


def _finish(
    ctx: ServiceContext, client: GitHubPort, repo: RepoName, landing: _Landing, base_ref: str
) -> None:
    landed = client.commit_tree(repo, client.branch_sha(repo, base_ref))
    _save(ctx, landing.id, state=LandingState.LANDED, landed_tree=landed)


def _stop(ctx: ServiceContext, landing_id: int, reason: str) -> None:
    landing, _ = _load(ctx, landing_id)
    if landing is None:
        return
    entries = [
        e if e.state == "merged" else LandingEntry(e.number, e.head_sha, "not merged")
        for e in landing.entries
    ]
    _save(
        ctx,
        landing_id,
        state=LandingState.STOPPED,
        entries=entries,
        reason=reason,
        waiting_for=None,
    )


# -- the store and the comments ---------------------------------------------------------------


def _load(ctx: ServiceContext, landing_id: int) -> tuple[_Landing | None, str]:
    with session_scope(ctx.engine, immediate=False) as session:
        row = landing_store.get_landing(session, landing_id=landing_id)
        if row is None or row.id is None:
            return None, "main"
        repo = dashboard_store.repository_by_id(session, repo_id=row.repo_id)
        base_ref = repo.default_branch if repo is not None else "main"
        return (
            _Landing(
                row.id,
                row.repo_id,
                row.series_key,
                row.up_to,
                LandingState(row.state),
                tuple(landing_store.entries_of(row)),
                row.main_sha,
                row.merge_method,
            ),
            base_ref,
        )


def _save(
    ctx: ServiceContext,
    landing_id: int,
    *,
    state: LandingState | None = None,
    entries: Sequence[LandingEntry] | None = None,
    **fields: object,
) -> None:
    with session_scope(ctx.engine) as session:
        row = landing_store.lock_landing(session, landing_id=landing_id)
        if row is None:
            return
        if state is not None and not LandingState(row.state).active:
            return  # cancelled meanwhile: a cancel is final
        landing_store.save_landing(session, row, state=state, entries=entries, **fields)


def view_of(ctx: ServiceContext, landing_id: int, base_ref: str) -> LandingView | None:
    with session_scope(ctx.engine, immediate=False) as session:
        row = landing_store.get_landing(session, landing_id=landing_id)
        if row is None or row.id is None:
            return None
        return landing_store.landing_view(row, base_ref)


def publish(
    ctx: ServiceContext, client: GitHubPort, repo: RepoName, landing_id: int, base_ref: str
) -> None:
    """Write the landing's comment on each of its PRs (edited in place when it is there)."""
    view = view_of(ctx, landing_id, base_ref)
    if view is None:
        return
    body = landing_comment(view)
    for entry in view.entries:
        number = PrNumber(entry.number)
        found = next(
            (
                c
                for c in client.list_issue_comments(repo, number)
                if c.body.startswith(LANDING_MARKER) and c.id is not None
            ),
            None,
        )
        if found is None:
            client.create_comment(repo, number, body)
        elif found.body != body:
            assert found.id is not None
            client.edit_comment(repo, int(found.id), body)
