"""The stand-in serves every operation stackbot uses, answering as GitHub's OpenAPI says.

Each operation the stand-in serves (read from its own route table; it serves every operation of
``needed-operations.json`` and the few more stackbot or the demo uses) has a scenario below; a
test checks the scenarios cover those exactly, and each scenario's answer is validated against
the operation's documented response schema for its status. Error answers are validated too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest

from tests.github_standin.scene import Scene, body_of, build_scene
from tests.support import github_contract
from tests.support.standin import StandinWorld

Call = Callable[[Scene], httpx.Response]


def _force_update_ref(s: Scene) -> httpx.Response:
    s.world.control.commit(
        s.world.repo, "scratch", {"scratch.txt": "x\n"}, message="scratch", author="bob"
    )
    return s.user.patch(
        f"{s.repo_path}/git/refs/heads/scratch", json={"sha": s.bottom_sha, "force": True}
    )


def _create_draft_pull(s: Scene) -> httpx.Response:
    s.world.control.commit(
        s.world.repo, "port-draft", {"port.txt": "x\n"}, message="port", author="bob"
    )
    return s.bot.post(
        f"{s.repo_path}/pulls",
        json={"head": "port-draft", "base": "main", "title": "Port", "body": "b", "draft": True},
    )


SCENARIOS: dict[str, tuple[int, Call]] = {
    "pulls/create": (201, _create_draft_pull),
    "pulls/get": (200, lambda s: s.user.get(f"{s.repo_path}/pulls/{s.bottom}")),
    "pulls/list": (200, lambda s: s.user.get(f"{s.repo_path}/pulls", params={"state": "all"})),
    "pulls/list-commits": (200, lambda s: s.user.get(f"{s.repo_path}/pulls/{s.top}/commits")),
    "pulls/list-files": (200, lambda s: s.user.get(f"{s.repo_path}/pulls/{s.bottom}/files")),
    "pulls/update": (
        200,
        lambda s: s.bot.patch(f"{s.repo_path}/pulls/{s.bottom}", json={"body": "retargeted"}),
    ),
    "issues/create-comment": (
        201,
        lambda s: s.bot.post(f"{s.repo_path}/issues/{s.bottom}/comments", json={"body": "report"}),
    ),
    "issues/update-comment": (
        200,
        lambda s: s.user.patch(
            f"{s.repo_path}/issues/comments/{s.comment_id}", json={"body": "edited"}
        ),
    ),
    "issues/list-comments": (
        200,
        lambda s: s.user.get(f"{s.repo_path}/issues/{s.bottom}/comments"),
    ),
    "issues/list-comments-for-repo": (200, lambda s: s.user.get(f"{s.repo_path}/issues/comments")),
    "issues/get-comment": (
        200,
        lambda s: s.user.get(f"{s.repo_path}/issues/comments/{s.comment_id}"),
    ),
    "issues/delete-comment": (204, lambda s: _delete_new_comment(s)),
    "repos/create-commit-status": (
        201,
        lambda s: s.user.post(
            f"{s.repo_path}/statuses/{s.bottom_sha}",
            json={
                "state": "success",
                "context": "stackbot/x",
                "description": "ok",
                "target_url": "http://x/y",
            },
        ),
    ),
    "repos/get-combined-status-for-ref": (
        200,
        lambda s: s.user.get(f"{s.repo_path}/commits/{s.bottom_sha}/status"),
    ),
    "repos/list-commit-statuses-for-ref": (
        200,
        lambda s: s.user.get(f"{s.repo_path}/commits/{s.bottom_sha}/statuses"),
    ),
    "checks/create": (
        201,
        lambda s: s.bot.post(
            f"{s.repo_path}/check-runs",
            json={
                "name": "stackbot / blockwise-recipe 1x4",
                "head_sha": s.bottom_sha,
                "status": "completed",
                "conclusion": "success",
                "details_url": "http://127.0.0.1:8000/runs/1",
                "external_id": "8034/b/1x4",
                "output": {
                    "title": "14 passed",
                    "summary": "14 tests vs 5 on main",
                    "text": "details",
                },
            },
        ),
    ),
    "checks/update": (
        200,
        lambda s: s.bot.patch(
            f"{s.repo_path}/check-runs/{s.check_run_id}",
            json={
                "status": "completed",
                "conclusion": "failure",
                "output": {"title": "1 failed", "summary": "s"},
            },
        ),
    ),
    "checks/get": (200, lambda s: s.user.get(f"{s.repo_path}/check-runs/{s.check_run_id}")),
    "checks/list-for-ref": (
        200,
        lambda s: s.user.get(f"{s.repo_path}/commits/{s.bottom_sha}/check-runs"),
    ),
    "checks/rerequest-run": (201, lambda s: _rerequest_completed_run(s)),
    "repos/get-collaborator-permission-level": (
        200,
        lambda s: s.user.get(f"{s.repo_path}/collaborators/bob/permission"),
    ),
    "repos/check-collaborator": (204, lambda s: s.user.get(f"{s.repo_path}/collaborators/bob")),
    "orgs/get-membership-for-user": (200, lambda s: s.bot.get("/orgs/NVIDIA/memberships/alice")),
    "orgs/check-membership-for-user": (204, lambda s: s.bot.get("/orgs/NVIDIA/members/alice")),
    "orgs/check-public-membership-for-user": (204, lambda s: _public_member(s)),
    "repos/get-commit": (200, lambda s: s.user.get(f"{s.repo_path}/commits/{s.bottom_sha}")),
    "git/get-commit": (200, lambda s: s.user.get(f"{s.repo_path}/git/commits/{s.bottom_sha}")),
    "repos/compare-commits": (
        200,
        lambda s: s.user.get(f"{s.repo_path}/compare/main...amax-tests"),
    ),
    "repos/list-pull-requests-associated-with-commit": (
        200,
        lambda s: s.user.get(f"{s.repo_path}/commits/{s.bottom_sha}/pulls"),
    ),
    "git/get-ref": (200, lambda s: s.user.get(f"{s.repo_path}/git/ref/heads/main")),
    "git/update-ref": (200, _force_update_ref),
    "git/create-ref": (
        201,
        lambda s: s.user.post(
            f"{s.repo_path}/git/refs",
            json={"ref": "refs/heads/stackbot/run-1", "sha": s.bottom_sha},
        ),
    ),
    "git/delete-ref": (204, lambda s: _delete_new_branch(s)),
    "apps/create-installation-access-token": (
        201,
        lambda s: s.app.post(f"/app/installations/{s.world.installation_id}/access_tokens"),
    ),
    "apps/get-repo-installation": (200, lambda s: s.app.get(f"{s.repo_path}/installation")),
    "rate-limit/get": (200, lambda s: s.user.get("/rate_limit")),
    "pull-request-stacks/list": (
        200,
        lambda s: s.user.get(f"{s.repo_path}/stacks", params={"pull_request": 8035}),
    ),
    "pull-request-stacks/get": (200, lambda s: s.user.get(f"{s.repo_path}/stacks/1")),
    "pull-request-stacks/create": (201, lambda s: _stack_two_more(s)),
    "repos/get": (200, lambda s: s.user.get(s.repo_path)),
    "pulls/merge": (200, lambda s: _merge_fresh(s, "squash")),
    "pulls/check-if-merged": (
        204,
        lambda s: s.user.get(f"{s.repo_path}/pulls/{_merged_number(s)}/merge"),
    ),
    "pulls/list-reviews": (200, lambda s: s.user.get(f"{s.repo_path}/pulls/{s.bottom}/reviews")),
    "pulls/create-review": (
        200,
        lambda s: s.user.post(f"{s.repo_path}/pulls/{s.bottom}/reviews", json={"event": "APPROVE"}),
    ),
    "repos/get-branch-protection": (200, lambda s: _protection_of(s)),
    "repos/update-branch-protection": (200, lambda s: _protect(s, "amax-group")),
    "repos/delete-branch-protection": (204, lambda s: _unprotect(s)),
}


def _fresh_pull(s: Scene, branch: str) -> tuple[int, str]:
    pull = s.world.control.open_pull(
        s.world.repo, author="alice", head=branch, title=branch, files={f"{branch}.txt": "x\n"}
    )
    return pull.number, pull.head_sha


def _merge_fresh(s: Scene, method: str) -> httpx.Response:
    number, head = _fresh_pull(s, f"land-{method}")
    return s.bot.put(
        f"{s.repo_path}/pulls/{number}/merge", json={"sha": head, "merge_method": method}
    )


def _merged_number(s: Scene) -> int:
    number, head = _fresh_pull(s, "land-done")
    s.world.control.merge_pull(s.world.repo, number, merger="bob", sha=head)
    return number


def _admin(s: Scene) -> httpx.Client:
    control = s.world.control
    control.set_permission(s.world.repo, "root", "admin")
    return httpx.Client(
        base_url=s.world.url,
        headers={"Authorization": f"token {control.create_token('root')}"},
        timeout=30,
    )


PROTECTION = {
    "required_status_checks": {"strict": False, "contexts": ["stackbot/integration"]},
    "enforce_admins": True,
    "required_pull_request_reviews": {"required_approving_review_count": 1},
    "restrictions": None,
}


def _protect(s: Scene, branch: str = "main") -> httpx.Response:
    with _admin(s) as admin:
        return admin.put(f"{s.repo_path}/branches/{branch}/protection", json=PROTECTION)


def _unprotect(s: Scene) -> httpx.Response:
    s.world.control.commit(s.world.repo, "guarded", {"g": "1\n"}, message="g", author="bob")
    _protect(s, "guarded")
    with _admin(s) as admin:
        return admin.delete(f"{s.repo_path}/branches/guarded/protection")


def _refused_by_protection(s: Scene) -> httpx.Response:
    s.world.control.commit(s.world.repo, "guarded2", {"g": "1\n"}, message="g", author="bob")
    _protect(s, "guarded2")
    pull = s.world.control.open_pull(
        s.world.repo, author="alice", head="g2-feat", base="guarded2", title="t", files={"h": "1\n"}
    )
    return s.bot.put(f"{s.repo_path}/pulls/{pull.number}/merge", json={"sha": pull.head_sha})


def _protection_of(s: Scene) -> httpx.Response:
    s.world.control.commit(s.world.repo, "guarded3", {"g": "1\n"}, message="g", author="bob")
    _protect(s, "guarded3")
    return s.user.get(f"{s.repo_path}/branches/guarded3/protection")


def _public_member(s: Scene) -> httpx.Response:
    s.world.control.add_org_member("NVIDIA", "dave", public=True)
    return s.user.get("/orgs/NVIDIA/public_members/dave")


def _delete_new_comment(s: Scene) -> httpx.Response:
    comment = s.world.control.comment(s.world.repo, s.bottom, "bob", "to be deleted")
    return s.user.delete(f"{s.repo_path}/issues/comments/{comment.id}")


def _delete_new_branch(s: Scene) -> httpx.Response:
    s.world.control.commit(
        s.world.repo, "doomed", {"doomed": "1\n"}, message="doomed", author="bob"
    )
    return s.user.delete(f"{s.repo_path}/git/refs/heads/doomed")


def _rerequest_completed_run(s: Scene) -> httpx.Response:
    run = s.bot.post(
        f"{s.repo_path}/check-runs",
        json={
            "name": "rerun me",
            "head_sha": s.bottom_sha,
            "conclusion": "failure",
            "output": {"title": "t", "summary": "s"},
        },
    ).json()
    return s.bot.post(f"{s.repo_path}/check-runs/{run['id']}/rerequest")


def _stack_two_more(s: Scene) -> httpx.Response:
    control = s.world.control
    control.open_pull(s.world.repo, author="carol", head="c1", title="c1", files={"c1": "1\n"})
    control.open_pull(
        s.world.repo, author="carol", head="c2", base="c1", title="c2", files={"c2": "2\n"}
    )
    numbers = sorted(p for p in control.repo(s.world.repo).pulls if p not in (8034, 8035))
    return s.bot.post(f"{s.repo_path}/stacks", json={"pull_requests": numbers})


ERROR_SCENARIOS: dict[str, list[tuple[int, Call]]] = {
    "pulls/create": [
        (
            422,
            lambda s: s.bot.post(
                f"{s.repo_path}/pulls", json={"head": "no-such", "base": "main", "title": "x"}
            ),
        ),
        # the head of an open PR into the same base: "A pull request already exists"
        (
            422,
            lambda s: s.bot.post(
                f"{s.repo_path}/pulls", json={"head": "amax-group", "base": "main", "title": "x"}
            ),
        ),
    ],
    "pulls/get": [(404, lambda s: s.user.get(f"{s.repo_path}/pulls/9999"))],
    "pulls/list": [(422, lambda s: s.user.get(f"{s.repo_path}/pulls", params={"state": "merged"}))],
    "pulls/update": [
        (422, lambda s: s.bot.patch(f"{s.repo_path}/pulls/{s.top}", json={"base": "no-such"})),
    ],
    "issues/create-comment": [
        (404, lambda s: s.user.post(f"{s.repo_path}/issues/9999/comments", json={"body": "x"})),
        (
            422,
            lambda s: s.user.post(
                f"{s.repo_path}/issues/{s.bottom}/comments", json={"body": "x" * 70000}
            ),
        ),
        (403, lambda s: _no_issue_rights(s)),
    ],
    "issues/update-comment": [
        (422, lambda s: s.user.patch(f"{s.repo_path}/issues/comments/{s.comment_id}", json={}))
    ],
    "issues/get-comment": [(404, lambda s: s.user.get(f"{s.repo_path}/issues/comments/1"))],
    "repos/get-collaborator-permission-level": [
        (404, lambda s: s.user.get(f"{s.repo_path}/collaborators/no-such-user/permission")),
    ],
    "repos/check-collaborator": [(404, lambda s: s.user.get(f"{s.repo_path}/collaborators/carol"))],
    "orgs/get-membership-for-user": [(404, lambda s: s.bot.get("/orgs/NVIDIA/memberships/carol"))],
    "orgs/check-membership-for-user": [
        (404, lambda s: s.bot.get("/orgs/NVIDIA/members/carol")),
        (302, lambda s: s.user.get("/orgs/NVIDIA/members/alice")),  # bob is no member
    ],
    "orgs/check-public-membership-for-user": [
        (404, lambda s: s.user.get("/orgs/NVIDIA/public_members/carol")),
    ],
    "repos/get-commit": [(422, lambda s: s.user.get(f"{s.repo_path}/commits/no-such-ref"))],
    "git/get-commit": [(404, lambda s: s.user.get(f"{s.repo_path}/git/commits/{'0' * 40}"))],
    "repos/compare-commits": [(404, lambda s: s.user.get(f"{s.repo_path}/compare/main...nope"))],
    "git/get-ref": [(404, lambda s: s.user.get(f"{s.repo_path}/git/ref/heads/nope"))],
    "git/create-ref": [
        (
            422,
            lambda s: s.user.post(
                f"{s.repo_path}/git/refs", json={"ref": "refs/heads/main", "sha": s.bottom_sha}
            ),
        ),
    ],
    "git/update-ref": [
        (422, lambda s: s.user.patch(f"{s.repo_path}/git/refs/heads/main", json={"sha": "1" * 40})),
    ],
    "apps/create-installation-access-token": [
        (404, lambda s: s.app.post("/app/installations/1/access_tokens")),
        (401, lambda s: s.user.post(f"/app/installations/{s.world.installation_id}/access_tokens")),
    ],
    "apps/get-repo-installation": [(404, lambda s: s.app.get("/repos/someone/else/installation"))],
    "checks/rerequest-run": [(404, lambda s: s.bot.post(f"{s.repo_path}/check-runs/1/rerequest"))],
    "pull-request-stacks/list": [(404, lambda s: s.user.get("/repos/NVIDIA/nope/stacks"))],
    "pulls/merge": [
        (
            409,
            lambda s: s.bot.put(f"{s.repo_path}/pulls/{s.top}/merge", json={"sha": s.bottom_sha}),
        ),
        (405, lambda s: s.bot.put(f"{s.repo_path}/pulls/{_merged_number(s)}/merge")),
        (405, lambda s: _refused_by_protection(s)),
        (
            422,
            lambda s: s.bot.put(
                f"{s.repo_path}/pulls/{s.top}/merge", json={"merge_method": "fast-forward"}
            ),
        ),
    ],
    "pulls/check-if-merged": [(404, lambda s: s.user.get(f"{s.repo_path}/pulls/{s.top}/merge"))],
    "pulls/create-review": [
        (
            422,
            lambda s: s.user.post(f"{s.repo_path}/pulls/{s.top}/reviews", json={"event": "LGTM"}),
        ),
    ],
    "repos/get-branch-protection": [
        (404, lambda s: s.user.get(f"{s.repo_path}/branches/amax-tests/protection")),
    ],
    "repos/update-branch-protection": [
        (403, lambda s: s.user.put(f"{s.repo_path}/branches/main/protection", json=PROTECTION)),
    ],
    "pull-request-stacks/create": [
        (422, lambda s: s.bot.post(f"{s.repo_path}/stacks", json={"pull_requests": [8035, 8034]})),
    ],
}


def _no_issue_rights(s: Scene) -> httpx.Response:
    world = s.world
    app = world.control.state.apps[world.app_id]
    saved = dict(app.installations[world.installation_id].permissions)
    world.control.set_installation_permissions(
        world.installation_id, {"metadata": "read", "checks": "write"}
    )
    try:
        # The permissions are the installation's now, not the token's: GitHub re-reads them.
        return s.bot.post(f"{s.repo_path}/issues/{s.bottom}/comments", json={"body": "x"})
    finally:
        world.control.set_installation_permissions(world.installation_id, saved)


@pytest.fixture(scope="module")
def scene(shared_standin: StandinWorld) -> Iterator[Scene]:
    built = build_scene(shared_standin)
    try:
        yield built
    finally:
        built.close()


def test_scenarios_cover_every_operation_the_standin_serves() -> None:
    served = github_contract.served_operations()
    needed = {op.operation_id for op in github_contract.needed_operations()}
    assert needed - served == set(), "operations stackbot uses that the stand-in does not serve"
    assert served - set(SCENARIOS) == set(), "operations the stand-in is not tested to serve"
    assert set(SCENARIOS) - served == set(), "scenarios for operations the stand-in lacks"
    assert set(ERROR_SCENARIOS) - served == set()


def test_needed_operations_match_the_openapi_description() -> None:
    for op in github_contract.needed_operations():
        assert op.spec["responses"], op.operation_id


@pytest.mark.parametrize("operation_id", sorted(SCENARIOS))
def test_operation_answers_as_documented(scene: Scene, operation_id: str) -> None:
    status, call = SCENARIOS[operation_id]
    response = call(scene)
    assert response.status_code == status, response.text
    github_contract.validate_response(operation_id, status, body_of(response))
    assert response.headers.get("x-ratelimit-limit"), "every API answer carries rate-limit headers"


@pytest.mark.parametrize(
    ("operation_id", "index"),
    [(op, i) for op, cases in sorted(ERROR_SCENARIOS.items()) for i in range(len(cases))],
)
def test_error_answers_are_documented(scene: Scene, operation_id: str, index: int) -> None:
    status, call = ERROR_SCENARIOS[operation_id][index]
    response = call(scene)
    assert response.status_code == status, response.text
    if status in _documented(operation_id):
        github_contract.validate_response(operation_id, status, body_of(response))
    else:
        # Statuses an operation does not document still answer GitHub's basic-error shape.
        github_contract.validate_component("basic-error", body_of(response))
        assert response.json()["message"]


def _documented(operation_id: str) -> set[int]:
    return {int(code) for code in github_contract.operation(operation_id).spec["responses"]}


def test_the_contract_validator_rejects_a_wrong_answer(scene: Scene) -> None:
    body = scene.user.get(f"{scene.repo_path}/pulls/{scene.bottom}").json()
    del body["head"]
    with pytest.raises(github_contract.ContractViolation, match="head"):
        github_contract.validate_response("pulls/get", 200, body)
    body = scene.user.get(f"{scene.repo_path}/issues/comments/{scene.comment_id}").json()
    body["created_at"] = "yesterday"
    with pytest.raises(github_contract.ContractViolation, match="created_at"):
        github_contract.validate_response("issues/get-comment", 200, body)


def test_list_pagination_follows_link_headers(scene: Scene) -> None:
    issue = scene.world.control.open_issue(scene.world.repo, author="alice", title="tracking")
    for i in range(6):
        scene.world.control.comment(scene.world.repo, issue.number, "carol", f"comment {i}")
    seen: list[int] = []
    url: str | None = f"{scene.repo_path}/issues/{issue.number}/comments?per_page=2"
    pages = 0
    while url:
        response = scene.user.get(url)
        github_contract.validate_response("issues/list-comments", 200, response.json())
        seen += [c["id"] for c in response.json()]
        url = response.links.get("next", {}).get("url")
        pages += 1
    assert pages == 3
    assert len(seen) == 6 == len(set(seen))
    assert seen == sorted(seen)


def test_native_stack_object_is_on_the_pull_request(scene: Scene) -> None:
    top = scene.user.get(f"{scene.repo_path}/pulls/{scene.top}").json()
    main_sha = scene.user.get(f"{scene.repo_path}/git/ref/heads/main").json()["object"]["sha"]
    assert top["stack"] == {
        "id": top["stack"]["id"],
        "number": 1,
        "size": 2,
        "position": 2,
        "base": {"ref": "main", "sha": main_sha},
    }
    listed = scene.user.get(f"{scene.repo_path}/stacks").json()
    assert [p["number"] for p in listed[0]["pull_requests"]] == [8034, 8035]
