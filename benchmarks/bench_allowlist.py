"""Allowlist scan of a whole tree: stackbot (cold and warm cache) against Megatron-LM's checker.

The baseline is Megatron-LM's own checker (``tools/check_process_group_usage.py``, a plain
``ast`` walk of every ``megatron/core`` file), run in the same run on the same files, under the
Python stackbot's scanner uses (Megatron needs >= 3.12), timing its ``scan()`` alone (no
interpreter start). stackbot reads the tree from git objects, as the service does:

- cold: an empty scan cache and new scanner processes (their start counted), so what a first
  ``stackbot allowlist`` or a new worker pays, with one scanner process and with the default
  (one per CPU, at most 4);
- warm: a new process's view of the shared cache file (nothing parsed).

It checks the outcomes too: the first generation's allowlist written from stackbot's reads must
be byte-identical to the checker's ``--update`` output, and the fast path (files that name no
accessor are only compiled) must give exactly the full scan's outcomes.

    python benchmarks/bench_allowlist.py /work/.mirror/NVIDIA+Megatron-LM/repo --rev d98e8a6
    python benchmarks/bench_allowlist.py            # a synthetic ~3,000-file tree (CI)

Exit 1 when an output differs, or when a cold scan with the default processes is slower than
the checker.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from stackbot.adapters.git import GitRepository
from stackbot.adapters.scanner_process import (
    ProcessScanner,
    default_processes,
    find_scanner_python,
)
from stackbot.domain.allowlist import Allowlist, Generation, render_allowlist, scanner
from stackbot.domain.allowlist.scanner import is_scanned_path
from stackbot.services.scan_cache import SharedScanCache
from stackbot.services.tree_allowlist import TreeAllowlist

CHECKER = "tools/check_process_group_usage.py"
# The checker's scan, as Megatron-LM PR #6258 (9bc3420) wrote it, for the synthetic tree and for
# a clone whose history has no checker.
EMBEDDED_CHECKER = """
import ast, json, pathlib, sys
REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
SCAN_ROOT = REPO_ROOT / "megatron" / "core"
ALLOWLIST = REPO_ROOT / "tools" / "process_group_usage_allowlist.json"
EXEMPT = {"megatron/core/parallel_state.py", "megatron/core/process_groups_config.py"}
DEPRECATED_SUFFIXES = ("_group", "_groups", "_rank", "_world_size", "_src_rank")
NOT_DEPRECATED = {"get_nccl_options", "get_all_ranks", "get_global_memory_buffer",
    "get_virtual_pipeline_model_parallel_rank", "get_virtual_pipeline_model_parallel_world_size"}
def _is_deprecated_accessor(name):
    return name not in NOT_DEPRECATED and name.startswith(("get_",)) and name.endswith(DEPRECATED_SUFFIXES)
def _violations_in(path):
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except SyntaxError:
        return
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and "parallel_state" in node.module:
            for alias in node.names:
                if _is_deprecated_accessor(alias.name):
                    imported.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and _is_deprecated_accessor(func.attr):
            base = func.value
            if isinstance(base, ast.Name) and base.id in ("parallel_state", "mpu", "ps"):
                yield node.lineno, "accessor", f"{base.id}.{func.attr}"
        elif isinstance(func, ast.Name) and func.id in imported:
            yield node.lineno, "accessor", func.id
        elif isinstance(func, ast.Attribute) and func.attr == "use_mpu_process_groups":
            yield node.lineno, "shim", "use_mpu_process_groups"
def scan():
    found = {}
    for path in sorted(SCAN_ROOT.rglob("*.py")):
        rel = path.relative_to(REPO_ROOT).as_posix()
        if rel in EXEMPT:
            continue
        hits = [f"{ln}:{kind}:{detail}" for ln, kind, detail in _violations_in(path)]
        if hits:
            found[rel] = sorted(set(hits))
    return found
if __name__ == "__main__" and "--update" in sys.argv:
    found = scan()
    total = sum(len(v) for v in found.values())
    ALLOWLIST.write_text(json.dumps({"_comment": "embedded checker", "total": total,
        "allowed": found}, indent=2, sort_keys=True) + "\\n", encoding="utf-8")
