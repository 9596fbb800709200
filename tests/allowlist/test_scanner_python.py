"""The allowlist scan reads Megatron-LM's grammar (Python >= 3.12) whatever Python stackbot
runs on, in scanner processes found by STACKBOT_SCANNER_PYTHON or on this machine; without one,
every file its own parser refuses says which setting to fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from stackbot.adapters.scanner_process import (
    ProcessScanner,
    ScannerPython,
    find_scanner_python,
    make_scanner,
    probe,
    too_old_note,
)
from stackbot.domain.allowlist import Generation, LocalScanner, scan_current
from stackbot.errors import BadInput, RetryLater
from tests.integration.repo_builder import RepoBuilder

SCOPE, LINE = Generation.SCOPE, Generation.LINE
ROOT = Path(__file__).resolve().parents[2]

# PEP 701: quotes reused inside f-strings, a replacement field across lines, nested format specs.
PEP701 = textwrap.dedent("""\
    from megatron.core import parallel_state
    from megatron.core import parallel_state as pg


    def describe(d):
        return f"{pg.get_tensor_model_parallel_group(check_initialized=False)!r} {d["k"]}"


    def across(d):
        return f"{
            parallel_state.get_data_parallel_rank()
        } of {d["world"]!r:>{d["w"]}}"


    class Layer:
        def name(self, d):
            return f"{d["a"]}/{parallel_state.get_pipeline_model_parallel_world_size()}"
    """).encode()
PEP701_PATH = "megatron/core/transformer/pep701.py"

# What Megatron-LM's checker (tools/check_process_group_usage.py of PR #6258, the first
# generation) writes for PEP701 under Python 3.12 and 3.13; under 3.11 it skips the file.
MEGATRON_CHECKER_ON_312 = [
    "11:accessor:parallel_state.get_data_parallel_rank",
    "17:accessor:parallel_state.get_pipeline_model_parallel_world_size",
]
CURRENT_GENERATION = [
    "Layer.name:accessor:parallel_state.get_pipeline_model_parallel_world_size",
    "across:accessor:parallel_state.get_data_parallel_rank",
    "describe:accessor:parallel_state.get_tensor_model_parallel_group",
]


@pytest.fixture(scope="module")
def python312() -> ScannerPython:
    """This machine's Python >= 3.12 (CI installs one; .ci/run refuses to start without)."""
    found = find_scanner_python(None)
    assert found is not None, "no Python >= 3.12 on this machine: install one (pyenv install 3.12)"
    return found


@pytest.fixture
def scanner(python312: ScannerPython) -> Iterator[ProcessScanner]:
    made = ProcessScanner(python312, 1)
    yield made
    made.close()


def test_a_pep701_file_is_read_as_megatrons_checker_reads_it_on_312(
    scanner: ProcessScanner,
) -> None:
    [line] = scanner.scan(LINE, [PEP701])
    [scope] = scanner.scan(SCOPE, [PEP701])
    assert list(line.entries) == MEGATRON_CHECKER_ON_312 and line.error is None
    assert list(scope.entries) == CURRENT_GENERATION and scope.lines == (17, 11, 6)
    assert scanner.grammar >= "py3.12" and "Python 3.1" in scanner.description


def test_without_a_312_this_pythons_refusal_names_the_setting() -> None:
    [outcome] = LocalScanner(note=too_old_note()).scan(SCOPE, [PEP701])
    if sys.version_info >= (3, 12):  # this Python reads the grammar itself
        assert list(outcome.entries) == CURRENT_GENERATION
    else:
        assert outcome.entries == () and outcome.error is not None
        assert "STACKBOT_SCANNER_PYTHON" in outcome.error and "3.12" in outcome.error


