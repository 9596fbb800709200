"""Reads and writes of what stackbot knows about GitHub: repositories, pull requests, their
dependency graph and series, approvals and reports.

Keyword-only functions over a session; no business rules (the services decide, these store).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Row, delete
from sqlalchemy import select as select_columns
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from stackbot.db.models import (
    Approval,
    DependencyEdge,
    PullRequest,
    Report,
    Repository,
    Series,
    SeriesMember,
)
from stackbot.db.models._columns import utcnow
from stackbot.domain.records import CommentRecord, CommitRecord, NativeStack, PrRecord
from stackbot.domain.types import PrNumber

# -- repositories -----------------------------------------------------------------------------


def get_repository(session: Session, *, full_name: str) -> Repository | None:
    return session.exec(select(Repository).where(Repository.full_name == full_name)).first()


def upsert_repository(
    session: Session, *, full_name: str, clone_url: str, default_branch: str | None = None
) -> Repository:
    repository = get_repository(session, full_name=full_name)
    if repository is None:
        repository = Repository(full_name=full_name, clone_url=clone_url)
    repository.clone_url = clone_url or repository.clone_url
    if default_branch:
        repository.default_branch = default_branch
    session.add(repository)
    session.flush()
    return repository


def tracked_repositories(session: Session) -> list[Repository]:
    """Repositories with at least one series."""
    with_series = select(Series.repo_id).distinct()
    statement = select(Repository).where(col(Repository.id).in_(with_series))
    return list(session.exec(statement.order_by(col(Repository.full_name))))


# -- pull requests ----------------------------------------------------------------------------


def get_pull(session: Session, *, repo_id: int, number: int) -> PullRequest | None:
    statement = select(PullRequest).where(
        PullRequest.repo_id == repo_id, PullRequest.number == number
    )
    return session.exec(statement).first()


def list_pulls(session: Session, *, repo_id: int, open_only: bool = False) -> list[PullRequest]:
    statement = select(PullRequest).where(PullRequest.repo_id == repo_id)
    if open_only:
        statement = statement.where(PullRequest.state == "open")
    return list(session.exec(statement.order_by(col(PullRequest.number))))


def pull_heads(session: Session, *, repo_id: int) -> list[Row[Any]]:
    """Every PR of the repository by number, with only what a report view reads of it (a PR's
    body, commits and comments can be large): rows of ``number``, ``title``, ``state``,
    ``draft``, ``merged``, ``superseded_by`` and ``head_sha``."""
    statement = (
        select_columns(
            col(PullRequest.number),
            col(PullRequest.title),
            col(PullRequest.state),
            col(PullRequest.draft),
            col(PullRequest.merged),
            col(PullRequest.superseded_by),
            col(PullRequest.head_sha),
        )
        .where(col(PullRequest.repo_id) == repo_id)
        .order_by(col(PullRequest.number))
    )
    return list(session.execute(statement).all())


def save_pull(session: Session, *, repo_id: int, record: PrRecord) -> PullRequest:
    """Insert or update the PR from ``record``; a replaced head goes onto ``head_history``
    (which never holds the current head).
    ``superseded_by`` is kept (the graph build sets it)."""
    row = get_pull(session, repo_id=repo_id, number=record.number)
    if row is None:
        row = PullRequest(repo_id=repo_id, number=record.number)
    elif row.head_sha and record.head_sha and row.head_sha != record.head_sha:
        kept = [s for s in row.head_history if s not in (row.head_sha, record.head_sha)]
        row.head_history = [*kept, row.head_sha]
    row.title = record.title[:1000]
    row.author = record.author
    row.author_association = record.author_association
    row.state = record.state
    row.merged = record.merged
    row.draft = record.draft
    row.head_ref = record.head_ref
    row.head_sha = record.head_sha
    row.head_repo = record.head_repo
    row.base_ref = record.base_ref
    row.base_sha = record.base_sha
    row.body = record.body
    row.stack = record.stack.to_json() if record.stack else None
    row.commits = [_commit_json(commit) for commit in record.commits]
    row.comments = [_comment_json(comment) for comment in record.comments]
    row.synced_at = utcnow()
    session.add(row)
    session.flush()
    return row


def set_superseded(session: Session, *, repo_id: int, superseded: Mapping[int, int]) -> None:
    """``superseded_by`` for every PR of the repository (None for those not in the mapping)."""
    for row in list_pulls(session, repo_id=repo_id):
        value = superseded.get(row.number)
        if row.superseded_by != value:
            row.superseded_by = value
            session.add(row)
    session.flush()


def pr_record(row: PullRequest) -> PrRecord:
    return PrRecord(
        number=PrNumber(row.number),
        title=row.title,
        author=row.author,
        state=row.state,
        merged=row.merged,
        draft=row.draft,
        head_ref=row.head_ref,
        head_sha=row.head_sha,
        base_ref=row.base_ref,
        base_sha=row.base_sha,
        body=row.body or "",
        stack=NativeStack.from_json(row.stack),
        commits=tuple(_commit_record(commit) for commit in row.commits),
        comments=tuple(_comment_record(comment) for comment in row.comments),
        author_association=row.author_association,
        head_repo=row.head_repo,
    )


def _commit_json(commit: CommitRecord) -> dict[str, Any]:
    data: dict[str, Any] = {
        "sha": commit.sha,
        "message": commit.message,
        "parents": list(commit.parents),
    }
    if commit.author is not None:
        data["author"] = commit.author
    return data


def _commit_record(data: dict[str, Any]) -> CommitRecord:
    return CommitRecord(
        sha=data["sha"],
        message=data.get("message", ""),
        parents=tuple(data.get("parents", ())),
        author=data.get("author"),
    )


def commit_authors(row: PullRequest) -> list[str | None]:
    """The GitHub login of each commit's author (None where GitHub knows no account)."""
    return [commit.get("author") for commit in row.commits]