"""
TIME_SCAN = (
    "import sys, time; sys.path.insert(0, 'tools'); import check_process_group_usage as c; "
    "t = time.perf_counter(); c.scan(); print(time.perf_counter() - t)"
)


ACCESSORS = [
    "get_tensor_model_parallel_group",
    "get_data_parallel_rank",
    "get_pipeline_model_parallel_world_size",
    "get_context_parallel_group",
    "get_expert_model_parallel_group",
    "get_data_parallel_group_gloo",
]


def synthetic_module(rng: random.Random, n: int, revision: int = 0) -> bytes:
    """~100 lines of Megatron-flavoured code; ``revision`` changes its content."""
    lines = [
        f'"""Module {n}, revision {revision}."""',
        "import torch",
        "from megatron.core import parallel_state as ps",
        "from .process_groups_config import ProcessGroupCollection",
        "",
    ]
    for c in range(rng.randint(1, 3)):
        lines += [f"class Layer{n}_{c}(torch.nn.Module):", "    def __init__(self, config):"]
        lines += ["        super().__init__()", "        self.config = config"]
        for m in range(rng.randint(2, 5)):
            accessor = rng.choice(ACCESSORS)
            lines += [
                f"    def method_{m}(self, x, scale={m}):",
                "        y = [v * scale for v in x if v is not None]",
                f"        group = ps.{accessor}() if self.config.flag else None",
                "        fn = lambda t: torch.relu(t) + scale",
                "        for i, v in enumerate(y):",
                "            with torch.no_grad():",
                "                v = fn(v) * i",
                "        def inner(z):",
                "            return {k: z[k] for k in sorted(z)}",
                "        return inner({'a': y, 'group': group})",
            ]
    lines += [
        "def build(config):",
        "    pgs = ProcessGroupCollection.use_mpu_process_groups()",
        "    return [Layer for _ in range(config.layers)], pgs",
        f"VERSION = {revision}",
    ]
    return ("\n".join(lines) + "\n").encode()


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True).stdout


def checker_source(repo: Path, rev: str, checker_rev: str | None) -> tuple[str, str]:
    """(the checker's source, where it came from): the tree's own, else ``--checker-rev``'s, else
    the newest commit of any ref that has one, else the embedded copy."""
    for candidate in (rev, checker_rev):
        if candidate:
            done = subprocess.run(
                ["git", "-C", str(repo), "show", f"{candidate}:{CHECKER}"],
                capture_output=True,
                check=False,
            )
            if done.returncode == 0:
                return done.stdout.decode(), f"{CHECKER} at {candidate}"
    newest = git(repo, "log", "--all", "-1", "--format=%H", "--", CHECKER).decode().strip()
    if newest:
        return git(repo, "show", f"{newest}:{CHECKER}").decode(), f"{CHECKER} at {newest[:10]}"
    return EMBEDDED_CHECKER, "the embedded copy of PR #6258's checker"


def synthetic_repo(root: Path, files: int) -> Path:
    """A git repository with a ~``files``-module megatron/core (the old synthetic tree)."""
    rng = random.Random(6307)
    repo = root / "synthetic"
    for n in range(files):
        path = repo / f"megatron/core/pkg{n % 40:02}/module_{n:04}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(synthetic_module(rng, n))
    (repo / "tools").mkdir()
    (repo / CHECKER).write_text(EMBEDDED_CHECKER)
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    git(repo, "add", "-A")
    git(repo, "-c", "user.email=b@b", "-c", "user.name=bench", "commit", "-qm", "synthetic")
    return repo


def checkout(repo: Path, rev: str, checker: str, into: Path) -> Path:
    """The tree's megatron/core and the checker, as files (what the checker scans)."""
    into.mkdir(parents=True)
    archive = git(repo, "archive", rev, "megatron/core")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    (into / "tools").mkdir(exist_ok=True)
    (into / CHECKER).write_text(checker)
    return into


def time_checker(python: str, checkout_dir: Path) -> float:
    done = subprocess.run(
        [python, "-c", TIME_SCAN], cwd=checkout_dir, capture_output=True, text=True, check=True
    )
    return float(done.stdout.strip().splitlines()[-1])


def checker_allowlist(python: str, checkout_dir: Path) -> bytes:
    subprocess.run([python, CHECKER, "--update"], cwd=checkout_dir, capture_output=True, check=True)
    return (checkout_dir / "tools/process_group_usage_allowlist.json").read_bytes()


def timed(action: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    result = action()
    return time.perf_counter() - start, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo", nargs="?", type=Path, help="a Megatron-LM clone (bare is fine)")
    parser.add_argument("--rev", default="d98e8a6", help="the tree to scan (default d98e8a6)")
    parser.add_argument("--checker-rev", help="where to take the checker from, if not the tree")
    parser.add_argument("--files", type=int, default=3000, help="synthetic tree size")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    python = find_scanner_python(None)
    if python is None:
        print("FAIL: no Python >= 3.12 here (set STACKBOT_SCANNER_PYTHON)")
        return 1
    work = Path(tempfile.mkdtemp(prefix="bench-allowlist-"))
    if args.repo is None:
        print(f"no Megatron-LM clone given: a synthetic tree of {args.files} files", flush=True)
        repo_path, rev = synthetic_repo(work, args.files), "main"
    else:
        repo_path, rev = args.repo, args.rev
    checker, origin = checker_source(repo_path, rev, args.checker_rev)
    files = checkout(repo_path, rev, checker, work / "checkout")
    repo = GitRepository(repo_path)
    tree = repo.tree_of(repo.rev_parse(rev))
    listed = repo.ls_tree(tree, "megatron/core")
    scanned = [path for path in listed if is_scanned_path(path)]
    print(
        f"tree {rev}: {len(scanned)} scanned files; baseline: {origin} under {python.description}"
    )

    # Outputs first: byte-identical to the checker, and the fast path equal to the full scan.
    failures = []
    reference = checker_allowlist(python.executable, files)
    comment = json.loads(reference)["_comment"]
    pool = ProcessScanner(python, default_processes())
    line = TreeAllowlist(repo, cache=SharedScanCache(work / "check.sqlite3"), scanner=pool)
    ours = render_allowlist(Allowlist.from_reads(comment, line.scan(tree, Generation.LINE).reads))
    pool.close()
    if ours != reference:
        failures.append("the first generation's allowlist differs from the checker's --update")
    blobs = repo.read_blobs([listed[path] for path in scanned])
    sources = [blobs[listed[path]] for path in scanned]
    for generation in Generation:
        fast = scanner.scan_sources(generation, sources)
        full = [scanner.SCANNERS[generation]("", s.decode("utf-8", "replace")) for s in sources]
        if [(o.entries, o.lines, o.error is None) for o in fast] != [
            (o.entries, o.lines, o.error is None) for o in full
        ]:
            failures.append(
                f"{generation.value}: the fast path's reads differ from the full scan's"
            )
    print(
        "outputs: first-generation allowlist "
        + ("byte-identical to the checker's" if ours == reference else "DIFFERENT")
        + f" ({len(reference)} bytes, {json.loads(reference)['total']} entries)",
        flush=True,
    )

    processes = default_processes()
    rows: dict[str, list[float]] = {}
    for round_ in range(1, args.repeat + 1):
        rows.setdefault("checker", []).append(time_checker(python.executable, files))
        for generation in Generation:
            for count in sorted({1, processes}):
                store = work / f"cold-{round_}-{generation.value}-{count}.sqlite3"

                def cold(g: Generation = generation, n: int = count, s: Path = store) -> object:
                    pool = ProcessScanner(python, n)
                    try:
                        return TreeAllowlist(repo, cache=SharedScanCache(s), scanner=pool).scan(
                            tree, g
                        )
                    finally:
                        pool.close()

                seconds, _ = timed(cold)
                rows.setdefault(f"cold {generation.value}, {count} process(es)", []).append(seconds)
            warm_pool = ProcessScanner(python, 1)
            warm = TreeAllowlist(repo, cache=SharedScanCache(store), scanner=warm_pool)
            start = time.perf_counter()
            result = warm.scan(tree, generation)
            rows.setdefault(f"warm {generation.value}", []).append(time.perf_counter() - start)
            assert result.parsed == 0
            warm_pool.close()
        print(
            f"round {round_}/{args.repeat}: "
            + ", ".join(f"{k} {v[-1]:.3f}s" for k, v in rows.items()),
            flush=True,
        )

    base = statistics.median(rows["checker"])
    print(f"\nMegatron's checker scan(): {base:.3f}s (median of {args.repeat})")
    for name, times in rows.items():
        if name != "checker":
            median = statistics.median(times)
            print(
                f"stackbot {name}: {median:.3f}s = {median / base:.3f}x the checker "
                f"({base / median:.1f}x faster)"
            )
    worst_cold = max(
        statistics.median(rows[f"cold {g.value}, {processes} process(es)"]) for g in Generation
    )
    print(
        f"cold scan with the default {processes} process(es): {worst_cold / base:.2f}x (goal <= 1)"
    )
    for failure in failures:
        print(f"FAIL: {failure}")
    repo.close()
    return 1 if failures or worst_cold > base else 0


if __name__ == "__main__":
    sys.exit(main())
