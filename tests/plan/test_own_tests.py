"""A PR's own test files (issue 13): the ``[own_tests]`` table, finding them with git, the jobs
they make beside the configured test sets (and main's baseline), and the comment's section that
compares them with main file by file."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlmodel import Session

from gpu_jobs.result import Counts, TestResult
from gpu_jobs.spec import JobResult
from gpu_jobs.testsets import (
    BUILTIN_TEST_SETS,
    OwnTests,
    TestSetError,
    glob_match,
    load_own_tests,
    load_test_sets,
    parse_own_tests,
    parse_test_sets,
)
from stackbot.adapters.git import GitRepository
from stackbot.config import Settings
from stackbot.db import integration_store, jobs_store
from stackbot.db.engine import session_scope
from stackbot.db.models import IntegrationRun, IntegrationStep, Job, Repository
from stackbot.domain.comparison import Counts as DCounts
from stackbot.domain.comparison import TestOutcomes
from stackbot.domain.own_tests import (
    FileCounts,
    OwnFileView,
    OwnTestsView,
    counts_by_file,
    render_own_tests,
    restrict_outcomes,
)
from stackbot.domain.pipeline import PrState
from stackbot.domain.report import render_sticky_comment
from stackbot.domain.report_view import ApprovalView, PrRef, PrReportView
from stackbot.domain.types import PrNumber
from stackbot.services import integrate, job_execution
from stackbot.services import jobs as job_service
from stackbot.services import own_tests as own_service

HEADER = 'schema_version = "1.0"\n[test_sets.a]\nshapes = ["1x4"]\nmegatron_targets = ["t.py"]\n'


def _own(body: str) -> OwnTests | None:
    return parse_own_tests(HEADER + body, Path("own.toml"))


# -- the [own_tests] table --------------------------------------------------------------------


def test_a_file_runs_on_the_ranks_its_tests_need_never_fewer() -> None:
    """Megatron's unit tests are written for 8 ranks (issue 24 point 6): an own test file under
    them runs at 2x4 where nodes have 4 GPUs, 1x8 where they have 8, never at 1x4, and its job
    knows the convention (a target short of ranks is not judged)."""
    body = '[own_tests]\ndefault_shapes = ["1x4"]\nmin_world_size = { "tests/unit_tests" = 8 }\n'
    own = _own(body)
    assert own is not None
    grid = "tests/unit_tests/test_hyper_comm_grid.py"
    assert [str(s) for s in own.shapes_for(grid)] == ["2x4"]
    test_set = own.test_set((grid,), "2x4")
    assert test_set.min_world_size == {"tests/unit_tests": 8}
    spec = test_set.job_spec(job_id="j", shape="2x4", checkout="/tree")
    assert spec.needed_world_size(grid + "::t") is None  # enough ranks: judged
    short = own.test_set((grid,), "1x4").job_spec(job_id="j", shape="1x4", checkout="/t")
    assert short.needed_world_size(grid + "::t") == ("tests/unit_tests", 8)  # else: not judged
    eight = _own(body.replace('["1x4"]', '["1x8"]'))
    assert eight is not None and [str(s) for s in eight.shapes_for(grid)] == ["1x8"]
    both = _own(
        body + 'rules = [{ glob = "tests/unit_tests/dist/*.py", shapes = ["1x4", "2x4"] }]\n'
    )
    assert both is not None
    assert [str(s) for s in both.shapes_for("tests/unit_tests/dist/test_x.py")] == ["2x4"]
    few = _own(body.replace('"tests/unit_tests" = 8', '"tests/unit_tests/small" = 2'))
    assert few is not None and [str(s) for s in few.shapes_for(grid)] == ["1x4"]
    with pytest.raises(TestSetError, match="min_world_size"):
        _own(body.replace("= 8", "= 0"))


def test_the_table_is_read_with_rules_first_match_wins() -> None:
    own = _own(
        "[own_tests]\n"
        'roots = ["tests/unit_tests", "tests/functional/"]\n'
        'default_shapes = ["1x2"]\n'
        "rules = [\n"
        '  { glob = "tests/unit_tests/**/test_*_2x4*.py", shapes = ["2x4"] },\n'
        '  { glob = "tests/unit_tests/dist/*.py", shapes = ["1x4", "2x4"] },\n'
        "]\n"
        "timeout_s = 90\n"
        'env = { A = "1" }\n'
        'markers = "not internal"\n'
    )
    assert own is not None
    assert own.roots == ("tests/unit_tests", "tests/functional")
    assert [str(s) for s in own.shapes_for("tests/unit_tests/dist/test_x_2x4.py")] == ["2x4"]
    assert [str(s) for s in own.shapes_for("tests/unit_tests/dist/test_y.py")] == ["1x4", "2x4"]
    assert [str(s) for s in own.shapes_for("tests/unit_tests/a/b/test_y.py")] == ["1x2"]
    test_set = own.test_set(("tests/unit_tests/a/test_y.py",), "1x2")
    assert test_set.name == "own" and test_set.megatron_targets == ("tests/unit_tests/a/test_y.py",)
    assert (test_set.timeout_s, test_set.env, test_set.markers) == (
        90.0,
        {"A": "1"},
        "not internal",
    )
    # The test sets of the same file still load: [own_tests] is not an unknown field there.
    assert set(parse_test_sets(HEADER + "[own_tests]\n", Path("own.toml"))) == {"a"}


@pytest.mark.parametrize("name", ["own", "own:8035"])
def test_the_own_files_names_are_reserved(name: str) -> None:
    text = f'schema_version = "1.0"\n[test_sets."{name}"]\nshapes = ["1x4"]\nmegatron_targets = ["t.py"]\n'
    with pytest.raises(TestSetError, match="reserved for PRs' own test files"):
        parse_test_sets(text, Path("x.toml"))


def test_a_prs_part_of_a_batched_result_is_its_files_tests() -> None:
    tests = {"a.py::t1": "passed", "a.py::T::t2[1]": "passed", "b.py::t": "failed"}
    whole = TestOutcomes("failed", DCounts(passed=2, failed=1), tests)
    mine = restrict_outcomes(whole, ["a.py"])
    assert (mine.status, mine.counts, set(mine.tests)) == (
        "passed",
        DCounts(passed=2),
        {"a.py::t1", "a.py::T::t2[1]"},
    )
    theirs = restrict_outcomes(whole, ["b.py", "c.py"])
    assert (theirs.status, theirs.counts) == ("failed", DCounts(failed=1))
    # The whole job's trouble is every PR's; counts alone cannot be split.
    timed_out = TestOutcomes("timeout", DCounts(passed=2, failed=1), tests)
    assert restrict_outcomes(timed_out, ["a.py"]).status == "timeout"
    counted = TestOutcomes("failed", DCounts(passed=2, failed=1), {}, per_test=False)
    assert restrict_outcomes(counted, ["a.py"]) is counted


def test_a_failing_own_test_is_named_as_its_files_prs() -> None:
    from stackbot.domain.report_view import FindingView
    from stackbot.services.report_findings import _owned

    owners = {CTX: (8035,), AMAX: (8034, 8035)}
    assert _owned(FindingView("own", "1x4", f"{CTX}::t", "new", 8035), owners).test_set == (
        "own:8035"
    )
    # a file two PRs changed: the PR the failure was attributed to, else the first owner
    assert _owned(FindingView("own", "1x4", f"{AMAX}::t", "new", 8035), owners).test_set == (
        "own:8035"
    )
    assert _owned(FindingView("own", "1x4", f"{AMAX}::t", "flaky"), owners).test_set == "own:8034"
    other = FindingView("amax-group", "1x4", f"{CTX}::t", "new", 8035)
    assert _owned(other, owners) == other


def test_without_the_table_own_tests_are_not_run() -> None:
    assert _own("") is None


def test_the_builtin_file_runs_megatrons_unit_tests_on_8_ranks() -> None:
    """Megatron-LM writes its unit tests for 8 ranks (issue 24 point 6): the built-in file runs
    every own test file at 2x4 and says they need 8 ranks, so a deployment that lists smaller
    shapes still runs them on 8 (and a job short of ranks reports them not judged)."""
    own = load_own_tests()
    assert own is not None and own.roots == ("tests/unit_tests",)
    assert [str(s) for s in own.default_shapes] == ["2x4"]
    assert own.min_world_size == {"tests/unit_tests": 8}
    for path in ("tests/unit_tests/x/test_y.py", "tests/unit_tests/test_hyper_comm_grid.py"):
        assert [str(s) for s in own.shapes_for(path)] == ["2x4"]
        assert own.ranks_needed(path) == 8
    # Its job carries the convention: on 4 ranks a test of such a file is not judged.
    grid = "tests/unit_tests/test_hyper_comm_grid.py"
    short = own.test_set((grid,), "1x4").job_spec(job_id="j", shape="1x4", checkout="/t")
    assert short.needed_world_size(f"{grid}::test_x") == ("tests/unit_tests", 8)
    full = own.test_set((grid,), "2x4").job_spec(job_id="j", shape="2x4", checkout="/t")
    assert full.needed_world_size(f"{grid}::test_x") is None
    assert set(load_test_sets(BUILTIN_TEST_SETS)) == {"amax-group", "blockwise-recipe"}


@pytest.mark.parametrize(
    ("body", "field", "problem"),
    [
        ("[own_tests]\nrootz = []\n", "own_tests.rootz", "not a known own_tests field"),
        ('[own_tests]\nroots = ["/abs"]\n', "own_tests.roots[0]", "not a relative directory"),
        ('[own_tests]\nroots = ["a/../b"]\n', "own_tests.roots[0]", "not a relative directory"),
        ("[own_tests]\nroots = []\n", "own_tests.roots", "at least one directory"),
        ("[own_tests]\ndefault_shapes = []\n", "own_tests.default_shapes", "at least one shape"),
        (
            '[own_tests]\ndefault_shapes = ["1x4", "four"]\n',
            "own_tests.default_shapes[1]",
            "is not NODESxGPUS_PER_NODE",
        ),
        (
            '[own_tests]\nrules = [{ glob = "x", shapes = ["1x4", "9x"] }]\n',
            "own_tests.rules[0].shapes[1]",
            "is not NODESxGPUS_PER_NODE",
        ),
        ('[own_tests]\nrules = [{ shapes = ["1x4"] }]\n', "own_tests.rules[0].glob", "required"),
        (
            '[own_tests]\nrules = [{ glob = "x", shapes = ["1x4"], shape = "1x4" }]\n',
            "own_tests.rules[0].shape",
            "not a known field",
        ),
        ('[own_tests]\nrules = { glob = "x" }\n', "own_tests.rules", "expected a list"),
        ("[own_tests]\ntimeout_s = 0\n", "own_tests.timeout_s", "must be positive"),
        ("[[own_tests]]\nroots = []\n", "own_tests", "expected a JSON object"),
    ],
)
def test_errors_name_the_file_and_the_field(body: str, field: str, problem: str) -> None:
    with pytest.raises(TestSetError) as caught:
        _own(body)
    assert caught.value.field == field
    assert problem in caught.value.problem
    assert str(caught.value).startswith(f"own.toml: {field}: ")


def test_globs_keep_stars_within_a_directory() -> None:
    assert glob_match("tests/**/test_*.py", "tests/test_a.py")
    assert glob_match("tests/**/test_*.py", "tests/a/b/test_a.py")
    assert not glob_match("tests/*/test_*.py", "tests/a/b/test_a.py")
    assert not glob_match("tests/**/test_*.py", "tests/a/test_a.pyc")
    assert glob_match("tests/unit_tests/test_?.py", "tests/unit_tests/test_x.py")


# -- own test files, found with git -----------------------------------------------------------


def _git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "PATH": "/usr/bin:/bin:/usr/local/bin",
        "HOME": str(repo),
    }
    done = subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    )
    return done.stdout.strip()


def _commit(repo: Path, files: dict[str, str | None], message: str) -> str:
    for path, text in files.items():
        target = repo / path
        if text is None:
            _git(repo, "rm", "-q", path)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        _git(repo, "add", path)
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def series_repo(tmp_path: Path) -> tuple[GitRepository, dict[str, str]]:
    """main; #1 branched from it (adds, modifies, deletes, touches files outside the roots);
    main moves on; #2 stacked on #1."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    base = _commit(
        repo,
        {
            "megatron/core/x.py": "x = 1\n",
            "tests/unit_tests/test_kept.py": "def test_a(): pass\n",
            "tests/unit_tests/test_gone.py": "def test_b(): pass\n",
            "tests/unit_tests/test_untouched.py": "def test_c(): pass\n",
        },
        "main",
    )
    _git(repo, "checkout", "-q", "-b", "pr1")
    pr1 = _commit(
        repo,
        {
            "megatron/core/x.py": "x = 2\n",
            "tests/unit_tests/test_kept.py": "def test_a(): pass\ndef test_a2(): pass\n",
            "tests/unit_tests/test_gone.py": None,
            "tests/unit_tests/sub/test_new.py": "def test_n(): pass\n",
            "tests/unit_tests/sub/helpers.py": "H = 1\n",
            "tests/functional/test_elsewhere.py": "def test_f(): pass\n",
        },
        "pr1",
    )
    _git(repo, "checkout", "-q", "-b", "pr2")
    pr2 = _commit(
        repo,
        {
            "tests/unit_tests/sub/test_new.py": "def test_n(): pass\ndef test_n2(): pass\n",
            "tests/unit_tests/test_two.py": "def test_t(): pass\n",
        },
        "pr2",
    )
    _git(repo, "checkout", "-q", "main")
    main = _commit(repo, {"tests/unit_tests/test_main_only.py": "def test_m(): pass\n"}, "more")
    return GitRepository.open(repo), {"base": base, "pr1": pr1, "pr2": pr2, "main": main}


