"""``stackbot series graph``'s output (issue 28): each edge names its declaring text, who wrote
it and in which field; each PR's parents and each stack are printed once, so a long chain's
output is linear; a closed pipe is a quiet exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stackbot.cli.main import EXIT_CLOSED_PIPE, main


def write(path: Path, data: object) -> str:
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def test_every_edge_names_its_words_writer_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prs = [
        {"number": 1, "author": "ana", "head_ref": "ana/one"},
        {"number": 2, "author": "ana", "title": "Follow-up of #1: the eval loop"},
        {
            "number": 3,
            "author": "ben",
            "body": "Eval hook.",
            "comments": [{"author": "ben", "body": "Now stacked on #2.", "id": 7}],
        },
        {
            "number": 4,
            "author": "cy",
            "base_ref": "ana/one",
            "comments": [
                {"author": "cy", "body": "Blocked by #3.", "id": 9, "kind": "review"},
            ],
        },
        {"number": 5, "author": "dee", "body": "Merge this one first, #6 is blocked on it."},
        {"number": 6, "author": "eve"},
    ]
    path = write(tmp_path / "prs.json", prs)
    # 1: #4's base branch is #1's head while its review names #3 (a conflict; both kept).
    assert main(["series", "graph", "--from-json", path, "--json", "--repo", "acme/app"]) == 1
    graph = json.loads(capsys.readouterr().out)
    assert [p["kind"] for p in graph["problems"]] == ["conflict"]
    edges = {
        (e["child"], e["parent"], e["source"]): (e["text"], e["author"], e["field"])
        for e in graph["edges"]
    }
    assert edges == {
        (2, 1, "depends_on"): ("Follow-up of #1", "ana", "title"),
        (3, 2, "depends_on"): ("stacked on #2", "ben", "comment"),
        (4, 1, "base_branch"): ("ana/one", "cy", "base ref"),
        (4, 3, "depends_on"): ("Blocked by #3", "cy", "review"),
        (6, 5, "depends_on"): ("blocked on it", "dee", "body"),
    }


def test_review_kind_must_be_known(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "prs.json", [{"number": 1, "comments": [{"kind": "note"}]}])
    assert main(["series", "graph", "--from-json", path]) == 2
    assert "'kind' must be" in capsys.readouterr().err


def chain(size: int) -> list[dict[str, object]]:
    return [
        {
            "number": n,
            "author": "ana",
            "head_ref": f"chain/{n}",
            "base_ref": f"chain/{n - 1}" if n > 1 else "main",
            "body": f"Depends on #{n - 1}" if n > 1 else "Root.",
        }
        for n in range(1, size + 1)
    ]


def test_parents_and_each_stack_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "prs.json", chain(300))
    assert main(["series", "graph", "--from-json", path, "--json", "--repo", "acme/app"]) == 0
    graph = json.loads(capsys.readouterr().out)
    assert graph["parents"]["1"] == [] and graph["parents"]["300"] == [299]
    assert graph["stacks"] == {"300": list(range(1, 301))}
    assert main(["series", "graph", "--from-json", path, "--repo", "acme/app"]) == 0
    text = capsys.readouterr().out
    assert "  #300: #299" in text
    stacks = text.split("stacks (each once", 1)[1].split("\n\n", 1)[0]
    assert stacks.count("#1 → #2") == 1  # one stack, not one per PR


def test_closed_pipe_is_a_quiet_exit(tmp_path: Path) -> None:
    path = write(tmp_path / "prs.json", chain(3000))
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    command = [sys.executable, "-m", "stackbot", "series", "graph", "--from-json", path]
    with subprocess.Popen(
        [*command, "--repo", "acme/app"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        process.stdout.read(10)  # what `head -c 10` reads, then it goes away
        process.stdout.close()
        stderr = process.stderr.read()
        status = process.wait(timeout=120)
    assert status == EXIT_CLOSED_PIPE
    assert stderr == b""
