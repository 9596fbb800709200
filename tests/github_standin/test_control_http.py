"""The control API over HTTP (``/_standin/...``), for driving the stand-in from another process."""

from __future__ import annotations

import httpx

from tests.github_standin.receiver import Receiver
from tests.support import github_contract
from tests.support.standin import WEBHOOK_SECRET, StandinWorld


def test_a_series_can_be_driven_over_http(standin: StandinWorld) -> None:
    with (
        httpx.Client(base_url=f"{standin.url}/_standin", timeout=30) as control,
        Receiver() as receiver,
    ):
        assert (
            control.put(
                "/webhook", json={"url": receiver.url, "secret": WEBHOOK_SECRET}
            ).status_code
            == 200
        )
        assert (
            control.post("/users", json={"login": "erin", "email": "erin@example.com"}).status_code
            == 201
        )
        repo = control.post(
            "/repos", json={"full_name": "erin/tools", "files": {"a.py": "1\n"}, "author": "erin"}
        )
        assert repo.status_code == 201 and repo.json()["clone_url"].startswith("file://")
        pr = control.post(
            "/repos/erin/tools/pulls",
            json={
                "author": "erin",
                "head": "fix",
                "title": "Fix",
                "body": "Depends on #1",
                "files": {"a.py": "2\n"},
            },
        )
        assert pr.status_code == 201, pr.text
        number = pr.json()["number"]
        head = pr.json()["head_sha"]
        assert (
            control.post(
                "/repos/erin/tools/commits",
                json={
                    "branch": "fix",
                    "files": {"b.py": "3\n"},
                    "message": "more",
                    "author": "erin",
                },
            ).status_code
            == 201
        )
        comment = control.post(
            f"/repos/erin/tools/issues/{number}/comments", json={"author": "erin", "body": "hi"}
        )
        assert (
            control.patch(
                f"/repos/erin/tools/comments/{comment.json()['id']}", json={"body": "hi!"}
            ).status_code
            == 200
        )
        assert (
            control.patch(f"/repos/erin/tools/pulls/{number}", json={"title": "Fix it"}).json()[
                "title"
            ]
            == "Fix it"
        )
        assert (
            control.post(f"/repos/erin/tools/pulls/{number}/draft", json={}).json()["draft"] is True
        )
        # GitHub merges no draft (405): ready for review first.
        assert control.post(f"/repos/erin/tools/pulls/{number}/ready", json={}).status_code == 200
        merged = control.post(f"/repos/erin/tools/pulls/{number}/merge", json={"sender": "erin"})
        assert merged.status_code == 200 and len(merged.json()["merge_commit_sha"]) == 40
        comments = control.get(f"/repos/erin/tools/issues/{number}/comments").json()
        assert [c["body"] for c in comments] == ["hi!"]
        assert control.post("/webhook/wait").status_code == 200
        sent = control.get("/deliveries").json()
    kinds = [(d["event"], d["action"]) for d in sent if d["repo"] == "erin/tools"]
    assert ("pull_request", "synchronize") in kinds and ("issue_comment", "edited") in kinds
    assert kinds[-1] == ("pull_request", "closed")
    assert all(d["status_code"] == 202 for d in sent if d["repo"] == "erin/tools")
    for got in receiver.received:
        github_contract.validate_delivery(
            got.headers["X-GitHub-Event"], httpx.Response(200, content=got.body).json()
        )
    assert head != merged.json()["merge_commit_sha"]


def test_faults_can_be_injected_over_http(standin: StandinWorld) -> None:
    control = httpx.Client(base_url=f"{standin.url}/_standin", timeout=30)
    answer = control.post(
        "/faults", json={"kind": "too_many_requests", "path": "/rate_limit$", "retry_after": 9}
    )
    assert answer.status_code == 201 and answer.json()["count"] == 1
    api = httpx.Client(
        base_url=standin.url, headers={"Authorization": f"token {standin.bob_token}"}
    )
    limited = api.get("/rate_limit")
    assert (limited.status_code, limited.headers["Retry-After"]) == (429, "9")
    assert api.get("/rate_limit").status_code == 200
    control.post("/faults", json={"kind": "server_error", "status": 502, "count": 5})
    assert control.delete("/faults").status_code == 200
    assert api.get("/rate_limit").status_code == 200
    requests = control.get("/requests").json()
    assert [r["status"] for r in requests if r["path"] == "/rate_limit"] == [429, 200, 200]


def test_bad_control_requests_say_what_is_wrong(standin: StandinWorld) -> None:
    control = httpx.Client(base_url=f"{standin.url}/_standin", timeout=30)
    missing = control.post("/repos/NVIDIA/Megatron-LM/pulls", json={"author": "alice"})
    assert (
        missing.status_code == 400 and "missing field(s): head, title" in missing.json()["message"]
    )
    unknown = control.post(
        "/repos/NVIDIA/nothing/pulls", json={"author": "a", "head": "h", "title": "t"}
    )
    assert (
        unknown.status_code == 400 and "no repository NVIDIA/nothing" in unknown.json()["message"]
    )
    action = control.post("/repos/NVIDIA/Megatron-LM/pulls/1/explode", json={})
    assert action.status_code == 400 and "unknown action" in action.json()["message"]
    fault = control.post("/faults", json={"kind": "server_error", "colour": "red"})
    assert fault.status_code == 400 and "colour" in fault.json()["message"]
    kind = control.post("/faults", json={"kind": "meteor"})
    assert kind.status_code == 400 and "unknown fault kind 'meteor'" in kind.json()["message"]
    regex = control.post("/faults", json={"kind": "server_error", "path": "("})
    assert regex.status_code == 400 and "not a regular expression" in regex.json()["message"]
