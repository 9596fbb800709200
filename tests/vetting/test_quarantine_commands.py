"""``/stackbot quarantine <test>`` and ``/stackbot release <test>`` end to end on the stand-in
(the comment with its real author, the webhook intake, the worker's reply), on SQLite and
PostgreSQL: a maintainer (write access) quarantines, renews and releases; a vetter without
write access and a stranger are refused without their words echoed."""

from __future__ import annotations

from stackbot.db import github_store as store
from stackbot.db import quarantine_store
from stackbot.db.engine import session_scope
from stackbot.domain.commands import QuarantineTest, ReleaseTest, Unknown, parse_command
from tests.sync.pipeline import Pipeline, open_pr

TEST = "tests/unit_tests/test_amax.py::TestAmax::test_group[1x4]"


def _state(pipeline: Pipeline) -> dict[str, tuple[str, str | None, str | None]]:
    with session_scope(pipeline.engine) as session:
        repository = store.get_repository(session, full_name=pipeline.repo)
        assert repository is not None and repository.id is not None
        return {
            e.nodeid: (e.state, e.requested_by, e.renewed_by)
            for e in quarantine_store.entries(session, repo_id=repository.id)
        }


def test_the_commands_parse_a_node_id_and_nothing_else() -> None:
    assert parse_command(f"/stackbot quarantine {TEST}") == QuarantineTest(TEST)
    assert parse_command(f"/stackbot release {TEST}") == ReleaseTest(TEST)
    for bad in ("/stackbot quarantine", "/stackbot quarantine `x`", "/stackbot release a b"):
        assert isinstance(parse_command(bad), Unknown), bad


def test_a_maintainer_quarantines_renews_and_releases_a_test(pipeline: Pipeline) -> None:
    number = open_pr(pipeline, author="carol", branch="carol/x", title="X")
    pipeline.deliver()
    pipeline.control.set_permission(pipeline.repo, "mia", "write")
    pipeline.control.comment(pipeline.repo, number, "mia", f"/stackbot quarantine {TEST}")
    pipeline.deliver()
    assert _state(pipeline) == {TEST: ("active", "mia", None)}
    [reply] = pipeline.replies(number)
    assert reply.body.startswith(f"Quarantined `{TEST}` until ")
    pipeline.control.comment(pipeline.repo, number, "mia", f"/stackbot quarantine {TEST}")
    pipeline.deliver()
    assert _state(pipeline) == {TEST: ("active", "mia", "mia")}
    assert pipeline.replies(number)[-1].body.startswith(f"Renewed the quarantine of `{TEST}`")
    pipeline.control.comment(pipeline.repo, number, "mia", f"/stackbot release {TEST}")
    pipeline.deliver()
    assert _state(pipeline) == {TEST: ("released", "mia", "mia")}
    assert pipeline.replies(number)[-1].body == f"Released `{TEST}`: its failures count again."


def test_anyone_without_write_access_is_refused_without_echo(pipeline: Pipeline) -> None:
    number = open_pr(pipeline, author="carol", branch="carol/y", title="Y")
    pipeline.deliver()
    for login in ("dave", "zed"):  # a configured vetter without write access; a stranger
        pipeline.control.comment(pipeline.repo, number, login, f"/stackbot quarantine {TEST}")
        pipeline.deliver()
        reply = pipeline.replies(number)[-1]
        assert reply.body == (
            f"@{login}, only maintainers (write access to the repository) can quarantine or "
            "release a test."
        )
        assert TEST not in reply.body
    assert _state(pipeline) == {}