OWN = OwnTests(roots=("tests/unit_tests",))


def test_own_files_are_what_the_pr_adds_or_modifies_under_the_roots(
    series_repo: tuple[GitRepository, dict[str, str]],
) -> None:
    repo, shas = series_repo
    # #1 against main (which moved on since #1 branched: main's new file is not #1's).
    files = own_service.own_test_files(
        repo, OWN, head=shas["pr1"], bases=[shas["main"]], main_sha=shas["main"]
    )
    assert [f.to_json() for f in files] == [
        {"path": "tests/unit_tests/sub/test_new.py", "status": "added", "on_main": False},
        {"path": "tests/unit_tests/test_kept.py", "status": "modified", "on_main": True},
    ]
    # #2 against its parent #1: #1's files are not #2's; a file #1 added is modified by #2.
    files = own_service.own_test_files(
        repo, OWN, head=shas["pr2"], bases=[shas["pr1"]], main_sha=shas["main"]
    )
    assert [f.to_json() for f in files] == [
        {"path": "tests/unit_tests/sub/test_new.py", "status": "modified", "on_main": False},
        {"path": "tests/unit_tests/test_two.py", "status": "added", "on_main": False},
    ]
    # Another root.
    other = OwnTests(roots=("tests/functional",))
    files = own_service.own_test_files(
        repo, other, head=shas["pr1"], bases=[shas["main"]], main_sha=shas["main"]
    )
    assert [f.path for f in files] == ["tests/functional/test_elsewhere.py"]