def _comment_json(comment: CommentRecord) -> dict[str, Any]:
    found: dict[str, Any] = {"author": comment.author, "body": comment.body, "id": comment.id}
    if comment.kind != "comment":
        found["kind"] = comment.kind
    if comment.author_association != "NONE":
        found["author_association"] = comment.author_association
    return found


def _comment_record(data: dict[str, Any]) -> CommentRecord:
    return CommentRecord(
        author=data.get("author", ""),
        body=data.get("body", ""),
        id=data.get("id"),
        kind=data.get("kind", "comment"),
        author_association=data.get("author_association", "NONE"),
    )


# -- the dependency graph and series ----------------------------------------------------------


@dataclass(frozen=True)
class SeriesData:
    key: str
    order: tuple[int, ...]
    tracking_issue: int | None = None
    root_pr: int | None = None
    problems: tuple[dict[str, Any], ...] = ()
    # Every PR of the series, whatever its state (order holds only the live ones).
    prs: tuple[int, ...] = ()


def replace_graph(
    session: Session,
    *,
    repo_id: int,
    edges: Iterable[tuple[int, int, str]],
    series: Sequence[SeriesData],
    edge_texts: Mapping[tuple[int, int, str], tuple[str, str]] | None = None,
) -> None:
    """Make the stored edges and series of a repository exactly these. A series that stays
    keeps its row (and its status); members are rewritten. ``edge_texts`` gives an edge's
    declaring text and origin."""
    session.execute(delete(DependencyEdge).where(col(DependencyEdge.repo_id) == repo_id))
    for child, parent, source in sorted(set(edges)):
        text, origin = (edge_texts or {}).get((child, parent, source), ("", ""))
        session.add(
            DependencyEdge(
                repo_id=repo_id,
                child=child,
                parent=parent,
                source=source,
                text=text.replace("\x00", "\ufffd") or None,
                origin=origin.replace("\x00", "\ufffd") or None,
            )
        )
    existing = {
        row.key: row for row in session.exec(select(Series).where(Series.repo_id == repo_id))
    }
    ids = [row.id for row in existing.values()]
    if ids:
        session.execute(delete(SeriesMember).where(col(SeriesMember.series_id).in_(ids)))
    wanted = {item.key for item in series}
    for key, row in existing.items():
        if key not in wanted:
            session.delete(row)
    session.flush()
    for item in series:
        row = existing.get(item.key) or Series(repo_id=repo_id, key=item.key)
        row.order = list(item.order)
        row.tracking_issue = item.tracking_issue
        row.root_pr = item.root_pr
        row.problems = list(item.problems)
        row.updated_at = utcnow()
        session.add(row)
        session.flush()
        assert row.id is not None
        # Live PRs first, in series order; then merged, closed and superseded ones by number.
        members = list(item.order) + sorted(set(item.prs) - set(item.order))
        for position, number in enumerate(members):
            session.add(SeriesMember(series_id=row.id, pr_number=number, position=position))
    session.flush()


def list_series(session: Session, *, repo_id: int) -> list[Series]:
    statement = select(Series).where(Series.repo_id == repo_id).order_by(col(Series.key))
    return list(session.exec(statement))


def get_series(session: Session, *, repo_id: int, key: str) -> Series | None:
    return session.exec(select(Series).where(Series.repo_id == repo_id, Series.key == key)).first()


def get_series_by_id(session: Session, *, series_id: int) -> Series | None:
    return session.get(Series, series_id)


def series_member_numbers(session: Session, *, series_id: int) -> list[int]:
    """Every PR the series holds (merged, closed and superseded members too), ascending."""
    statement = select(SeriesMember.pr_number).where(SeriesMember.series_id == series_id)
    return sorted(set(session.exec(statement)))


def list_repositories(session: Session) -> list[Repository]:
    return list(session.exec(select(Repository).order_by(col(Repository.id))))


def series_keys_of(session: Session, *, repo_id: int, number: int) -> list[str]:
    statement = (
        select(Series.key)
        .join(SeriesMember, col(SeriesMember.series_id) == col(Series.id))
        .where(Series.repo_id == repo_id, SeriesMember.pr_number == number)
    )
    return sorted(session.exec(statement))


