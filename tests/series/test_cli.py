"""``stackbot series graph``: the real console entry point in a subprocess, and ``main()``
in-process for the many bad-input variants (same code path, without a process start each)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stackbot.cli.main import main

SERIES = [
    {"number": 8034, "head_ref": "yx/b1", "body": "Part of #6307.", "stack": None},
    {
        "number": 8035,
        "head_ref": "yx/b2",
        "base_ref": "yx/b1",
        "body": "Depends on #8034, which adds the helper.\n\nPart of #6307.",
        "draft": False,
        "merged": False,
        "state": "open",
        "commits": [{"sha": "a" * 40, "message": "Use the helper", "parents": ["b" * 40]}],
        "comments": [{"author": "someone", "body": "/ok to test aaaaaaa"}],
    },
    {
        "number": 8748,
        "title": "Pass collections to linears",
        "body": "Part of #6307",
        "commits": [
            {"sha": "c" * 40, "message": "Merge NVIDIA#8035's head (which contains NVIDIA#8034)"}
        ],
    },
]


def run_cli(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stackbot", *args],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env={**os.environ, "PYTHONIOENCODING": "utf-8", **(env or {})},
        timeout=60,
        check=False,
    )


def write(path: Path, data: Any) -> str:
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return str(path)


def test_clean_series_exits_0_with_json(tmp_path: Path) -> None:
    result = run_cli(
        "series",
        "graph",
        "--from-json",
        write(tmp_path / "prs.json", SERIES),
        "--json",
        "--repo",
        "NVIDIA/Megatron-LM",
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "series": [{"key": "#6307", "prs": [8034, 8035, 8748], "order": [8034, 8035, 8748]}],
        "edges": [
            {
                "child": 8035,
                "parent": 8034,
                "source": "base_branch",
                "text": "yx/b1",
                "origin": "base ref",
                "author": "",
                "field": "base ref",
            },
            {
                "child": 8035,
                "parent": 8034,
                "source": "depends_on",
                "text": "Depends on #8034",
                "origin": "body",
                "author": "",
                "field": "body",
            },
            {
                "child": 8748,
                "parent": 8035,
                "source": "merged_head",
                "text": "Merge NVIDIA#8035's head (which contains NVIDIA#8034)",
                "origin": "commit ccccccc",
                "author": "",
                "field": "commit",
            },
        ],
        "parents": {"8034": [], "8035": [8034], "8748": [8035]},
        "stacks": {"8748": [8034, 8035, 8748]},
        "problems": [],
        "external": [],
        "superseded": [],
        "overrides": [],
        "suggestions": [],
    }


def test_text_rendering_shows_chains_edges_and_problems(tmp_path: Path) -> None:
    prs = [*SERIES, {"number": 9000, "body": "Depends on #1 and other/lib#4"}]
    result = run_cli(
        "series",
        "graph",
        "--from-json",
        write(tmp_path / "prs.json", prs),
        env={"STACKBOT_REPO": "NVIDIA/Megatron-LM"},
    )
    assert result.returncode == 1, result.stderr
    out = result.stdout
    assert "series #6307: #8034 #8035 #8748" in out
    assert "order: #8034 → #8035 → #8748" in out
    assert "#8748: #8034 → #8035 → #8748" in out
    assert "#8748 depends on #8035 (merged_head)" in out
    assert "missing_parent [#9000 #1]" in out
    assert "#9000 names other/lib#4" in out


def test_problems_exit_1_and_stdin(tmp_path: Path) -> None:
    prs = [{"number": 1, "body": "Depends on #2"}, {"number": 2, "body": "Depends on #1"}]
    result = run_cli("series", "graph", "--from-json", "-", "--json", stdin=json.dumps(prs))
    assert result.returncode == 1, result.stderr
    problems = json.loads(result.stdout)["problems"]
    assert [(p["kind"], p["prs"]) for p in problems] == [("cycle", [1, 2])]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not valid JSON"),
        ('{"number": 1}', "must hold a JSON list of PR records, not an object"),
        ('[{"number": 1, "merged": "yes"}]', "record 0 (#1): 'merged' must be true or false"),
        ('[{"title": "no number"}]', "record 0: 'number' is missing"),
    ],
)
def test_bad_input_exits_2_without_traceback(tmp_path: Path, content: str, message: str) -> None:
    result = run_cli("series", "graph", "--from-json", write(tmp_path / "prs.json", content))
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([{"number": "8034"}], "'number' must be a positive integer, not \"8034\" (a string)"),
        ([{"number": True}], "'number' must be a positive integer, not true (a boolean)"),
        ([{"number": -3}], "'number' must be a positive integer, not -3"),
        ([{"number": 1.5}], "'number' must be a positive integer"),
        ([7], "record 0 must be a JSON object, not 7 (a number)"),
        ([{"number": 1, "body": 5}], "(#1): 'body' must be a string, not 5 (a number)"),
        ([{"number": 1, "state": "merged"}], '\'state\' must be "open" or "closed"'),
        (
            [{"number": 1, "state": "open", "merged": True}],
            "'merged' is true but 'state' is \"open\"",
        ),
        ([{"number": 1, "commits": "abc"}], "'commits' must be a JSON list"),
        ([{"number": 1, "commits": [{"message": 3}]}], "commits[0]: 'message' must be a string"),
        ([{"number": 1, "commits": [{"parents": [None]}]}], "commits[0]: parent 0 must be a SHA"),
        (
            [{"number": 1, "comments": [{"body": []}]}],
            "comments[0]: 'body' must be a string, not a list",
        ),
        ([{"number": 1, "stack": []}], "'stack' must be a JSON object, not a list"),
        ([{"number": 1, "stack": {"position": "2"}}], "'stack': 'position' must be an integer"),
        ([{"number": 1, "stack": {"base": {"ref": 1}}}], "'stack'.base: 'ref' must be a string"),
        ([{"number": 1}, {"number": 1}], "records 0 and 1 are both PR #1"),
    ],
)
def test_malformed_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: Any, message: str
) -> None:
    status = main(["series", "graph", "--from-json", write(tmp_path / "prs.json", data)])
    captured = capsys.readouterr()
    assert status == 2
    assert message in captured.err
    assert captured.out == ""


def test_missing_file_and_bad_repository(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["series", "graph", "--from-json", str(tmp_path / "absent.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
    path = write(tmp_path / "prs.json", [{"number": 1}])
    assert main(["series", "graph", "--from-json", path, "--repo", "NVIDIA"]) == 2
    assert "--repo must be 'owner/name'" in capsys.readouterr().err
    monkeypatch.setenv("STACKBOT_REPO", "no-slash")
    assert main(["series", "graph", "--from-json", path]) == 2
    assert "STACKBOT_REPO must be 'owner/name'" in capsys.readouterr().err


def test_missing_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["series", "graph"])
    assert exit_info.value.code == 2
    assert "--from-json" in capsys.readouterr().err


def test_optional_fields_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = [
        {"number": 1, "head_ref": "one", "title": None, "body": None, "commits": None},
        {"number": 2, "base_ref": "one", "merged": True},
        {
            "number": 3,
            "commits": [{"sha": "x", "commit": {"message": "Merge #1"}, "parents": [{"sha": "y"}]}],
        },
    ]
    assert (
        main(["series", "graph", "--from-json", write(tmp_path / "prs.json", data), "--json"]) == 0
    )
    graph = json.loads(capsys.readouterr().out)
    assert [(e["child"], e["parent"], e["source"]) for e in graph["edges"]] == [
        (2, 1, "base_branch"),
        (3, 1, "merged_head"),
    ]
    assert graph["parents"] == {"1": [], "2": [1], "3": [1]}
    assert graph["stacks"] == {"2": [1, 2], "3": [1, 3]}


def test_repo_option_decides_what_is_local(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(
        tmp_path / "prs.json", [{"number": 1, "body": "Depends on acme/app#2"}, {"number": 2}]
    )
    assert main(["series", "graph", "--from-json", path, "--json", "--repo", "acme/app"]) == 0
    assert json.loads(capsys.readouterr().out)["edges"] == [
        {
            "child": 1,
            "parent": 2,
            "source": "depends_on",
            "text": "Depends on acme/app#2",
            "origin": "body",
            "author": "",
            "field": "body",
        }
    ]
    assert main(["series", "graph", "--from-json", path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["external"] == [{"child": 1, "ref": "acme/app#2"}]


def test_ascii_terminal_gets_plain_arrows(tmp_path: Path) -> None:
    result = run_cli(
        "series",
        "graph",
        "--from-json",
        write(tmp_path / "prs.json", SERIES),
        env={"PYTHONIOENCODING": "ascii"},
    )
    assert result.returncode == 0, result.stderr
    assert "#8034 -> #8035 -> #8748" in result.stdout