def test_own_files_are_stored_on_the_merged_steps(
    engine: Engine, series_repo: tuple[GitRepository, dict[str, str]]
) -> None:
    repo, shas = series_repo
    with session_scope(engine) as session:
        run = _run(session, "series", [(1, shas["pr1"]), (2, shas["pr2"])], base=shas["main"])
        own_service.record_own_test_files(
            session, repo, OWN, run, depends_on={PrNumber(2): (PrNumber(1),)}
        )
        assert run.id is not None
        steps = integration_store.steps_of(session, run_id=run.id)
        stored = {s.pr_number: [f["path"] for f in s.own_test_files] for s in steps}
    assert stored == {
        1: ["tests/unit_tests/sub/test_new.py", "tests/unit_tests/test_kept.py"],
        2: ["tests/unit_tests/sub/test_new.py", "tests/unit_tests/test_two.py"],
    }


# -- the jobs they make -----------------------------------------------------------------------

MAIN_SHA = "b" * 40


def _run(
    session: Session,
    kind: str,
    prs: list[tuple[int, str]],
    *,
    base: str = MAIN_SHA,
    own: dict[int, list[dict[str, object]]] | None = None,
    tree: str = "t" * 40,
) -> IntegrationRun:
    repo = session.get(Repository, 1)
    if repo is None:
        repo = Repository(full_name="NVIDIA/Megatron-LM", clone_url="sim://megatron")
        session.add(repo)
        session.flush()
    assert repo.id is not None
    run = IntegrationRun(
        repo_id=repo.id,
        kind=kind,
        name="series-6307" if kind == "series" else f"pr-{prs[-1][0]}",
        series_key="#6307",
        target_pr=prs[-1][0] if kind == "stack" else None,
        base_ref="main",
        base_sha=base,
        status="clean",
        heads={str(n): head for n, head in prs},
        final_tree=tree,
        final_commit="c" * 40,
    )
    session.add(run)
    session.flush()
    assert run.id is not None
    for position, (n, head) in enumerate(prs, 1):
        session.add(
            IntegrationStep(
                run_id=run.id,
                position=position,
                pr_number=n,
                head_sha=head,
                outcome="clean",
                tree=tree,
                commit="c" * 40,
                own_test_files=(own or {}).get(n, []),
            )
        )
    session.flush()
    return run


