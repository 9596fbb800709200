"""The demo's ending (issue 25): maintainer-p reviews the tested series and lands it with
`/stackbot land`; #8034 → #8035 → #8748 merge bottom-up at their tested heads, #8748 is
retargeted before its parent's branch is deleted, main ends on the tree that was tested, #8050
stays open and is reported against the new main. And the carry-over figure (issue 24): the GPU
jobs the demo prints for the landing itself and for after the parents landed are 0, and the
jobs table says the same."""

from __future__ import annotations

import re
import sqlite3
from datetime import UTC, datetime
from typing import Any

import httpx

from stackbot.domain.landing_text import LANDING_MARKER
from tests.demo.conftest import DemoRun

REPO = "NVIDIA/Megatron-LM"
LANDED = (8034, 8035, 8748)


def _token(demo: DemoRun) -> str:
    response = httpx.post(
        f"{demo.github_url}/_standin/tokens", json={"login": "maintainer-p"}, timeout=10
    )
    return str(response.json()["token"])


def _get(demo: DemoRun, path: str) -> Any:
    response = httpx.get(
        f"{demo.github_url}{path}",
        headers={"Authorization": f"token {_token(demo)}"},
        timeout=10,
    )
    response.raise_for_status()
    return response.json()


def _comments(demo: DemoRun, number: int) -> list[dict[str, Any]]:
    return list(_get(demo, f"/repos/{REPO}/issues/{number}/comments"))


def _landing_section(demo: DemoRun) -> str:
    text = demo.stdout
    start = text.index("──── the landing ")
    end = text.find("Act on it as a user", start)
    return text[start : end if end >= 0 else len(text)]


def _main_sha(demo: DemoRun) -> str:
    return str(_get(demo, f"/repos/{REPO}/git/ref/heads/main")["object"]["sha"])


def test_the_series_landed_bottom_up_at_its_tested_heads(demo: DemoRun) -> None:
    pulls = {n: _get(demo, f"/repos/{REPO}/pulls/{n}") for n in (*LANDED, 8050)}
    for number in LANDED:
        assert pulls[number]["merged"] is True, pulls[number]
        assert pulls[number]["merged_by"]["login"].endswith("[bot]")  # stackbot merged it
    merged_at = [pulls[n]["merged_at"] for n in LANDED]
    assert merged_at == sorted(merged_at)  # bottom-up
    assert pulls[8748]["base"]["ref"] == "main"  # retargeted before #8035's branch went
    assert pulls[8050]["state"] == "open" and not pulls[8050]["merged"]
    # main's protection was satisfied as a maintainer does: an approving review on each
    for number in LANDED:
        reviews = _get(demo, f"/repos/{REPO}/pulls/{number}/reviews")
        assert any(
            r["user"]["login"] == "maintainer-p" and r["state"] == "APPROVED" for r in reviews
        ), reviews
    asked = [c for c in _comments(demo, 8748) if c["body"].strip() == "/stackbot land"]
    assert [c["user"]["login"] for c in asked] == ["maintainer-p"]
    body = next(c["body"] for c in _comments(demo, 8034) if c["body"].startswith(LANDING_MARKER))
    assert "✅ **Landed** on `main`: #8034 → #8035 → #8748." in body
    assert "`main` now holds the tree that was tested" in body
    # the landing's account is printed, and nothing was closed by a deleted base
    section = _landing_section(demo)
    assert "✅ **Landed** on `main`: #8034 → #8035 → #8748." in section
    assert "Retargeted onto main before their parent merged: #8748" in section
    assert "Closed by GitHub for a deleted base branch: none." in section
    story = "\n".join(demo.stderr_lines)
    for line in (
        "maintainer-p commented `/stackbot land` on #8748",
        "#8748 retargeted onto main",
        "#8034 merged at its tested head",
        "#8035 merged at its tested head",
        "#8748 merged at its tested head",
        "landed #8034 → #8035 → #8748 on main: main now holds the tree that was tested",
        "every report is posted and the series landed",
    ):
        assert line in story, line
    assert story.index("#8034 merged at") < story.index("#8035 merged at")
    assert story.index("#8035 merged at") < story.index("#8748 merged at")


def test_8050_stays_open_and_is_reported_against_the_new_main(demo: DemoRun) -> None:
    main = _main_sha(demo)
    [sticky] = [c["body"] for c in _comments(demo, 8050) if "<!-- stackbot:report" in c["body"]]
    assert f"`main` `{main[:7]}`" in sticky, sticky
    first = sticky.replace("<!-- stackbot:report v1 -->", "").strip().splitlines()[0]
    assert "**conflict** with `main`" in first and "transformer_layer.py" in first, first
    pull = httpx.get(f"{demo.url}/api/pulls/8050", timeout=10).json()["pull"]
    assert pull["verdict"]["label"] == "conflict" and pull["display_state"] == "conflict"
    line = next(x for x in _landing_section(demo).splitlines() if "Still open" in x)
    assert f"reported against the new main {main[:7]}: #8050: ❌ conflict with main" in line


def _printed_figures(demo: DemoRun) -> tuple[int, int, int]:
    section = _landing_section(demo)
    total = re.search(r"GPU jobs since `/stackbot land`: (\d+)", section)
    itself = re.search(r"for the landing itself \(before its first merge\): (\d+)", section)
    after = re.search(r"after #8034, #8035 landed, main otherwise unchanged: (\d+)", section)
    assert total and itself and after, section
    return int(total.group(1)), int(itself.group(1)), int(after.group(1))


def test_the_carry_over_figure_is_printed_zero_and_the_jobs_table_agrees(demo: DemoRun) -> None:
    total, itself, after = _printed_figures(demo)
    assert (total, itself, after) == (0, 0, 0)
    pulls = {n: _get(demo, f"/repos/{REPO}/pulls/{n}") for n in LANDED}
    first_merge = min(
        datetime.fromisoformat(pulls[n]["merged_at"].replace("Z", "+00:00")) for n in LANDED
    )
    [asked] = [c for c in _comments(demo, 8748) if c["body"].strip() == "/stackbot land"]
    asked_at = _utc(asked["created_at"].replace("Z", "+00:00"))
    with sqlite3.connect(demo.database) as db:
        (landings,) = db.execute("select count(*) from landings where state = 'landed'").fetchone()
        jobs = db.execute("select created_at, reused_from_job_id from jobs").fetchall()
    assert landings == 1
    gpu = [_utc(created) for created, reused in jobs if reused is None]
    # GitHub's times are whole seconds (rounded down): these windows hold the demo's
    since_land = [t for t in gpu if t >= asked_at]
    before_merge = [t for t in since_land if t < first_merge]
    assert len(since_land) == total and len(before_merge) == itself
    assert len(since_land) - len(before_merge) == after
    assert jobs and len(gpu) > 0  # the series itself was really tested before


def _utc(text: str) -> datetime:
    moment = datetime.fromisoformat(str(text))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
