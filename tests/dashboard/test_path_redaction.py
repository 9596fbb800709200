"""The rewrite that keeps server paths from leaving the machine (issue 29, point 3); the e2e probe
is tests/e2e/test_no_server_paths.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackbot.config import load_settings
from stackbot.path_redaction import PathRedactor


def test_server_directories_become_placeholders_and_repository_paths_stay(tmp_path: Path) -> None:
    settings = load_settings(dev=True, data_dir=tmp_path / "data")
    paths = PathRedactor.from_settings(settings)
    data = tmp_path / "data"
    text = (
        f"none of the targets exist in {data}/runner-cache/trees/3f2a; "
        f"result written to {data}/jobs/job-12/result.json; mirror {data}/mirrors/x.git; "
        f"{data}2/other stays; tests/unit_tests/x.py stays"
    )
    assert paths.redact(text) == (
        "none of the targets exist in <runner-cache>/trees/3f2a; "
        "result written to <data>/jobs/job-12/result.json; mirror <data>/mirrors/x.git; "
        f"{data}2/other stays; tests/unit_tests/x.py stays"
    )
    assert paths.redact(f"<pre>{data}/jobs</pre>", markup=True) == "<pre>&lt;data&gt;/jobs</pre>"
    assert paths.redact_value({"a": [f"{data}/x", 3]}) == {"a": ["<data>/x", 3]}


def test_a_symlinked_data_directory_is_known_by_both_names(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    paths = PathRedactor([(tmp_path / "link", "<data>")])
    assert paths.redact(f"{tmp_path}/real/jobs and {tmp_path}/link/jobs") == (
        "<data>/jobs and <data>/jobs"
    )


def test_a_relative_directory_masks_no_ordinary_word() -> None:
    paths = PathRedactor([("data", "<data>")])
    assert paths.redact("the data is fine") == "the data is fine"


def test_a_data_directory_written_relative_to_the_working_directory_is_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`STACKBOT_DATA_DIR=data stackbot demo` logs its mirrors as data/demo/stackbot/mirrors/…
    (issue 27): that spelling is a server path too, wherever the data directory was given
    absolute or relative; the same words inside a repository path stay."""
    monkeypatch.chdir(tmp_path)
    line = (
        "setup: fetching 3f2a from data/demo/stackbot/mirrors/Megatron-LM.git into "
        "./data/demo/stackbot/runner-cache/trees/3f2a; tests/data/demo/stackbot/x.py stays"
    )
    expected = (
        "setup: fetching 3f2a from <data>/mirrors/Megatron-LM.git into "
        "<runner-cache>/trees/3f2a; tests/data/demo/stackbot/x.py stays"
    )
    for data_dir in (Path("data/demo/stackbot"), tmp_path / "data" / "demo" / "stackbot"):
        settings = load_settings(dev=True, data_dir=data_dir)
        assert PathRedactor.from_settings(settings).redact(line) == expected
