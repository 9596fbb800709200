"""The rewrite that keeps server paths from leaving the machine (issue 29, point 3); the e2e probe
is tests/e2e/test_no_server_paths.py."""

from __future__ import annotations

from pathlib import Path

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