def series_keys_of_prs(
    session: Session, *, repo_id: int, numbers: Sequence[int]
) -> dict[int, list[str]]:
    """:func:`series_keys_of` for several PRs in one query (every asked PR is a key)."""
    found: dict[int, list[str]] = {n: [] for n in numbers}
    if not found:
        return found
    statement = (
        select(SeriesMember.pr_number, Series.key)
        .join(Series, col(SeriesMember.series_id) == col(Series.id))
        .where(Series.repo_id == repo_id, col(SeriesMember.pr_number).in_(sorted(found)))
    )
    for number, key in session.exec(statement):
        found[number].append(key)
    return {n: sorted(keys) for n, keys in found.items()}


def list_edges(session: Session, *, repo_id: int) -> list[DependencyEdge]:
    statement = select(DependencyEdge).where(DependencyEdge.repo_id == repo_id)
    return list(session.exec(statement.order_by(col(DependencyEdge.id))))


def edge_pairs(session: Session, *, repo_id: int) -> list[Row[Any]]:
    """Every edge of the repository as a row of ``child`` and ``parent`` (columns, not ORM
    objects: what the report views' graph reads of a 500-PR series' edges)."""
    statement = (
        select_columns(col(DependencyEdge.child), col(DependencyEdge.parent))
        .where(col(DependencyEdge.repo_id) == repo_id)
        .order_by(col(DependencyEdge.id))
    )
    return list(session.execute(statement).all())


# -- approvals --------------------------------------------------------------------------------


def find_approval(session: Session, *, repo_id: int, pr_number: int, sha: str) -> Approval | None:
    statement = select(Approval).where(
        Approval.repo_id == repo_id, Approval.pr_number == pr_number, Approval.sha == sha
    )
    return session.exec(statement).first()


def add_approval(
    session: Session,
    *,
    repo_id: int,
    pr_number: int,
    sha: str,
    vetter: str,
    kind: str,
    comment_id: int | None = None,
    carried_from: str | None = None,
) -> bool:
    """Store an approval of one commit; False (and nothing written) if it was already there."""
    if find_approval(session, repo_id=repo_id, pr_number=pr_number, sha=sha) is not None:
        return False
    approval = Approval(
        repo_id=repo_id,
        pr_number=pr_number,
        sha=sha,
        vetter=vetter,
        kind=kind,
        comment_id=comment_id,
        carried_from=carried_from,
    )
    try:
        with session.begin_nested():  # a concurrent worker may have stored it first
            session.add(approval)
    except IntegrityError:
        return False
    return True


def approvals_of(session: Session, *, repo_id: int, pr_number: int) -> list[Approval]:
    statement = (
        select(Approval)
        .where(Approval.repo_id == repo_id, Approval.pr_number == pr_number)
        .order_by(col(Approval.id))
    )
    return list(session.exec(statement))


def approvals_of_prs(
    session: Session, *, repo_id: int, numbers: Sequence[int]
) -> dict[int, list[Approval]]:
    """:func:`approvals_of` for several PRs in one query (every asked PR is a key)."""
    found: dict[int, list[Approval]] = {n: [] for n in numbers}
    if not found:
        return found
    statement = (
        select(Approval)
        .where(Approval.repo_id == repo_id, col(Approval.pr_number).in_(sorted(found)))
        .order_by(col(Approval.id))
    )
    for approval in session.exec(statement):
        found[approval.pr_number].append(approval)
    return found


def approval_rows_of_prs(
    session: Session, *, repo_id: int, numbers: Sequence[int]
) -> dict[int, list[Row[Any]]]:
    """:func:`approvals_of_prs` as rows of ``sha``, ``vetter``, ``kind`` and ``carried_from``
    (what a report view reads; columns, not ORM objects: a 500-PR series has hundreds)."""
    found: dict[int, list[Row[Any]]] = {n: [] for n in numbers}
    if not found:
        return found
    statement = (
        select_columns(
            col(Approval.pr_number),
            col(Approval.sha),
            col(Approval.vetter),
            col(Approval.kind),
            col(Approval.carried_from),
        )
        .where(col(Approval.repo_id) == repo_id, col(Approval.pr_number).in_(sorted(found)))
        .order_by(col(Approval.id))
    )
    for row in session.execute(statement):
        found[row.pr_number].append(row)
    return found


# -- reports ----------------------------------------------------------------------------------


def get_report(session: Session, *, repo_id: int, pr_number: int) -> Report | None:
    statement = select(Report).where(Report.repo_id == repo_id, Report.pr_number == pr_number)
    return session.exec(statement).first()


def save_report(
    session: Session,
    *,
    repo_id: int,
    pr_number: int,
    comment_id: int | None,
    comment_hash: str | None,
    check_runs: dict[str, Any],
) -> Report:
    report = get_report(session, repo_id=repo_id, pr_number=pr_number)
    if report is None:
        report = Report(repo_id=repo_id, pr_number=pr_number)
    report.comment_id = comment_id
    report.comment_hash = comment_hash
    report.check_runs = check_runs
    report.updated_at = utcnow()
    session.add(report)
    session.flush()
    return report


def delete_report(session: Session, *, repo_id: int, pr_number: int) -> None:
    session.execute(
        delete(Report).where(col(Report.repo_id) == repo_id, col(Report.pr_number) == pr_number)
    )