RULED = OwnTests(
    roots=("tests/unit_tests",),
    rules=(
        # files named *_2x4 run on both shapes
        *parse_own_tests(
            HEADER
            + '[own_tests]\nrules = [{ glob = "**/test_*_2x4.py", shapes = ["1x4", "2x4"] }]\n',
            Path("x.toml"),
        ).rules,  # type: ignore[union-attr]
    ),
)
FILES = {
    8034: [{"path": "tests/unit_tests/test_amax_2x4.py", "status": "added", "on_main": False}],
    8035: [
        {"path": "tests/unit_tests/test_ctx.py", "status": "modified", "on_main": True},
        {"path": "tests/unit_tests/test_new.py", "status": "added", "on_main": False},
    ],
}


def _create(engine: Engine, settings: Settings, run_id: int) -> dict[int, str]:
    states = {n: PrState(PrNumber(n), f"h{n}", True, frozenset({f"h{n}"})) for n in FILES}
    untested = integrate.test_runs(engine, settings, [run_id], [], states, own=RULED)
    with session_scope(engine) as session:
        job_service.create_baseline_jobs(
            session,
            repo_id=1,
            base_ref="main",
            base_sha=MAIN_SHA,
            base_tree="m" * 40,
            requests=integrate._own_baselines(session, RULED, [run_id]),
        )
    return untested


def _jobs(engine: Engine) -> list[Job]:
    with Session(engine) as session:
        jobs = list(jobs_store.jobs_by_ids(session, job_ids=range(1, 100)))
        session.expunge_all()
    return jobs


AMAX, CTX, NEW = (
    "tests/unit_tests/test_amax_2x4.py",
    "tests/unit_tests/test_ctx.py",
    "tests/unit_tests/test_new.py",
)


def test_a_trees_own_files_run_in_one_job_per_shape_and_main_a_baseline_of_those_it_has(
    engine: Engine, settings: Settings
) -> None:
    """Issue 24 point 6: the own files of every PR in the tree, batched: one job per shape
    (not one per PR and shape), its targets every file that runs on that shape."""
    with session_scope(engine) as session:
        run = _run(session, "series", [(8034, "h8034"), (8035, "h8035")], own=FILES)
        run_id = run.id
    assert run_id is not None
    assert _create(engine, settings, run_id) == {}
    made = sorted(
        (j.kind, j.test_set, j.shape, tuple(j.targets or ()), j.reused_from_job_id)
        for j in _jobs(engine)
    )
    assert made == [
        # 8034's new file has nothing on main to compare with: only test_ctx.py on main.
        ("baseline", "own", "1x4", (CTX,), None),
        ("integration", "own", "1x4", (AMAX, CTX, NEW), None),
        ("integration", "own", "2x4", (AMAX,), None),
    ]
    # Planning again makes nothing new.
    assert _create(engine, settings, run_id) == {}
    assert len(_jobs(engine)) == 3

    # Another run with the same tree (a later integration of the same heads) reuses the jobs;
    # main's baseline is made once per commit and configuration.
    with session_scope(engine) as session:
        again = _run(session, "series", [(8034, "h8034"), (8035, "h8035")], own=FILES)
        again_id = again.id
    assert again_id is not None
    _create(engine, settings, again_id)
    copies = [j for j in _jobs(engine) if j.integration_run_id == again_id]
    assert len(copies) == 2 and all(j.reused_from_job_id is not None for j in copies)
    assert len([j for j in _jobs(engine) if j.kind == "baseline"]) == 1


