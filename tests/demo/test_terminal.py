"""The demo's terminal (issue 12 point 8), without running the demo: one progress line that
says what runs, printed again in a pipe only when that changes, and the work directory taken
from STACKBOT_DATA_DIR."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stackbot.cli.demo import _default_workdir
from stackbot.db.models import IntegrationRun, Job
from stackbot.demo.runner import Progress, progress_line
from stackbot.demo.story import JobFacts, RunFacts, StepFacts, Story, pr_summary

NOW = datetime(2026, 12, 4, 0, 0, tzinfo=UTC)


def _job(job_id: int, status: str, **fields: object) -> Job:
    values: dict[str, object] = {
        "id": job_id,
        "repo_id": 1,
        "test_set": "amax-group",
        "shape": "2x4",
        "tree_sha": "a" * 40,
        "commit_sha": "b" * 40,
        "config_hash": "c" * 64,
        "status": status,
    }
    values.update(fields)
    return Job(**values)  # type: ignore[arg-type]


def test_the_progress_line_names_the_job_its_tree_and_its_seconds() -> None:
    run = IntegrationRun(id=7, repo_id=1, kind="stack", target_pr=8035)  # type: ignore[call-arg]
    jobs = [
        _job(1, "passed", kind="baseline"),
        _job(2, "running", integration_run_id=7, started_at=NOW - timedelta(seconds=40)),
        _job(3, "queued", integration_run_id=7),
    ]
    key, line = progress_line(jobs, {7: run}, [], NOW)
    assert line == "job 2/3: amax-group 2x4 for #8035's stack, 40 s"
    assert key.startswith("job 2/3: amax-group 2x4 for #8035's stack")
    baseline = [_job(1, "running", kind="baseline", started_at=NOW)]
    assert "for main bbbbbbb (baseline)" in progress_line(baseline, {}, [], NOW)[1]
    own = [_job(1, "running", test_set="own:8034", started_at=NOW)]
    assert "job 1/1: #8034's own test files 2x4 for" in progress_line(own, {}, [], NOW)[1]


def test_between_jobs_the_line_says_what_stackbot_does_in_words() -> None:
    key, line = progress_line([_job(1, "passed")], {}, ["report", "sync_pull", "report"], NOW)
    assert key.startswith("jobs 1/1 finished busy ")
    assert line == "jobs 1/1 finished; stackbot is busy: reading the PRs, posting reports"
    assert "sync_pull" not in line and "tasks" not in line


def test_the_story_tells_each_event_once_in_its_own_words() -> None:
    story = Story()
    layer = "megatron/core/transformer/transformer_layer.py"
    series = RunFacts(
        5,
        "series",
        "conflict",
        "main",
        series_key="#6307",
        steps=(
            StepFacts(8034, "clean"),
            StepFacts(8035, "resolved", resolved_files=("tools/allowlist.json",)),
            StepFacts(8050, "conflict", (layer,), (8035,)),
        ),
    )
    running = RunFacts(6, "stack", "running", "main", target_pr=8748)
    lines = story.update(
        runs=[series, running],
        approvals=[(8034, "c626a41" + "0" * 33, "connor-xy", "trusted")],
        replies=[(8748, 11, "@contributor-z, only vetters can approve. Ask one.")],
        jobs=[
            JobFacts(3, "own:8034", "2x4", "passed", "the series #6307", {"passed": 5}),
            JobFacts(4, "amax-group", "2x4", "running", "the series #6307"),
        ],
    )
    text = "\n".join(lines)
    assert "#8034 is by connor-xy, a trusted author: c626a41 is tested without waiting" in text
    assert "stackbot answered on #8748: @contributor-z, only vetters can approve." in text
    assert "integrated the series #6307 (3 PRs) onto main: a conflict was found" in text
    assert f"#8050 conflicts with #8035 in {layer}: left out of the series run" in text
    assert "the conflict of #8035 in the generated tools/allowlist.json was resolved" in text
    assert "tested #8034's own test files 2x4 on the series #6307: 5 passed" in text
    assert "#8748's stack" not in text and "amax-group" not in text  # not finished yet
    assert "own:" not in text and "_" not in text.replace("transformer_layer", "")
    # nothing is told twice; a finished job is told when it finishes
    again = story.update(
        runs=[series],
        jobs=[JobFacts(4, "amax-group", "2x4", "passed", "the series #6307", {"passed": 11})],
    )
    assert again == ["tested amax-group 2x4 on the series #6307: 11 passed"]
    # a later run of a stack holding #8035 resolves its allowlist the same way: not told again
    stack = RunFacts(7, "stack", "resolved", "main", target_pr=8748, steps=series.steps[:2])
    assert story.update(runs=[stack]) == [
        "integrated #8748's stack (2 PRs) onto main: merges, with a generated file regenerated"
    ]


def test_each_pr_gets_one_summary_line_from_its_comment() -> None:
    comment = (
        "<!-- stackbot:report v1 -->\n✅ **ready**: integrated and tested on `f172839` — nothing "
        "to do\n✅ no failures\n<sub>stackbot · #8034</sub>\n\nmore"
    )
    assert pr_summary(8034, comment) == (
        "#8034: ✅ ready: integrated and tested on f172839 — nothing to do · ✅ no failures"
    )


def test_a_story_line_clears_the_live_progress_line_first() -> None:
    said: list[str] = []
    stream = io.StringIO()
    stream.isatty = lambda: True  # type: ignore[method-assign]
    progress = Progress(said.append, stream=stream)
    progress.show("job 1", "job 1/3: amax-group 1x4, 3 s")
    progress.event("integrated #8034's stack (1 PR) onto main: merges cleanly")
    assert stream.getvalue().endswith("\r\033[K")  # the half line is erased, not left behind
    assert said == ["integrated #8034's stack (1 PR) onto main: merges cleanly"]
    progress.show("job 1", "job 1/3: amax-group 1x4, 4 s")  # drawn again below the event
    assert stream.getvalue().endswith("job 1/3: amax-group 1x4, 4 s")


def test_in_a_pipe_a_story_line_does_not_repeat_the_progress_line() -> None:
    said: list[str] = []
    progress = Progress(said.append, stream=io.StringIO())
    progress.show("jobs 0/0", "jobs 0/0 finished; stackbot is busy: integrating")
    progress.event("maintainer-p approved #8748 at 7a162bc for testing")
    progress.show("jobs 0/0", "jobs 0/0 finished; stackbot is busy: integrating")
    assert said == [
        "jobs 0/0 finished; stackbot is busy: integrating",
        "maintainer-p approved #8748 at 7a162bc for testing",
    ]


def test_a_queue_draining_without_jobs_says_so_every_30_s_in_a_pipe() -> None:
    said: list[str] = []
    progress = Progress(said.append, stream=io.StringIO())
    start = datetime(2026, 12, 4, 4, 0, 0, tzinfo=UTC)  # on a 30 s boundary
    for seconds in range(0, 90, 5):  # 90 s of tasks and no job, polled every 5 s
        progress.show(
            *progress_line([], {}, ["process_delivery"], start + timedelta(seconds=seconds))
        )
    assert len(said) == 3, said  # 0-29 s, 30-59 s, 60-89 s
    assert all(
        line == "jobs 0/0 finished; stackbot is busy: reading GitHub's events" for line in said
    )


def test_in_a_pipe_the_line_is_printed_again_only_when_what_runs_changes() -> None:
    said: list[str] = []
    progress = Progress(said.append, stream=io.StringIO())  # not a terminal
    for seconds in range(0, 65, 5):  # one job running for a minute, polled every 5 s
        job = _job(1, "running", started_at=NOW - timedelta(seconds=seconds))
        progress.show(*progress_line([job], {}, [], NOW))
    progress.show(*progress_line([_job(1, "passed")], {}, [], NOW))
    # 0-29 s, 30-59 s, 60 s: a long job still says so every 30 s; then the end of the job
    assert len(said) == 4, said
    assert said[-1] == "jobs 1/1 finished"


def test_on_a_terminal_the_line_is_rewritten_in_place() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    said: list[str] = []
    progress = Progress(said.append, stream=stream)
    progress.show("a", "jobs 0/2 finished")
    progress.show("b", "job 1/2: amax-group 2x4 for main bbbbbbb (baseline), 1 s")
    progress.end()
    assert said == []
    assert stream.getvalue().count("\r\033[K") == 2 and stream.getvalue().endswith("\n")


def test_the_work_directory_is_under_stackbot_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STACKBOT_DATA_DIR", str(tmp_path))
    assert _default_workdir() == tmp_path / "demo"
