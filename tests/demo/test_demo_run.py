"""What `stackbot demo` does, checked from its output, the stand-in and its database."""

from __future__ import annotations

import sqlite3

import httpx

from tests.demo.conftest import DemoRun

REPO = "NVIDIA/Megatron-LM"


def _comments(demo: DemoRun, number: int) -> list[dict[str, object]]:
    response = httpx.get(
        f"{demo.github_url}/_standin/repos/{REPO}/issues/{number}/comments", timeout=10
    )
    response.raise_for_status()
    return list(response.json())


def test_every_open_pr_of_the_series_has_its_report(demo: DemoRun) -> None:
    for number in (8034, 8035, 8748, 8050):
        assert f"sticky comment on #{number}" in demo.stdout
    assert any("Dashboard: http://127.0.0.1" in line for line in demo.stderr_lines)


def test_the_stack_is_tested_against_main(demo: DemoRun) -> None:
    body = demo.sticky(8748)
    assert "approved for testing by @maintainer-p" in body
    assert "amax-group 1x4" in body and "amax-group 2x4" in body and "blockwise-recipe 1x4" in body
    assert "newly pass" in body  # main's failing per-owner tests pass on the integration
    assert "depends on: #8035" in body


def test_the_allowlist_conflict_is_resolved_and_the_real_conflict_reported(demo: DemoRun) -> None:
    resolved = demo.sticky(8035)
    assert "tools/process_group_usage_allowlist.json" in resolved
    assert "regenerated on the merged tree" in resolved
    conflicting = demo.sticky(8050)
    assert "megatron/core/transformer/transformer_layer.py" in conflicting
    assert "waiting for a vetter" in conflicting


def test_a_non_vetters_ok_to_test_is_refused_and_a_vetters_accepted(demo: DemoRun) -> None:
    comments = _comments(demo, 8748)
    bot = [c for c in comments if str(c["author"]).endswith("[bot]")]
    replies = [c for c in bot if "stackbot:report" not in str(c["body"])]
    # test_demo_act.py posts `/stackbot status` on this PR of the running demo: its answers are
    # status replies (headed "stackbot status"), not replies to the demo's own commands
    replies = [c for c in replies if "stackbot status · #8748" not in str(c["body"])]
    # the demo ends with a landing: its comment (edited as it goes) and the reply to
    # maintainer-p's `/stackbot land` are not answers to `/ok to test`
    replies = [
        c
        for c in replies
        if not str(c["body"]).startswith(("<!-- stackbot:landing", "Queued the series"))
    ]
    assert len(replies) == 1, replies  # one short refusal, to contributor-z
    assert "contributor-z" in str(replies[0]["body"])
    assert "vetter" in str(replies[0]["body"])


def test_jobs_really_ran_and_identical_trees_ran_once(demo: DemoRun) -> None:
    with sqlite3.connect(demo.database) as db:
        rows = db.execute(
            "select status, tree_sha, config_hash, reused_from_job_id, kind, test_set, shape from jobs"
        ).fetchall()
    originals = [r for r in rows if r[3] is None]
    assert originals and all(r[0] in ("passed", "failed") for r in rows), rows
    assert len({(r[1], r[2]) for r in originals}) == len(originals)  # no tree tested twice
    # Series-first: the series integration's tree is tested once per test set (amax-group 1x4
    # and 2x4, blockwise-recipe 1x4); a stack whose tree is that tree tests nothing again.
    # Stack trees may also be tested when the worker got to them before the vetter's
    # `/ok to test` (the fallback for a series tree that cannot be tested yet): no assertion
    # on those, the uniqueness above covers them.
    with sqlite3.connect(demo.database) as db:  # the tree the demo's landing put on main
        (series_tree,) = db.execute("select tested_tree from landings").fetchone()
    on_series = [r for r in originals if r[1] == series_tree and r[4] == "integration"]
    configured = [r for r in on_series if r[5] != "own"]
    assert len(configured) == 3, (series_tree, rows)
    # Every PR's own test files (issues 13, 24) ran once on the series tree, in one 2x4 job:
    # Megatron writes its unit tests for 8 ranks.
    assert [(r[5], r[6]) for r in on_series if r[5] == "own"] == [("own", "2x4")]
    assert any(r[4] == "baseline" for r in rows)
    results = list((demo.workdir / "stackbot" / "jobs").glob("job-*/result.json"))
    assert len(results) == len(originals)


def test_superseded_pr_is_shown_as_superseded(demo: DemoRun) -> None:
    response = httpx.get(f"{demo.url}/api/series/6307", timeout=10)
    pulls = {p["number"]: p for p in response.json()["pulls"]}
    assert pulls[8040]["display_state"] == "superseded"
    assert pulls[8893]["display_state"] == "merged"


def test_each_prs_comment_reports_its_own_test_files_against_main(demo: DemoRun) -> None:
    """Issue 13: the files a PR adds or modifies, file by file against main (seed #8035:
    "14 vs 5 on main"): #8034 and #8748 add new files; #8035 adds a test to a file main has."""
    new_8034 = "`tests/unit_tests/test_amax_reduction_group.py` (2x4): new file: "
    assert new_8034 in demo.sticky(8034)
    comment = demo.sticky(8035)
    assert "**Own test files** of #8035" in comment
    line = next(
        x for x in comment.splitlines() if "test_quantization_context_amax_group.py` (2x4)" in x
    )
    assert line.endswith("on main"), line
    assert "4 passed vs 1 passed, 2 failed on main" in line, line
    assert "`tests/unit_tests/extension/test_te_amax_reduction_group.py` (2x4): new file:" in (
        demo.sticky(8748)
    )
    assert "Own test files" not in demo.sticky(8050)