def test_a_stack_run_tests_its_ancestors_own_files_too(engine: Engine, settings: Settings) -> None:
    """A stack's tree holds its ancestors' new test files, and the child can break them; under
    every-stack nothing else would run them on the child's tree."""
    with session_scope(engine) as session:
        run = _run(session, "stack", [(8034, "h8034"), (8035, "h8035")], own=FILES)
        run_id = run.id
    assert run_id is not None
    settings = settings.model_copy(update={"test_plan_policy": "every-stack"})
    _create(engine, settings, run_id)
    made = sorted(
        (j.test_set, j.shape, tuple(j.targets or ())) for j in _jobs(engine) if j.kind != "baseline"
    )
    assert made == [("own", "1x4", (AMAX, CTX, NEW)), ("own", "2x4", (AMAX,))]


def test_a_job_that_ran_more_files_on_the_same_tree_is_reused_for_fewer(
    engine: Engine, settings: Settings
) -> None:
    """When a parent lands its files are main's: the children's tree is the one tested, their
    own files a part of the job that ran; it is taken, not run again. A job of another
    definition (here: another env) is not."""
    with session_scope(engine) as session:
        run = _run(session, "series", [(8034, "h8034"), (8035, "h8035")], own=FILES)
        run_id = run.id
    assert run_id is not None
    _create(engine, settings, run_id)
    ran = {j.shape: j for j in _jobs(engine) if j.kind == "integration"}
    with session_scope(engine) as session:  # #8034 landed: #8035 alone on the same tree
        after = _run(session, "series", [(8035, "h8035")], own={8035: FILES[8035]})
        after_id = after.id
    assert after_id is not None
    _create(engine, settings, after_id)
    [carried] = [j for j in _jobs(engine) if j.integration_run_id == after_id]
    assert (carried.shape, carried.targets) == ("1x4", [CTX, NEW])
    assert carried.reused_from_job_id == ran["1x4"].id
    # Another definition of the own files' jobs: that result does not hold.
    other = dataclasses.replace(RULED, env={"NCCL_DEBUG": "INFO"})
    with session_scope(engine) as session:
        third = _run(session, "series", [(8035, "h8035")], own={8035: FILES[8035]})
        assert third.id is not None
        steps = integration_store.steps_of(session, run_id=third.id)
        requests = own_service.run_requests(other, third, steps)
        [made] = job_service.create_run_jobs(session, third, requests)
        assert made.reused_from_job_id is None and made.targets == [CTX, NEW]


def test_the_job_runs_the_prs_files(engine: Engine, settings: Settings) -> None:
    with session_scope(engine) as session:
        run = _run(session, "series", [(8035, "h8035")], own=FILES)
        assert run.id is not None
        run_id = run.id
    _create(engine, settings, run_id)
    [job] = [j for j in _jobs(engine) if j.kind == "integration"]
    backend = job_execution.JobBackend(
        executor=None,  # type: ignore[arg-type]
        test_sets={},
        jobs_dir=Path("."),
        node_check=False,
        own_tests=RULED,
    )
    test_set = backend.test_set_of(job)
    assert test_set is not None
    spec = test_set.job_spec(job_id="j", shape=job.shape, repo_url="file:///r", commit="c" * 40)
    assert spec.targets == ("tests/unit_tests/test_ctx.py", "tests/unit_tests/test_new.py")
    assert spec.test_set == "own" and str(spec.shape) == "1x4"
    # The files run one after another: the job's limit is timeout_s per file.
    assert job_execution.own_timeout(job, test_set) == 2 * RULED.timeout_s
    # Without [own_tests] any more, the job cannot run (it fails with a message, not a crash).
    assert job_execution.JobBackend(None, {}, Path("."), False).test_set_of(job) is None  # type: ignore[arg-type]


# -- per-file comparison and the comment ------------------------------------------------------


def _result(job_id: int, tests: dict[str, str]) -> JobResult:
    status = "failed" if "failed" in tests.values() else "passed"
    return JobResult(
        f"stackbot-job-{job_id}",
        status,  # type: ignore[arg-type]
        counts=Counts(
            passed=sum(o == "passed" for o in tests.values()),
            failed=sum(o == "failed" for o in tests.values()),
        ),
        tests=tuple(TestResult(n, o, 0.1, {0: o}) for n, o in tests.items()),  # type: ignore[arg-type]
    )


