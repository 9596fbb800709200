"""No server path leaves the machine (issue 29, point 3): after a pipeline run in which a job
errors with a path of the runner cache in its message, a probe walks every page and every API
route of the app's route table (each path parameter filled with every value the database has)
and every comment, check run and commit status the GitHub stand-in recorded, and finds no path
of the data directory; it finds the placeholders and the repository's own paths instead.

On SQLite (embedded worker) and on PostgreSQL (two worker processes)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from textwrap import dedent
from typing import Any

import httpx
import pytest
from sqlmodel import Session, select

from stackbot.db.models import IntegrationRun, Job
from stackbot.web.app import create_app
from stackbot.web.joblogs import read_log
from tests.e2e.harness import REPO, World, running_world

pytestmark = pytest.mark.torchrun

# "absent" names a file no tree has: its jobs end in error, "none of the targets exist in
# <runner cache>/trees/<sha>".
TEST_SETS = dedent("""
    schema_version = "1.0"

    [test_sets.quick]
    shapes = ["1x2"]
    timeout_s = 300
    megatron_targets = ["tests/test_quick.py"]

    [test_sets.absent]
    shapes = ["1x2"]
    timeout_s = 300
    megatron_targets = ["tests/unit_tests/test_not_there.py"]
""")


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    workdir = tmp_path_factory.mktemp("paths")
    (workdir / "probe-testsets.toml").write_text(TEST_SETS)
    with running_world(
        workdir,
        request.param,
        test_sets_file=workdir / "probe-testsets.toml",
        default_test_sets=["quick", "absent"],
    ) as running:
        running.control.open_pull(
            REPO,
            author="alice",
            head="feature",
            title="Add a feature",
            body="Part of #100.",
            number=11,
            files={"pkg/feature.py": "def feature():\n    return 'on'\n"},
        )
        running.settle()
        yield running


def _server_paths(world: World) -> re.Pattern[str]:
    data = world.settings.data_dir
    forms = {str(data), str(data.resolve())}
    return re.compile("|".join(re.escape(form) for form in sorted(forms, key=len, reverse=True)))


def _get_routes(world: World) -> list[str]:
    """Every GET route of the app, as its route table has it."""
    app = create_app(world.settings, engine=world.engine)
    found: list[str] = []

    def walk(routes: list[Any], prefix: str) -> None:
        for route in routes:
            if hasattr(route, "original_router"):
                walk(route.original_router.routes, prefix + route.include_context.prefix)
            elif "GET" in (getattr(route, "methods", None) or ()):
                found.append(prefix + route.path)

    walk(list(app.routes), "")
    return found


def _addresses(world: World, client: httpx.Client) -> list[str]:
    with Session(world.engine) as session:
        values: dict[str, list[str]] = {
            "job_id": [str(j.id) for j in session.exec(select(Job))],
            "run_id": [str(r.id) for r in session.exec(select(IntegrationRun))],
            "number": [str(n) for n in world.pull_numbers()],
        }
    values["slug"] = [row["slug"] for row in client.get("/api/series").json()]
    addresses: list[str] = []
    for route in _get_routes(world):
        names = re.findall(r"\{(\w+)\}", route)
        if not names:
            addresses.append(route)
            continue
        assert len(names) == 1 and values[names[0]], (route, values)
        addresses += [route.replace("{" + names[0] + "}", v) for v in values[names[0]]]
    return addresses


def test_a_job_error_names_a_server_path_where_it_is_recorded(world: World) -> None:
    """The premise: the path is there to leak (the job's message and its runner log)."""
    errors = [j for j in world.jobs() if j.status == "error"]
    assert errors, [(j.id, j.status) for j in world.jobs()]
    leaking = _server_paths(world)
    assert any(leaking.search(str(j.result)) for j in errors), errors[0].result
    assert all(leaking.search(read_log(j.out_dir)) for j in world.jobs())


def test_no_page_or_api_answer_shows_a_server_path(world: World) -> None:
    leaking = _server_paths(world)
    shown: list[str] = []
    job_texts: list[str] = []
    with httpx.Client(base_url=world.stack.url, timeout=30) as client:
        addresses = _addresses(world, client)
        assert any(a.startswith("/jobs/") for a in addresses)
        assert any(a.startswith("/api/jobs/") for a in addresses)
        for address in addresses:
            for accept in ("text/html", "application/json"):
                answer = client.get(address, headers={"Accept": accept})
                assert answer.status_code == 200, (address, answer.status_code, answer.text[:300])
                found = leaking.search(answer.text)
                if found:
                    shown.append(f"{address}: …{answer.text[max(0, found.start() - 60) :][:200]}")
                if address.startswith(("/jobs/", "/api/jobs/")):
                    job_texts.append(answer.text)
    assert not shown, "\n".join(shown)
    # The runner's log is still shown, with placeholders where the paths were.
    assert any("&lt;runner-cache&gt;/trees/" in text for text in job_texts)
    assert any("<data>/jobs/job-" in text for text in job_texts)


def test_nothing_posted_on_github_shows_a_server_path(world: World) -> None:
    leaking = _server_paths(world)
    c = world.control
    texts: list[tuple[str, str]] = []
    for number in world.pull_numbers():
        texts += [(f"comment on #{number}", m.body) for m in c.comments(REPO, number)]
    for run in c.check_runs(REPO):
        for part in (run.title, run.summary, run.text, run.details_url):
            texts.append((f"check run {run.name}", part or ""))
    texts += [(f"status {s.context}", s.description or "") for s in c.statuses(REPO)]
    assert any("none of the targets exist" in text for _, text in texts), texts
    shown = [f"{where}: {text[:400]}" for where, text in texts if leaking.search(text)]
    assert not shown, "\n".join(shown)
    # What stands in their place reads as what it is.
    assert any("<runner-cache>/trees/" in text for _, text in texts), texts