def test_process_outcomes_equal_in_process_ones(scanner: ProcessScanner) -> None:
    sources = [
        b"from megatron.core import parallel_state as ps\ndef f():\n    ps.get_data_parallel_rank()\n",
        b"def (:\n",
        b"\xff\xfe not utf-8",
        b"x = 1\0\n",
        b"",
    ]
    local = LocalScanner().scan(SCOPE, sources)
    # Parse errors are worded by each Python's parser; the rest must be equal.
    remote = scanner.scan(SCOPE, sources)
    assert [o.entries for o in remote] == [o.entries for o in local]
    assert [o.error is None for o in remote] == [o.error is None for o in local]
    assert remote[0] == scan_current("", sources[0])


def test_a_cold_scan_is_split_over_processes_and_progress_comes_in_order(
    python312: ScannerPython,
) -> None:
    scanner = ProcessScanner(python312, 2)
    sources = [PEP701 + b"\n" * n for n in range(300)]
    seen: list[int] = []
    try:
        outcomes = scanner.scan(SCOPE, sources, seen.append)
        assert len(scanner._servers) == 2
    finally:
        scanner.close()
    assert all(list(o.entries) == CURRENT_GENERATION for o in outcomes)
    assert seen == sorted(seen) and seen[-1] == 300


def test_a_dead_scanner_process_is_a_retry_naming_the_setting_then_replaced(
    scanner: ProcessScanner,
) -> None:
    scanner.scan(SCOPE, [PEP701])
    for server in scanner._servers:
        server.process.kill()
        server.process.wait()
    with pytest.raises(RetryLater, match="STACKBOT_SCANNER_PYTHON"):
        scanner.scan(SCOPE, [PEP701])
    [again] = scanner.scan(SCOPE, [PEP701])
    assert list(again.entries) == CURRENT_GENERATION


def test_a_configured_python_that_is_missing_or_too_old_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"STACKBOT_SCANNER_PYTHON=/nonexistent/python"):
        find_scanner_python("/nonexistent/python")
    old = tmp_path / "python3.11"
    old.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'print(3, 11, 7)'\n")
    old.chmod(0o755)
    assert probe(str(old)) == ScannerPython(str(old), (3, 11, 7))
    with pytest.raises(BadInput, match=r"is Python 3\.11\.7.*>= 3\.12"):
        find_scanner_python(str(old))


def test_with_no_312_anywhere_the_scan_is_local_and_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    monkeypatch.setattr("stackbot.adapters.scanner_process._candidates", lambda: iter(()))
    made = make_scanner(None)
    if sys.version_info >= (3, 12):
        assert isinstance(made, ProcessScanner) and made.python.executable == sys.executable
    else:
        assert (
            isinstance(made, LocalScanner) and made.note and "STACKBOT_SCANNER_PYTHON" in made.note
        )


def _cli(repo: Path, data: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("STACKBOT_")}
    environment.update(PYTHONPATH=str(ROOT), STACKBOT_DATA_DIR=str(data), **env)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "stackbot",
            "allowlist",
            *argv,
            "--repo",
            str(repo),
            "--rev",
            "main",
        ],
        capture_output=True,
        text=True,
        env=environment,
        check=False,
    )


def test_the_cli_counts_pep701_reads_and_refuses_a_wrong_setting(tmp_path: Path) -> None:
    """End to end, as a user runs it on the service's default Python (3.11 here)."""
    builder = RepoBuilder(tmp_path / "work")
    builder.commit("pep 701", {PEP701_PATH: PEP701.decode()})
    done = _cli(builder.path, tmp_path / "data", "regen", "--format", "line", "--json")
    assert done.returncode == 1, done.stderr  # the reads are new: nobody listed them
    document = json.loads(done.stdout)
    assert json.loads(document["file"])["allowed"] == {PEP701_PATH: MEGATRON_CHECKER_ON_312}
    assert document["unparsed"] == {}
    wrong = _cli(
        builder.path, tmp_path / "data", "regen", STACKBOT_SCANNER_PYTHON="/nonexistent/python"
    )
    assert wrong.returncode == 2 and "Traceback" not in wrong.stderr
    assert "STACKBOT_SCANNER_PYTHON=/nonexistent/python" in wrong.stderr.strip().splitlines()[-1]