def test_the_comment_compares_each_file_with_main(engine: Engine, settings: Settings) -> None:
    with session_scope(engine) as session:
        run = _run(session, "series", [(8034, "h8034"), (8035, "h8035")], own=FILES)
        assert run.id is not None
        run_id = run.id
    _create(engine, settings, run_id)
    jobs = {(j.kind, j.test_set, j.shape): j for j in _jobs(engine)}
    ctx, new = "tests/unit_tests/test_ctx.py", "tests/unit_tests/test_new.py"
    here = {f"{ctx}::test_{i}": "passed" for i in range(14)}
    here[f"{ctx}::test_broken"] = "failed"
    here.update({f"{new}::test_{i}": "passed" for i in range(3)})
    here[f"{AMAX}::test_x"] = "failed"  # #8034's file, in the same batched job
    main = {f"{ctx}::test_{i}": "passed" for i in range(5)}
    tree_job = jobs[("integration", "own", "1x4")]
    assert tree_job.id is not None
    job_execution.record_result(engine, tree_job.id, _result(tree_job.id, here), node="n1")

    def view(number: int) -> OwnTestsView | None:
        with Session(engine) as session:
            series = integration_store.get_run(session, run_id=run_id)
            views = own_service.own_tests_views(
                session, number, [(None, "the stack"), (series, "the series #6307 integration")]
            )
        assert len(views) <= 1
        return views[0] if views else None

    # main's baseline still runs
    own = view(8035)
    assert own is not None
    assert [f.line() for f in own.files] == [
        f"`{ctx}` (1x4): 14 passed, 1 failed (failing: `test_broken`) vs main: not run yet",
        f"`{new}` (1x4): new file: 3 passed",
    ]
    baseline = jobs[("baseline", "own", "1x4")]
    assert baseline.id is not None
    job_execution.record_result(engine, baseline.id, _result(baseline.id, main), node="n2")
    own = view(8035)
    assert own is not None
    text = render_own_tests(own)
    assert text.splitlines() == [
        "**Own test files** of #8035 on the series #6307 integration `ccccccc`, "
        "compared with main `bbbbbbb`",
        f"- `{ctx}` (1x4): 14 passed, 1 failed (failing: `test_broken`) vs 5 on main",
        f"- `{new}` (1x4): new file: 3 passed",
    ]
    # #8034's file: its part of the 1x4 job; the 2x4 job has not run.
    own_8034 = view(8034)
    assert own_8034 is not None
    assert [f.line() for f in own_8034.files] == [
        f"`{AMAX}` (1x4): new file: 0 passed, 1 failed (failing: `test_x`)",
        f"`{AMAX}` (2x4): queued",
    ]
    # The sticky comment carries the section.
    comment = render_sticky_comment(
        PrReportView(
            repo="NVIDIA/Megatron-LM",
            pr=PrRef(8035, "t"),
            head_sha="h" * 40,
            approval=ApprovalView("trusted", by="x"),
            own_tests=(own,),
        )
    )
    assert f"- `{ctx}` (1x4): 14 passed, 1 failed (failing: `test_broken`) vs 5 on main" in comment
    # A PR without own test files shows no section.
    assert view(8036) is None and render_own_tests(None) == ""


def test_file_counts() -> None:
    counts = counts_by_file(
        {
            "tests/a.py::test_1": "passed",
            "tests/a.py::T::test_2[x]": "error",
            "tests/a.py::test_3": "skipped",
            "tests/b.py::test_1": "passed",
            "tests/other.py::test_1": "failed",
        },
        ["tests/a.py", "tests/b.py", "tests/c.py"],
    )
    assert counts["tests/a.py"] == FileCounts(1, 1, 1, 0, ("T::test_2[x]",))
    assert counts["tests/b.py"].describe() == "1 passed"
    assert counts["tests/c.py"].total == 0
    line = OwnFileView("tests/c.py", "added", "1x4", "error", counts["tests/c.py"], error="boom")
    assert line.line() == "`tests/c.py` (1x4): no tests collected (error: boom)"
    main = FileCounts(4, 1)
    line = OwnFileView("tests/b.py", "modified", "2x4", "passed", counts["tests/b.py"], True, main)
    assert line.line() == "`tests/b.py` (2x4): 1 passed vs 4 passed, 1 failed on main"


def test_a_retest_of_all_sets_reruns_the_prs_own_files_too(
    engine: Engine, settings: Settings
) -> None:
    from stackbot.db.models import PullRequest
    from stackbot.domain.tasks import Retest
    from stackbot.services.resources import WorkerResources
    from stackbot.services.retest import handle_retest

    with session_scope(engine) as session:
        run = _run(session, "stack", [(8034, "h8034"), (8035, "h8035")], own=FILES)
        session.add(PullRequest(repo_id=run.repo_id, number=8035, head_sha="h8035"))

    class Ctx:  # what handle_retest reads of a TaskContext
        def __init__(self) -> None:
            self.engine, self.settings = engine, settings
            self.services = WorkerResources(settings)
            self.enqueued: list[object] = []

        def enqueue_task(self, task: object) -> None:
            self.enqueued.append(task)

    handle_retest(Ctx(), Retest("NVIDIA/Megatron-LM", 8035, test_set="amax-group"))  # type: ignore[arg-type]
    assert {j.test_set for j in _jobs(engine)} == {"amax-group"}
    # Re-running the check run of the PR's own files (external id run/SET/SHAPE): the stack
    # tree's batched own-files job runs again (its ancestor #8034's file among them), at 2x4:
    # the built-in file runs Megatron's unit tests on the 8 ranks they are written for.
    rerun = Retest("NVIDIA/Megatron-LM", 8035, check_run_id=1, external_id="1/own:8035/*")
    handle_retest(Ctx(), rerun)  # type: ignore[arg-type]
    made = [(j.test_set, j.shape, tuple(j.targets or ())) for j in _jobs(engine)]
    assert made[2:] == [("own", "2x4", (AMAX, CTX, NEW))]
    handle_retest(Ctx(), Retest("NVIDIA/Megatron-LM", 8035))  # type: ignore[arg-type]
    names = [j.test_set for j in _jobs(engine)]
    assert names.count("own") == 2 and names.count("blockwise-recipe") == 1
    # `/stackbot retest own:8035`: the own files' jobs only, on every shape they run on.
    handle_retest(Ctx(), Retest("NVIDIA/Megatron-LM", 8035, test_set="own:8035"))  # type: ignore[arg-type]
    added = _jobs(engine)[len(names) :]
    assert [(j.test_set, j.shape) for j in added] == [("own", "2x4")]
    assert all(j.reused_from_job_id is None for j in added)  # a retest runs them again


def test_each_file_is_shown_on_the_shapes_it_runs_on(engine: Engine, settings: Settings) -> None:
    files = {
        8036: [
            {"path": "tests/unit_tests/test_a.py", "status": "added", "on_main": False},
            {"path": "tests/unit_tests/test_b_2x4.py", "status": "modified", "on_main": True},
        ]
    }
    with session_scope(engine) as session:
        run = _run(session, "series", [(8036, "h8036")], own=files, tree="u" * 40)
        run_id = run.id
    assert run_id is not None
    integrate.test_runs(
        engine,
        settings,
        [run_id],
        [],
        {8036: PrState(PrNumber(8036), "h8036", True, frozenset({"h8036"}))},
        own=RULED,
    )
    with Session(engine) as session:
        series = integration_store.get_run(session, run_id=run_id)
        views = own_service.own_tests_views(session, 8036, [(series, "the series")])
    [view] = views
    assert [f.line() for f in view.files] == [
        "`tests/unit_tests/test_a.py` (1x4): queued",
        "`tests/unit_tests/test_b_2x4.py` (1x4): queued",
        "`tests/unit_tests/test_b_2x4.py` (2x4): queued",
    ]


def test_each_pr_reads_its_own_files_out_of_the_batched_job(
    engine: Engine, settings: Settings
) -> None:
    """The tree's one own-files job holds #8034's and #8035's files; each PR's row (``own:N``),
    check run and comparison with main are its files' alone: #8034's failing file fails
    #8034's check, not #8035's."""
    from stackbot.db.models import PullRequest
    from stackbot.domain.report_checks import render_check_run
    from stackbot.services import report_rows, report_views

    with session_scope(engine) as session:
        run = _run(session, "stack", [(8034, "h8034"), (8035, "h8035")], own=FILES)
        for n in (8034, 8035):
            session.add(PullRequest(repo_id=run.repo_id, number=n, head_sha=f"h{n}"))
        run_id = run.id
    assert run_id is not None
    _create(engine, settings, run_id)
    jobs = {(j.kind, j.shape): j for j in _jobs(engine)}
    tree_job = jobs[("integration", "1x4")]
    assert tree_job.id is not None
    tests = {
        f"{CTX}::test_a": "passed",
        f"{NEW}::test_b": "passed",
        f"{AMAX}::test_c": "failed",
    }
    job_execution.record_result(engine, tree_job.id, _result(tree_job.id, tests), node="n")
    with Session(engine) as session:
        view = report_views.build_report_view(
            session, settings, repo="NVIDIA/Megatron-LM", number=8035
        )
        run_row = integration_store.get_run(session, run_id=run_id)
        assert run_row is not None
        rows_8034, _ = report_rows.run_test_rows(session, run_row, "", 8034)
        rows_none, _ = report_rows.run_test_rows(session, run_row, "")
    assert view is not None
    # 8035's part of the job is its test row (and check run); 8034's is not.
    assert [(r.test_set, r.shape, r.status) for r in view.tests] == [("own:8035", "1x4", "passed")]
    [row] = view.tests
    assert row.comparison is not None and row.comparison.counts.passed == 2
    assert row.comparison.counts.failed == 0
    # main has test_ctx.py and its job has not run: main's side is pending
    assert row.comparison.main_counts is None
    check = render_check_run(view, "own:8035", "1x4")
    assert check.name == "stackbot/tests: own files" and check.conclusion == "success"
    # #8034: its file failed in the same job; main has none of its files: empty, not pending.
    assert [(r.test_set, r.shape, r.status) for r in rows_8034] == [
        ("own:8034", "1x4", "failed"),
        ("own:8034", "2x4", "queued"),
    ]
    comparison = rows_8034[0].comparison
    assert comparison is not None and comparison.main_counts is not None
    assert comparison.main_counts.passed == 0 and comparison.failing_new == (f"{AMAX}::test_c",)
    assert comparison.counts.passed == 0  # #8035's passing tests are not #8034's
    assert rows_none == ()  # no PR named: the own-files jobs are every PR's, none of them rows
    # The dashboard: the run's cell is the batched job; a PR's cell is its part of it.
    from stackbot.web.readmodel.cells import cells_of_runs, own_cells_for

    with Session(engine) as session:
        run_row = integration_store.get_run(session, run_id=run_id)
        assert run_row is not None
        cells = cells_of_runs(session, [run_row])[run_id]
        assert [c.label for c in cells] == ["own 1x4", "own 2x4"]
        assert all(c.batched_own and c.own_pr is None for c in cells)
        mine = own_cells_for(session, run_id, cells, [8035])
        theirs = own_cells_for(session, run_id, cells, [8034])
    [cell] = mine
    assert (cell.label, cell.own_pr, cell.state, cell.job.counts if cell.job else None) == (
        "own:8035 1x4",
        8035,
        "passed",
        {"passed": 2},
    )
    assert [(c.label, c.state) for c in theirs] == [
        ("own:8034 1x4", "failed"),
        ("own:8034 2x4", "running"),
    ]


# -- Megatron's unit tests need 8 ranks (issue 24 point 6) ------------------------------------

# A unit test written for 8 ranks, as Megatron's test_hyper_comm_grid.py is (it imports no
# torch, so its ranks start quickly).
GRID = "tests/unit_tests/test_hyper_comm_grid.py"
GRID_TEST = (
    "import os\n\n\n"
    "def test_any_world():\n    assert int(os.environ['WORLD_SIZE']) >= 1\n\n\n"
    "def test_grid_2x2x2():\n"
    "    world = int(os.environ['WORLD_SIZE'])\n"
    "    assert world % 8 == 0, f'Grid shape [2, 2, 2] is over sized with world size {world}'\n"
)


@pytest.mark.torchrun
def test_an_own_file_run_on_4_ranks_is_not_judged_never_the_prs_failure(
    engine: Engine, settings: Settings, tmp_path: Path
) -> None:
    """An own-files job of Megatron's unit tests that runs on 4 ranks (stored at 1x4 before the
    built-in file ran them at 2x4, or a retry of such a job) runs with the built-in file's
    min_world_size: its 8-rank test is "not judged: needs 8 ranks", the job's error is the
    configuration's, the PR's row and check run are neutral and its verdict blames nothing of
    the PR. Real torchrun ranks (gloo on CPU) through the local executor, the worker's way."""
    from gpu_jobs.executors import LocalExecutor, LocalExecutorConfig, wait_for
    from gpu_jobs.spec import Shape
    from stackbot.db.models import PullRequest
    from stackbot.domain.report_checks import render_check_run
    from stackbot.domain.verdict import decide
    from stackbot.domain.verdict_kinds import VerdictKind, row_state
    from stackbot.services import report_views

    builtin = load_own_tests()
    assert builtin is not None
    files = {8035: [{"path": GRID, "status": "added", "on_main": False}]}
    with session_scope(engine) as session:
        run = _run(session, "stack", [(8035, "h8035")], own=files)
        session.add(PullRequest(repo_id=run.repo_id, number=8035, head_sha="h8035"))
        run_id = run.id
    assert run_id is not None
    # The job as the former built-in file made it: 1x4, no ranks needed.
    four = dataclasses.replace(builtin, default_shapes=(Shape(1, 4),), min_world_size={})
    states = {8035: PrState(PrNumber(8035), "h8035", True, frozenset({"h8035"}))}
    integrate.test_runs(engine, settings, [run_id], [], states, own=four)
    [job] = [j for j in _jobs(engine) if j.test_set == "own"]
    assert (job.shape, job.targets) == ("1x4", [GRID])
    assert job.id is not None
    # The worker runs it under the built-in file of today.
    executor = LocalExecutor(LocalExecutorConfig(state_dir=tmp_path / "pool", cpu_slots=4))
    backend = job_execution.JobBackend(executor, {}, tmp_path / "jobs", False, own_tests=builtin)
    test_set = backend.test_set_of(job)
    assert test_set is not None
    tree = tmp_path / "tree"
    (tree / GRID).parent.mkdir(parents=True)
    (tree / GRID).write_text(GRID_TEST)
    spec = test_set.job_spec(job_id="own-1x4", shape="1x4", checkout=str(tree), node_check=False)
    result = wait_for(executor, executor.submit(spec, tmp_path / "job"), timeout_s=300)
    assert (result.status, result.error_of) == ("error", "configuration"), result.message
    assert result.message == (
        "tests/unit_tests needs 8 ranks and ran on 4 (shape 1x4): 1 of its tests failed or "
        "errored and are not judged; run it on a shape of at least 8 ranks"
    )
    outcomes = {t.nodeid: t for t in result.tests}
    assert outcomes[f"{GRID}::test_any_world"].outcome == "passed"
    grid = outcomes[f"{GRID}::test_grid_2x2x2"]
    assert grid.outcome == "error"
    assert grid.message.startswith("not judged: tests/unit_tests needs 8 ranks, this job has 4")
    assert "over sized with world size 4" in grid.message
    job_execution.record_result(engine, job.id, result, node="cpu")
    with Session(engine) as session:
        view = report_views.build_report_view(
            session, settings, repo="NVIDIA/Megatron-LM", number=8035
        )
    assert view is not None
    [row] = view.tests
    assert (row.test_set, row.shape, row.error_of) == ("own:8035", "1x4", "configuration")
    assert row_state(row) == "not-judged"
    check = render_check_run(view, "own:8035", "1x4")
    assert check.name == "stackbot/tests: own files" and check.conclusion == "neutral"
    # approved for testing, as a PR whose jobs ran is
    verdict = decide(dataclasses.replace(view, approval=ApprovalView("approved", by="phlip")))
    assert verdict.kind not in (VerdictKind.NEW_FAILURES, VerdictKind.BLOCKED), verdict
    assert "(the configuration, not this PR)" in verdict.summary, verdict
    assert "fail" not in verdict.summary, verdict
    assert "a maintainer gives the test set a shape with enough ranks" in verdict.action, verdict
